"""``freezeview export``: write before/after/diff pictures, IR diffs and an index page.

The engine (torch, the drawing code) and rich are imported when the command runs:
``--help`` and usage errors need none of them.
"""

from __future__ import annotations

import argparse
import json
import sys
from functools import partial
from typing import TYPE_CHECKING, Any

from .options import (
    add_input_options,
    add_measure_options,
    add_model_options,
    add_pass_options,
    add_plan_options,
    autograd_from_args,
    inputs_from_args,
    load_from_args,
    measure_from_args,
    plan_from_args,
    split_names,
)

if TYPE_CHECKING:
    from rich.console import Console

    from ..engine.migrate import Migration
    from ..engine.output import ExportResult

__all__ = ["import_engine", "register", "run"]

# The drawing code's choices and defaults, as --help states them without importing it
# (the drawing code's imports); tests/cli/test_help.py checks that they are the engine's.
FORMATS = ("svg", "png", "dot")
CONSTANT_MODES = ("fold", "hide-trivial", "nodes")
DEFAULT_BUDGET = 300
DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_BOXES = 14_000


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``export`` subcommand."""
    parser = sub.add_parser(
        "export",
        help="write before/after/diff pictures, IR diffs and an index.html for a freeze",
        description=(
            "Freeze the model step by step and write before.svg, after.svg, diff.svg "
            "(added green, changed amber, removed as red ghosts), side-by-side.svg, ir.diff "
            "and index.html into a directory; --per-step adds one picture and diff per step. "
            "Large graphs are drawn with one box per submodule; --expand opens chosen ones."
        ),
    )
    add_model_options(parser)
    add_plan_options(parser)
    parser.add_argument(
        "-o", "--output", metavar="DIR", required=True, help="directory to write into"
    )
    parser.add_argument("--force", action="store_true", help="overwrite existing output files")
    add_pass_options(parser)
    add_input_options(parser)
    add_measure_options(parser, autograd=True)
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="svg",
        help="picture format (dot: DOT text only, no Graphviz needed; default: svg)",
    )
    parser.add_argument(
        "--per-step", action="store_true", help="also one picture and IR diff per pipeline step"
    )
    parser.add_argument(
        "--migrate",
        action="store_true",
        help="also run freezeview migrate on the sample inputs and add its findings to "
        "index.html (needs --inputs or --input-shape)",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with sample inputs: time each node of the unfrozen module's forward and of "
        "every step that changed the graph (as freeze --profile) and fill each picture's "
        "boxes by their share of the forward's time (a heat overlay; module boxes add up "
        "their ops), with each step's dearest kinds and nodes before and after on the page",
    )
    parser.add_argument(
        "--expand",
        action="append",
        metavar="SCOPE",
        help="draw this submodule down to its ops (repeatable, comma-separated: layer3.1)",
    )
    parser.add_argument(
        "--level",
        default="auto",
        metavar="auto|ops|N",
        help="collapse level: auto (fit --budget), ops (every op), or N (one box per "
        "submodule N deep); default: auto",
    )
    parser.add_argument(
        "--budget",
        type=int,
        default=DEFAULT_BUDGET,
        metavar="N",
        help=f"most boxes per picture at --level auto (default: {DEFAULT_BUDGET})",
    )
    parser.add_argument(
        "--constants",
        choices=CONSTANT_MODES,
        default="fold",
        help="constants inside their users (fold, default), without trivial ones "
        "(hide-trivial), or as nodes (slow on big graphs)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=DEFAULT_TIMEOUT,
        metavar="SECONDS",
        help="time Graphviz may take per picture before a coarser picture is drawn "
        f"(default: {DEFAULT_TIMEOUT:g})",
    )
    parser.add_argument(
        "--max-boxes",
        type=int,
        default=None,
        metavar="N",
        help="most boxes handed to Graphviz; a bigger picture is drawn coarser without "
        f"trying (default: {DEFAULT_MAX_BOXES} at a "
        f"{DEFAULT_TIMEOUT:g} s timeout, doubling with every eightfold --timeout)",
    )
    parser.add_argument(
        "--no-open-changed",
        dest="open_changed",
        action="store_false",
        help="at --level auto, do not open the module boxes where something changed "
        "(by default diff pictures open them while they fit --budget)",
    )
    parser.add_argument(
        "--one-process",
        dest="parallel",
        action="store_false",
        help="make the diffs in this process too (by default, on Linux with a second CPU, "
        "a forked helper process makes them while freezeview explains and draws)",
    )
    parser.add_argument("--json", action="store_true", help="a JSON summary on stdout")
    parser.set_defaults(func=run)


def _level(text: str) -> int | str | None:
    from ..engine.plumbing import BadInputError

    if text == "auto":
        return "auto"
    if text in ("ops", "all", "full"):
        return None
    if text.isdigit() and int(text) >= 1:
        return int(text)
    raise BadInputError(f"--level {text!r} is not auto, ops or a positive number.")


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.output import export_model as export  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview export``; returns the exit code."""
    from rich.console import Console

    from ..engine.draw import RenderOptions
    from ..engine.output import export_model as export
    from ..engine.plumbing import BadInputError
    from .console import report_console

    if args.budget < 1:
        raise BadInputError("--budget must be at least 1.")
    if args.timeout <= 0:
        raise BadInputError("--timeout must be a positive number of seconds.")
    if args.max_boxes is not None and args.max_boxes < 1:
        raise BadInputError("--max-boxes must be at least 1.")
    options = RenderOptions(
        level=_level(args.level),
        budget=args.budget,
        expand=tuple(split_names(args.expand)),
        constants=args.constants,
        timeout=args.timeout,
        max_boxes=args.max_boxes,
        open_changed=args.open_changed,
    )
    plan = plan_from_args(args)
    threads, budget = measure_from_args(args)
    inputs = inputs_from_args(args)
    _check_profile(args, inputs is not None, budget)
    # --migrate: run first, so that inputs the model rejects stop it before anything is written.
    migration = _migration(args, inputs, threads, budget) if args.migrate else None
    err = Console(stderr=True, highlight=False)
    # No spinner while forwards are timed: its thread would share the interpreter with them.
    quiet = args.json or not err.is_terminal or inputs is not None
    with err.status("freezing…") as status:
        result = export(
            # Loaded by the export, which lets the model go once the freeze is read: the
            # weights are not held while the pictures are drawn.
            partial(load_from_args, args),
            args.output,
            plan=plan,
            fmt=args.format,
            per_step=args.per_step,
            options=options,
            force=args.force,
            progress=None if quiet else (lambda text: status.update(text + "…")),
            # The only other thread here is the progress spinner's, which takes no lock
            # the diffs need: the forked helper is safe (engine/plumbing/forked.py).
            parallel=args.parallel,
            inputs=inputs,
            measure=(threads, budget, autograd_from_args(args)),
            profile=args.profile,
        )
    if migration is not None and result.index is not None:
        from ..engine.output import add_migration_section

        add_migration_section(result.index, migration)
    if args.json:
        document = _json(result)
        if migration is not None:
            document["migration"] = migration.to_json()
        json.dump(document, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    _print(report_console(), result)
    if migration is not None:
        from rich.markup import escape

        report_console().print(
            f"migration: {escape(migration.verdict)} (freezeview migrate's findings are in "
            "the page's header)"
        )
    return 0


def _check_profile(args: argparse.Namespace, has_inputs: bool, budget: float) -> None:
    """``--profile`` times forwards: refused without sample inputs or time to spend."""
    from ..engine.plumbing import BadInputError

    if not args.profile:
        return
    if not has_inputs:
        raise BadInputError(
            "--profile needs sample inputs to run the forwards it times: add --inputs "
            "FILE.pt or --input-shape 1,3,224,224."
        )
    if budget <= 0:
        raise BadInputError("--profile times forwards: give a --time-budget above 0.")


def _migration(
    args: argparse.Namespace, inputs: tuple[Any, ...] | None, threads: int, budget: float
) -> Migration:
    """``export --migrate``: :func:`~freezeview.engine.migrate.migrate` on the model file
    and the sample inputs, timed as the export times its steps."""
    from ..engine.plumbing import BadInputError
    from .migrate import migrate_from_args

    if not inputs:
        raise BadInputError(
            "export --migrate needs sample inputs for torch's converter: give --inputs "
            "FILE.pt or --input-shape (e.g. --input-shape 1,3,224,224)."
        )
    return migrate_from_args(args, inputs, threads, budget)


def _json(result: ExportResult) -> dict[str, object]:
    timings = {
        "load": result.load_seconds,
        "freeze": result.freeze_seconds,
        "snapshot": result.snapshot_seconds,
        "diff": result.diff_seconds,
        "ir_diff": result.ir_diff_seconds,
        "build": result.build_seconds,
        "dot": result.dot_seconds,
        "write": result.write_seconds,
        "reasons": result.reasons_seconds,
        "notes": result.notes_seconds,
        "index": result.index_seconds,
        "helper": result.helper_seconds,
        "helper_wait": result.helper_wait_seconds,
        "dot_wait": result.dot_wait_seconds,
        "gc": result.gc_seconds,
        "total": result.total_seconds,
    }
    return {
        "directory": str(result.directory),
        "index": str(result.index) if result.index else None,
        "files": [str(p) for p in result.files],
        "pictures": [
            {
                "name": r.path.name,
                "level": "ops" if r.level is None else r.level,
                "nodes": r.nodes,
                "edges": r.edges,
                "bytes": r.size,
                "opened": list(r.split),
                "build_seconds": round(r.build_seconds, 4),
                "dot_seconds": round(r.dot_seconds, 4),
            }
            for r in result.all_renders()
        ],
        "notes": result.notes,
        **{f"{name}_seconds": round(seconds, 4) for name, seconds in timings.items()},
        **_measured_json(result),
    }


def _measured_json(result: ExportResult) -> dict[str, object]:
    """``profile`` (with --profile) and ``numerics_bisect`` (a step bisected): the
    node_time and numerics_bisect lines freeze --json writes, as two keys."""
    facts = result.facts
    out: dict[str, object] = {}
    profile = facts.profile_json()
    if profile is not None:
        out["profile"] = profile
    if facts.bisections:
        out["numerics_bisect"] = [b.to_json() for b in facts.bisections]
    return out


def _print(console: Console, result: ExportResult) -> None:
    from rich.table import Table

    from .console import fit_table

    table = Table(title=f"freezeview export → {result.directory}", title_justify="left")
    table.add_column("picture")
    table.add_column("level")
    table.add_column("boxes", justify="right")
    table.add_column("size", justify="right")
    table.add_column("graphviz", justify="right")
    for r in result.all_renders():
        table.add_row(
            r.path.name,
            "every op" if r.level is None else f"depth {r.level}",
            str(r.nodes),
            f"{r.size / 1024:.0f} KB",
            f"{r.dot_seconds:.2f} s",
        )
    console.print(fit_table(console, table))
    for note in result.notes:
        console.print(f"[yellow]note:[/] {note}")
    if result.measurement is not None and result.measurement.unfrozen is not None:
        from rich.markup import escape

        from ..engine.measure import verdict_text

        console.print(f"[bold]{escape(verdict_text(result.measurement))}[/]")
    _print_measured(console, result)
    if result.index is not None:
        console.print(f"Open [bold]{result.index}[/] in a browser.")


def _print_measured(console: Console, result: ExportResult) -> None:
    """Which clock timed what (--profile), and the node where the numbers move."""
    from rich.markup import escape

    facts = result.facts
    for note in facts.notes:
        console.print(f"[yellow]note:[/] {escape(note)}")
    for profile in facts.profiles:
        label = "unfrozen module" if profile.step is None else f"step {profile.step}"
        console.print(f"time per node, {escape(label)}: {escape(profile.measured_by())}")
    for bisection in facts.bisections:
        console.print(f"where the numbers move: {escape(bisection.message)}")
