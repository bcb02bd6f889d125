"""``freezeview explain``: why each attribute is, or is not, inlined by freezing; with
``--migrate``, beside it what the move to torch.export loses (``freezeview migrate`` run
once on the sample inputs).

rich and the engine (torch) are imported when the command runs: ``--help`` needs
neither.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Hashable, Iterable
from typing import TYPE_CHECKING, Any

from .console import fit_table, is_unbounded, report_console
from .explain_export import (
    export_marks,
    mark_text,
    marked_reason,
    migration_json,
    print_migration,
    run_migration,
)
from .options import (
    add_input_options,
    add_measure_options,
    add_model_options,
    add_plan_options,
    autograd_from_args,
    inputs_from_args,
    load_from_args,
    measure_from_args,
    preserved_from_args,
)

if TYPE_CHECKING:
    from rich.console import Console, ConsoleOptions
    from rich.segment import Segment
    from rich.table import Table
    from rich.text import Text

    from ..engine.graph import FrozenContents
    from ..engine.measure import Measurement
    from ..engine.migrate import Migration, StateWrite
    from ..engine.reasons import AttributeVerdict, Explanation
    from .explain_groups import ModuleGroup, RowGroup

__all__ = [
    "import_engine",
    "print_disagreements",
    "print_frozen_contents",
    "register",
    "render_explanation",
    "run",
]

STATUS_STYLE = {"kept": "bold yellow", "inlined": "green", "dropped": "dim"}
STATUS_ORDER = {"kept": 0, "inlined": 1, "dropped": 2}


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``explain`` subcommand."""
    parser = sub.add_parser(
        "explain",
        help="say for every attribute whether freezing inlines, keeps or drops it, and why",
        description=(
            "For every attribute of a TorchScript model: will torch.jit.freeze fold it into "
            "the graph as a constant (inlined), keep it as a module attribute (kept), or "
            "remove it (dropped) - and why."
        ),
    )
    add_model_options(parser)
    add_plan_options(parser)
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument(
        "--status",
        action="append",
        choices=("kept", "inlined", "dropped"),
        help="only show attributes with this status (repeatable)",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list the `training` flags and hook placeholders every module carries",
    )
    parser.add_argument(
        "--each-module",
        action="store_true",
        help=(
            "one table per module: without it, submodules of the same type whose rows "
            "are alike (module path aside; never one with a kept attribute) print once, "
            "titled with the paths they cover, e.g. `blocks.0-511.bn  BatchNorm2d  "
            "(512 alike)`; --json always lists every attribute"
        ),
    )
    add_input_options(parser)
    add_measure_options(parser, autograd=True)
    parser.add_argument(
        "--migrate",
        action="store_true",
        help=(
            "also run freezeview migrate on the sample inputs (needs --inputs or "
            "--input-shape): a torch.export section, and on each attribute whose state "
            "write the ExportedProgram loses, `lost in torch.export` at the writing line; "
            "the exit code stays explain's"
        ),
    )
    parser.set_defaults(func=run)


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.reasons import explain  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview explain``; returns the exit code."""
    from ..engine.reasons import explain

    threads, budget = measure_from_args(args)
    inputs = inputs_from_args(args)
    if args.migrate and not inputs:
        from ..engine.plumbing import BadInputError

        raise BadInputError(
            "explain --migrate needs sample inputs for torch's converter: give --inputs "
            "FILE.pt or --input-shape (e.g. --input-shape 1,3,224,224)."
        )
    loaded = load_from_args(args)
    # Without a figure to measure the command exits once it has printed: torch's frozen
    # clone can go with the process (emptying its graphs grows with the model).
    measured = inputs is not None and budget > 0
    result = explain(loaded, preserved_from_args(args), release=measured)
    if args.debug and result.disagreements:
        print_disagreements(report_console(stderr=True), result)
    figure: Measurement | str | None = None
    if measured and inputs is not None:
        figure = _final_figure(
            loaded.module,
            inputs,
            preserved_from_args(args),
            threads,
            budget,
            autograd=autograd_from_args(args),
        )
    # Reported, never enforced: the exit code is explain's (check holds the rules).
    migration = run_migration(args, inputs, threads, budget) if args.migrate and inputs else None
    if args.json:
        data = result.to_json()
        if migration is not None:
            migration_json(data, migration)
        if isinstance(figure, str):
            print(f"note: {figure}", file=sys.stderr)
        elif figure is not None:
            data["latency_ms"] = figure.latency_json()
        json.dump(data, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    console = report_console()
    render_explanation(
        console,
        result,
        statuses=args.status,
        show_all=args.all,
        each_module=args.each_module,
        migration=migration,
    )
    if isinstance(figure, str):
        from rich.markup import escape

        console.print(f"[bold]{escape(figure)}[/]")
    elif figure is not None:
        from rich.markup import escape

        from ..engine.measure import verdict_text

        console.print(f"[bold]{escape(verdict_text(figure))}[/]")
    return 0


def _final_figure(
    module: Any,
    inputs: tuple[Any, ...],
    preserved: list[str],
    threads: int,
    budget: float,
    *,
    autograd: bool = False,
) -> Measurement | str:
    """torch.jit.freeze's forward against the unfrozen one, or one sentence why not:
    a string when freezeview does not run the model (a constant the frozen graph
    writes and cannot be copied), whatever the inputs."""
    from ..engine.freeze import SandboxError
    from ..engine.measure import final_figure
    from ..engine.plumbing import FreezeviewError, inputs_rejected

    try:
        return final_figure(
            module,
            inputs,
            preserved_attrs=preserved,
            threads=threads,
            budget=budget,
            autograd=autograd,
        )
    except FreezeviewError:
        raise
    except SandboxError as exc:
        return f"latency not measured: {exc}."
    except Exception as exc:
        raise inputs_rejected(exc, inputs) from exc


def _visible(
    verdicts: Iterable[AttributeVerdict], statuses: list[str] | None, show_all: bool
) -> list[AttributeVerdict]:
    from ..engine.graph import HOUSEKEEPING  # not for --help's sake

    shown = []
    for v in verdicts:
        if statuses and v.status not in statuses:
            continue
        # Every module carries these; listing hundreds of them hides what matters,
        # unless one of them is kept (then it is news).
        if not show_all and v.info.name in HOUSEKEEPING and v.status != "kept":
            continue
        shown.append(v)
    return shown


def _groups(verdicts: list[AttributeVerdict]) -> dict[str, list[AttributeVerdict]]:
    groups: dict[str, list[AttributeVerdict]] = {}
    for v in verdicts:
        groups.setdefault(v.info.owner, []).append(v)
    return groups


def _reason_text(v: AttributeVerdict, mark: StateWrite | None = None) -> Text:
    """The why cell; with ``mark`` (``--migrate``), what torch.export does with the
    forward's write, on the line of the reason's source where explain names it."""
    from rich.text import Text

    text = Text()
    marked = marked_reason(v, mark)
    for i, reason in enumerate(v.reasons):
        if i:
            text.append("\n")
        text.append(f"{reason.code}", style="bold")
        text.append(f": {reason.message}")
        if reason.node and reason.code in ("set-attr", "in-place-write", "written-constant"):
            # The IR line's trailing `# file:line:col` repeats the source shown below.
            text.append(f"\n  {reason.node.split(' # ', 1)[0]}", style="cyan")
        if reason.source and reason.code in _LOCATED:
            text.append(f"\n  at {reason.source}", style="dim")
            if mark is not None and i == marked:
                text.append("  " + mark_text(mark)[0], style=mark_text(mark)[1])
            if reason.source_text:
                text.append(f"\n  | {reason.source_text}", style="green")
    if mark is not None and marked is None:
        # explain names no write here with a source (another plan, a traced model):
        # migrate's own line for it.
        where = mark.source or "no source line recorded"
        text.append(f"\n  {mark_text(mark)[0]} at {where}", style=mark_text(mark)[1])
    return text


# Reason codes whose node and source line are worth a line of their own.
_LOCATED = (
    "set-attr",
    "in-place-write",
    "written-constant",
    "dead-code",
    "forked",
    "undetermined",
)


def _type_text(v: AttributeVerdict) -> str:
    # `__torch__.torch.nn.modules.conv.Conv2d` says no more than `Conv2d` here.
    return v.type.rsplit(".", 1)[-1] if v.type.startswith("__torch__.") else v.type


def _value_text(v: AttributeVerdict) -> str:
    info = v.info
    if info.shape is not None:
        return f"{info.dtype}{list(info.shape)}"
    return info.value if info.kind != "submodule" else ""


def _cells(v: AttributeVerdict) -> tuple[str, str]:
    return (_type_text(v), _value_text(v))


def _print_compact(
    console: Console, title: str, rows: list[RowGroup], marks: dict[str, StateWrite]
) -> None:
    """One attribute per line plus indented reasons: readable in 80 columns."""
    from rich.text import Text

    console.print()
    console.print(f"[bold underline]{title}[/]")
    for group in rows:
        v = group.rows[0]
        line = Text()
        line.append(f"{v.status:<8}", style=STATUS_STYLE[v.status])
        line.append(group.name, style="bold")
        line.append(f"  {v.kind} {_type_text(v)} {_value_text(v)}".rstrip(), style="dim")
        mark = marks.get(v.path)
        if mark is not None:
            line.append("  " + mark_text(mark)[0], style=mark_text(mark)[1])
        console.print(line)
        console.print(_indent(_reason_text(v, mark)))


def _indent(text: Text) -> Text:
    from rich.text import Text

    out = Text()
    for i, part in enumerate(text.split("\n")):
        if i:
            out.append("\n")
        out.append("    ")
        out.append_text(part)
    return out


def render_explanation(
    console: Console,
    result: Explanation,
    *,
    statuses: list[str] | None = None,
    show_all: bool = False,
    each_module: bool = False,
    migration: Migration | None = None,
) -> None:
    """Print the explanation as rich tables grouped by submodule, kept attributes first.

    Submodules of one type whose rows are alike print once, titled with the paths they
    cover, and a container's alike children are one row
    (:mod:`~freezeview.cli.explain_groups`); ``each_module`` prints every module alone.
    Below 100 columns each attribute is a line with its reasons indented under it. On a
    console without a width limit (:func:`~freezeview.cli.console.report_console` for a
    file or a log) each table is as wide as its longest cells and no cell is cut.

    With ``migration`` (``explain --migrate``), each state write of the forward says, at
    its source line, what the ExportedProgram does with it (``lost in torch.export``), and
    the torch.export section (:func:`print_migration`) ends the output.
    """
    from rich.markup import escape

    from .explain_groups import collapse_rows, group_modules
    from .written import print_written_warning

    marks = export_marks(migration)

    def cells(v: AttributeVerdict) -> tuple[str, ...]:
        mark = marks.get(v.path)  # compared when rows are merged or laid out once
        return (*_cells(v), f"{mark_text(mark)[0]} {mark.source}" if mark else "")

    shown = _visible(result.attributes, statuses, show_all)
    by_owner = _groups(shown)
    first_seen = {owner: i for i, owner in enumerate(by_owner)}

    def group_rank(owner: str) -> tuple[int, int]:
        best = min(STATUS_ORDER[v.status] for v in by_owner[owner])
        return (best, first_seen[owner])

    ordered = {
        owner: sorted(by_owner[owner], key=lambda v: STATUS_ORDER[v.status])
        for owner in sorted(by_owner, key=group_rank)
    }

    types: dict[str, tuple[str, str]] = {}
    for mod in result.inventory.modules:  # one pass: Inventory.module() scans them all
        types.setdefault(mod.path, (mod.type_name, mod.qualified_type))

    console.print(f"[bold]{result.model}[/] · torch {result.torch_version}")
    console.print(
        f"preserved: {', '.join(result.preserved_attrs) or 'nothing'} · "
        f"methods: {', '.join(result.methods)}"
    )
    if result.frozen is not None:
        print_frozen_contents(console, result.frozen)
    narrow = console.width < 100
    unbounded = is_unbounded(console)
    # Grouped by TorchScript class: two classes named alike (a constant differs) are
    # different code.
    tables = group_modules(
        ordered, lambda owner: types.get(owner, (None, None))[1], cells, each=each_module
    )
    bodies: dict[Hashable, tuple[int, list[Segment]]] = {}
    for group in tables:
        title = escape(group.title_paths)
        type_name = types.get(group.owners[0], (None, None))[0]
        if type_name is not None:
            title += f"  [dim]{escape(type_name)}[/]"
        if len(group.owners) > 1:
            title += f"  [dim]({len(group.owners)} alike)[/]"
        rows = collapse_rows(group.rows, cells, each=each_module)
        if narrow:
            _print_compact(console, title, rows, marks)
        else:
            _print_table(
                console, title, rows, unbounded=unbounded, bodies=bodies, cells=cells, marks=marks
            )
        _print_names_note(console, group, rows)
    hidden = len(result.attributes) - len(shown)
    more = f"  ({hidden} housekeeping or filtered rows hidden; --all shows them)" if hidden else ""
    alike = sum(len(g.owners) for g in tables if len(g.owners) > 1)
    if alike:
        more += (
            f"  ({alike} alike modules in {sum(len(g.owners) > 1 for g in tables)} "
            "tables; --each-module lists each)"
        )
    console.print(f"[bold]{result.summary()}[/]{more}")
    for warning in result.warnings:
        console.print(f"[dim]torch said: {warning}[/]")
    # Whatever --status, --all and the grouping showed: a written constant is always told.
    print_written_warning(console, result.written_constants())
    if migration is not None:
        print_migration(console, migration)


def _print_table(
    console: Console,
    title: str,
    rows: list[RowGroup],
    *,
    unbounded: bool,
    bodies: dict[Hashable, tuple[int, list[Segment]]] | None = None,
    cells: Callable[[AttributeVerdict], tuple[str, ...]] = _cells,
    marks: dict[str, StateWrite] | None = None,
) -> None:
    """One table, as rich lays it out; ``bodies`` keeps each laid-out body by its rows.

    Modules with a kept attribute are never merged, so 96 transformer layers print 96
    tables whose rows are the same, row for row: rich lays the body out once and the
    others are written from it, under their own title (laid out as rich lays a title).
    """
    from rich.segment import Segment, Segments
    from rich.text import Text

    from .explain_groups import row_keys

    if unbounded:
        console.print()  # tables one after another in a file: a blank line between
    key = (unbounded, tuple((g.name, row_keys(g.rows[0], cells)[1]) for g in rows))
    laid_out = bodies.get(key) if bodies is not None else None
    if laid_out is None:
        table = _table(None, unbounded=unbounded)
        for group in rows:
            v = group.rows[0]
            value = _value_text(v)
            type_text = _type_text(v) if not value else f"{_type_text(v)}\n{value}"
            table.add_row(
                group.name,
                v.kind,
                type_text,
                Text(v.status, style=STATUS_STYLE[v.status]),
                _reason_text(v, (marks or {}).get(v.path)),
            )
        body = list(console.render(fit_table(console, table), _print_options(console)))
        first_line = next((i for i, seg in enumerate(body) if seg.text == "\n"), len(body))
        laid_out = (Segment.get_line_length(body[:first_line]), body)
        if bodies is not None:
            bodies[key] = laid_out
    width, body = laid_out
    # As rich.table.Table renders its title: left-justified at the table's width.
    options = _print_options(console).update(
        width=width, highlight=False, height=None, justify="left"
    )
    heading = console.render(
        console.render_str(title, style="table.title", highlight=False), options
    )
    console.print(Segments([*heading, *body]))


def _print_options(console: Console) -> ConsoleOptions:
    """The options ``console.print(table)`` renders a table with (soft wrapping too)."""
    soft = console.soft_wrap
    return console.options.update(
        justify=None,
        overflow="ignore" if soft else None,
        height=None,
        no_wrap=True if soft else None,
        markup=None,
        highlight=None,
    )


def _print_names_note(console: Console, group: ModuleGroup, rows: list[RowGroup]) -> None:
    """Say whose IR value names a merged table or row shows, when the members' differ."""
    from rich.markup import escape

    if group.names_differ:
        others = len(group.owners) - 1
        whose = "the other module's" if others == 1 else f"the other {others} modules'"
        console.print(
            f"  [dim]IR value names (%...) above are {escape(group.owners[0] or 'the root')}'s; "
            f"{whose} differ only in those names[/]"
        )
    for row in rows:
        if row.names_differ:
            console.print(
                f"  [dim]IR value names (%...) in row {escape(row.name)} are "
                f"{escape(row.rows[0].info.name)}'s; the others' differ only in those names[/]"
            )


