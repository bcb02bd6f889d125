"""``freezeview passes``: the frozen-graph passes freezeview can run on this torch."""

from __future__ import annotations

import argparse
import json
import sys

__all__ = ["import_engine", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``passes`` subcommand."""
    parser = sub.add_parser(
        "passes",
        help="list the frozen-graph passes, what they do and when they fire",
        description=(
            "List every pass `freezeview freeze --passes` accepts: what it does, whether it "
            "keeps numerics exact, when it fires, and whether torch.jit.freeze runs it on "
            "the installed torch."
        ),
    )
    parser.add_argument("--json", action="store_true", help="machine-readable output on stdout")
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.set_defaults(func=run)


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.output import passes_table  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview passes``; returns the exit code."""
    # Imported here, not at the top: the report imports torch, which --help must not.
    from ..engine.output import passes_json, passes_table

    if args.json:
        json.dump(passes_json(), sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    from .console import fit_table, report_console

    console = report_console()
    console.print(fit_table(console, passes_table()))
    return 0
