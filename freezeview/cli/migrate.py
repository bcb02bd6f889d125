"""``freezeview migrate``: can this TorchScript model move to ``torch.export``, with proof."""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

from .options import add_input_options, add_measure_options, add_model_options, split_names

if TYPE_CHECKING:
    from ..engine.migrate import Migration

__all__ = ["import_engine", "migrate_from_args", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``migrate`` subcommand."""
    parser = sub.add_parser(
        "migrate",
        help="convert to an ExportedProgram (.pt2) and check it behaves the same",
        description=(
            "Run torch's TorchScript-to-ExportedProgram converter (a private torch API) "
            "on the sample inputs in a child process, then run the TorchScript module and "
            "the program side by side: outputs over successive calls, every state write "
            "kept or lost, parameters turned buffers, input dimensions fixed; and the "
            "program's forward timed against the frozen TorchScript. Exit 0 when "
            "it converts and behaves the same, 1 when it differs or does not convert, 2 "
            "for bad input."
        ),
    )
    add_model_options(parser)
    add_input_options(parser)
    parser.add_argument(
        "--second-shape",
        action="append",
        metavar="2,3,224,224",
        help="also run both sides on random inputs of this shape (repeatable, one per "
        "forward argument, as --input-shape): does the program accept what the "
        "TorchScript module accepts?",
    )
    add_measure_options(parser)
    parser.add_argument(
        "--calls",
        metavar="N",
        default="3",
        help="successive calls compared, outputs and state after each (default 3)",
    )
    parser.add_argument(
        "--timeout",
        metavar="SECONDS",
        default="300",
        help="seconds the converter's child process may take (default 300)",
    )
    parser.add_argument(
        "--aoti",
        action="store_true",
        help="also compile the program with AOTInductor (needs a C++ compiler; time-bounded "
        "by --timeout): compile time, outputs compared, its forward timed",
    )
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.pt2",
        help="write the ExportedProgram (torch.export.save) when it behaves the same",
    )
    parser.add_argument(
        "--force",
        action="store_true",
        help="write OUT.pt2 even when the program differs (the differences are listed), "
        "and replace OUT.pt2 if it exists",
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.set_defaults(func=run)


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.migrate import migrate  # noqa: F401


def _number(text: str, option: str, *, whole: bool) -> float:
    from ..engine.plumbing import BadInputError

    try:
        value = int(text) if whole else float(text)
    except ValueError:
        value = 0
    if not value > 0 or value == float("inf"):
        what = "a whole number (1 or more)" if whole else "a number of seconds (more than 0)"
        raise BadInputError(f"{option} {text!r} is not {what}.")
    return value


def migrate_from_args(
    args: argparse.Namespace, inputs: tuple[Any, ...], threads: int, budget: float, **more: Any
) -> Migration:
    """:func:`~freezeview.engine.migrate.migrate` on the model file the command line names,
    loaded as its options say (``--map-location``, ``--eval``, ``--import``,
    ``--load-library``), on ``inputs``, timed with ``threads`` and ``budget``; ``more``
    goes to ``migrate`` as it is. ``migrate``, ``explain --migrate`` and ``export
    --migrate`` all run it so."""
    from ..engine.migrate import migrate

    return migrate(
        args.model,
        inputs,
        threads=threads,
        budget=budget,
        map_location=args.map_location,
        eval_mode=args.eval,
        imports=split_names(getattr(args, "imports", None)),
        libraries=list(getattr(args, "libraries", None) or ()),
        **more,
    )


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview migrate``; returns the exit code."""
    from ..engine.freeze import random_inputs
    from ..engine.plumbing import check_output_path
    from .options import inputs_from_args, measure_from_args

    threads, budget = measure_from_args(args)
    calls = int(_number(str(args.calls), "--calls", whole=True))
    timeout = _number(str(args.timeout), "--timeout", whole=False)
    out = check_output_path(args.output, force=args.force) if args.output else None
    inputs = inputs_from_args(args)
    second = random_inputs(args.second_shape) if args.second_shape else None
    result = migrate_from_args(
        args,
        inputs or (),
        threads,
        budget,
        second_inputs=second,
        second_shape=" ".join(args.second_shape or ()),
        calls=calls,
        timeout=timeout,
        aoti=args.aoti,
        output=out,
        force=args.force,
    )
    if args.json:
        json.dump(result.to_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
    else:
        _print(result)
    return result.exit_code


def _print(result: Migration) -> None:
    """The findings as the app's ``m`` shows them (:meth:`Migration.report_lines`), the
    verdict coloured, the findings indented under it."""
    from rich.markup import escape

    from .console import report_console

    console = report_console()
    colour = {0: "green"}.get(result.exit_code, "yellow" if result.conversion.converted else "red")
    for line in result.report_lines():
        if line.kind == "verdict":  # the verdict coloured, the model not
            console.print(f"[bold {colour}]{escape(result.verdict)}[/] ({escape(result.model)})")
        else:
            console.print(("  " if line.indented else "") + escape(line.text))