def print_frozen_contents(console: Console, frozen: FrozenContents) -> None:
    """What freezing left in an already-frozen model: its constants, biggest first."""
    from rich.table import Table

    console.print(
        f"[bold]{frozen.summary()}[/]: this is torch.jit.freeze's output; freezing it "
        "again runs only what still changes it (freezeview freeze shows each step)."
    )
    if frozen.kept:
        console.print(f"kept by freezing: {', '.join(frozen.kept)}")
    if not frozen.constants:
        return
    table = Table(title="constants", title_justify="left", show_lines=False)
    table.add_column("constant", overflow="fold")
    table.add_column("type / value", overflow="fold")
    table.add_column("bytes", justify="right", no_wrap=True)
    table.add_column("read by", overflow="fold")
    for constant in frozen.constants:
        value = (
            f"{constant.dtype}{list(constant.shape)} {constant.device}"
            if constant.shape is not None
            else constant.type
        )
        table.add_row(constant.name, value, f"{constant.nbytes:,}", ", ".join(constant.users))
    console.print(fit_table(console, table))


def _table(title: str | None, *, unbounded: bool) -> Table:
    """One submodule's table: fitted to the terminal, or as wide as its cells need."""
    from rich.table import Table

    if unbounded:
        table = Table(title=title, title_justify="left", show_lines=False)
        for name in ("attribute", "kind", "type / value", "status", "why"):
            table.add_column(name, no_wrap=True)
        return table
    table = Table(title=title, title_justify="left", expand=True, show_lines=False)
    table.add_column("attribute", overflow="fold", max_width=24)
    table.add_column("kind", max_width=9, overflow="ellipsis")
    table.add_column("type / value", overflow="fold", max_width=22)
    table.add_column("status", no_wrap=True)
    table.add_column("why", ratio=1, min_width=32, overflow="fold")
    return table


def print_disagreements(console: Console, result: Explanation) -> None:
    """What a bug report about an ``undetermined`` reason needs (``--debug``).

    For each attribute where freezeview's replay of freeze_module.cpp and torch's real
    freeze disagree: both statuses, the replay's reasons and torch's log lines that name
    it; then the versions involved.
    """
    from ..engine.plumbing import plural

    console.print(
        f"[bold]freezeview's replay disagrees with torch on "
        f"{plural(len(result.disagreements), 'attribute')}; torch's status is shown. "
        "Please report this with the lines below.[/]"
    )
    for d in result.disagreements:
        console.print(f"  {d.path}: torch {d.torch_status}, replay {d.replay_status}")
        for line in d.replay_reasons:
            console.print(f"    replay: {line}", markup=False)
        for line in d.log:
            console.print(f"    torch:  {line}", markup=False)
    console.print(f"  plan: {result.plan}; torch {result.torch_version}", markup=False)
