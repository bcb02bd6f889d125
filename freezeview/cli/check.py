"""``freezeview check``: hold a model against an expectations file, for CI.

Exit codes: 0 every rule holds; 1 a rule is broken (or torch cannot freeze the model as
the file's plan asks); 2 a bad model, bad sample inputs or a bad expectations file.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

from .options import (
    add_input_options,
    add_measure_options,
    add_model_options,
    add_pass_options,
    add_plan_options,
    inputs_from_args,
    load_from_args,
    measure_from_args,
    plan_from_args,
)

__all__ = ["import_engine", "register", "run"]

FORMATS = ("text", "json", "github", "junit")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``check`` subcommand."""
    parser = sub.add_parser(
        "check",
        help="check that freezing still inlines, keeps and folds what an expectations "
        "file says (for CI)",
        description=(
            "Freeze MODEL.pt as the expectations file's plan says and check every rule: "
            "attributes that must be inlined or dropped, which may be kept, the bytes of "
            "tensors kept, passes that must fire, numerics. Each violation says what was "
            "expected, what torch does and the source line that causes it. "
            "--write-expect writes the model's current behaviour as such a file."
        ),
    )
    add_model_options(parser)
    target = parser.add_mutually_exclusive_group(required=True)
    target.add_argument("--expect", metavar="FILE.toml", help="the expectations to check")
    target.add_argument(
        "--write-expect",
        metavar="FILE.toml",
        help="write the model's current behaviour as an expectations file (the plan comes "
        "from --preserve/--passes/...; sample inputs add a [numerics] section)",
    )
    parser.add_argument(
        "--force", action="store_true", help="with --write-expect: overwrite the file"
    )
    parser.add_argument(
        "--format",
        choices=FORMATS,
        default="text",
        help="text (default), json, github (workflow commands: annotations on the "
        "source lines), junit (XML, one test case per rule)",
    )
    parser.add_argument(
        "-o", "--output", metavar="FILE", help="write the report to FILE instead of stdout"
    )
    parser.add_argument(
        "--source-root",
        metavar="DIR",
        help="the checkout the model's recorded source paths live in (github format): "
        "each recorded path maps to its longest suffix that exists under DIR",
    )
    parser.add_argument(
        "--strip-prefix",
        metavar="PREFIX",
        help="with --source-root: recorded paths start with PREFIX (the build machine's "
        "checkout); it is replaced by DIR",
    )
    add_plan_options(parser)
    add_pass_options(parser)
    add_input_options(parser)
    add_measure_options(parser)
    parser.set_defaults(func=run)


def _plan_flags_given(args: argparse.Namespace) -> list[str]:
    given = []
    for flag, value in (
        ("--preserve", args.preserve),
        ("--method", args.method),
        ("--passes", args.passes),
        ("--no-optimize", args.no_optimize),
        ("--optimize-for-inference", args.optimize_for_inference),
        ("--inputs", args.inputs),
        ("--input-shape", args.input_shape),
        ("--threads", args.threads != "1"),
        ("--time-budget", args.time_budget != "0.25"),
    ):
        if value:
            given.append(flag)
    return given


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.ci import check_model as check  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview check``; returns the exit code."""
    # The engine is imported here, not at the top: --help must not wait for it.
    from ..engine.plumbing import BadInputError, check_output_path, write_text

    if args.write_expect:
        return _write(args)
    given = _plan_flags_given(args)
    if given:
        raise BadInputError(
            f"{given[0]} cannot be combined with --expect: the plan and the sample inputs "
            "come from the expectations file."
        )
    if args.output:
        check_output_path(args.output, force=True)
    from ..engine.ci import check_model as check
    from ..engine.ci import render_check_text as render_text
    from ..engine.ci import render_github, render_json, render_junit

    loaded = load_from_args(args)
    report = check(loaded, args.expect)
    if args.format == "json":
        text = render_json(report)
    elif args.format == "github":
        text = render_github(report, args.source_root, args.strip_prefix)
    elif args.format == "junit":
        text = render_junit(report)
    else:
        text = render_text(report)
    if args.output:
        write_text(args.output, text)
    else:
        sys.stdout.write(text)
    return 0 if report.ok else 1


def _write(args: argparse.Namespace) -> int:
    from ..engine.ci import expectations_text, gather_facts
    from ..engine.plumbing import check_output_path, write_text

    out = check_output_path(args.write_expect, force=args.force)
    plan = plan_from_args(args)
    threads, budget = measure_from_args(args)
    inputs = inputs_from_args(args)
    loaded = load_from_args(args)
    # Measured: the [deployment] defaults (constant bytes and portability always; with
    # inputs the latency and the round trip too).
    facts = gather_facts(loaded, plan, inputs, measure=(threads, budget))
    # The file names its inputs relative to itself, as check reads them.
    inputs_path = (
        os.path.relpath(Path(args.inputs).resolve(), out.resolve().parent) if args.inputs else None
    )
    text = expectations_text(
        facts,
        input_shapes=args.input_shape or (),
        inputs=inputs_path,
        eval_mode=args.eval,
        threads=threads,
        time_budget=budget or 0.25,
    )
    write_text(out, text)
    counts = facts.explanation.counts()
    fired = len(facts.passes_fired)
    print(
        f"wrote {out}: {counts['inlined']} inlined, {counts['kept']} kept, "
        f"{facts.kept_bytes:,} bytes of kept tensors, {fired} {'pass' if fired == 1 else 'passes'} "
        "firing."
    )
    return 0
