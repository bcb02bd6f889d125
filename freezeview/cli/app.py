"""``freezeview MODEL.pt`` (``freezeview app MODEL.pt``): open the Textual app."""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from .console import is_terminal
from .options import (
    add_extension_options,
    add_input_options,
    add_measure_options,
    autograd_from_args,
    measure_from_args,
    split_names,
)

if TYPE_CHECKING:
    from ..session import Preserved, RemoteSession

__all__ = ["open_app", "register", "run", "terminal_missing"]


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``app`` subcommand."""
    parser = subparsers.add_parser(
        "app",
        help="open the interactive app on a model (the default: freezeview MODEL.pt)",
        description=(
            "Open MODEL.pt in freezeview's terminal app: every attribute's verdict, the IR "
            "at each freezing step, diffs, SVG rendering and export."
        ),
    )
    parser.add_argument("model", metavar="MODEL.pt", help="a TorchScript file (torch.jit.save)")
    parser.add_argument(
        "--preserve",
        action="append",
        metavar="NAME",
        help="attribute, submodule or method to keep (repeatable, comma-separated)",
    )
    parser.add_argument(
        "--passes",
        metavar="A,B",
        help="comma-separated pass ids to run (default: what torch.jit.freeze runs)",
    )
    add_input_options(parser)
    add_measure_options(parser, autograd=True)
    parser.add_argument(
        "--eval", action="store_true", help="switch a training-mode module to eval mode"
    )
    add_extension_options(parser)
    parser.add_argument(
        "-o",
        "--output-dir",
        metavar="DIR",
        help="where g (render) and e (export) write (default: ./freezeview-<model name>)",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.set_defaults(func=run)


def terminal_missing() -> str | None:
    """The first of standard input, output and error that is not a terminal, or None.

    The app reads keys from standard input, takes its screen size from standard output
    and draws on standard error (Textual's Linux driver). Without a terminal on each it
    cannot work: piped or redirected it stays on its first screen, redrawing between two
    sizes at full CPU.
    """
    for name, stream in (
        ("standard input", sys.stdin),
        ("standard output", sys.stdout),
        ("standard error", sys.stderr),
    ):
        if not is_terminal(stream):
            return name
    return None


def run(args: argparse.Namespace) -> int:
    """Run the app until the user quits; returns the exit code."""
    missing = terminal_missing()
    if missing is not None:
        from ..engine.plumbing import BadInputError

        raise BadInputError(
            f"freezeview's app needs a terminal and {missing} is not one (a pipe, a file "
            f"or a CI step): for text, run `freezeview explain {args.model}` or "
            f"`freezeview freeze {args.model} -o OUT.pt`, with --json for machine output."
        )
    return open_app(args)


def _names_in_archive(path: Path, preserved: Preserved) -> bool:
    """Whether every preserved name is an attribute or submodule path the archive's
    ``data.pkl`` lists (read without torch, so the check does not wait for it)."""
    from ..engine.load import archive_attribute_paths

    known = archive_attribute_paths(path)
    return known is not None and all(name in known for name in preserved)


def _check_plan(session: RemoteSession, preserved: Preserved, display: str) -> None:
    """The preserved names checked by the engine process before the screen shows; a bad
    one (or a model that fails to load) ends freezeview with the CLI's sentence and the
    CLI's exit code for the same input (1 for a plan naming what the model lacks, 2 for
    a file that cannot be read): the app and ``freezeview explain`` answer alike."""
    try:
        session.check_plan(preserved, display)
    except BaseException:
        session.close()
        raise


def open_app(args: argparse.Namespace) -> int:
    """Start the engine process and run the app on ``args`` (the ``app`` options) until
    the user quits; ``freezeview serve`` runs this for each browser that connects."""
    path = Path(args.model)
    # Cheap checks before the screen takes over the terminal, so a typo, or a file that
    # is no TorchScript model at all (a state_dict, a pickle), gets the one-line error
    # every subcommand gives, exit 2; damage inside the archive and torch's own errors
    # show in the app. No torch here: the first screen must not wait for it.
    from ..engine.load import check_model_kind

    check_model_kind(path)
    from ..session import RemoteSession, SessionOptions

    threads, time_budget = measure_from_args(args)
    options = SessionOptions(
        preserved=tuple(split_names(args.preserve)),
        passes=tuple(split_names([args.passes])) if args.passes else None,
        inputs_file=args.inputs,
        input_shapes=tuple(args.input_shape or ()),
        eval_mode=args.eval,
        imports=tuple(split_names(args.imports)),
        libraries=tuple(args.libraries or ()),
        threads=threads,
        time_budget=time_budget,
        autograd=autograd_from_args(args),
    )
    # The engine process first: it imports torch and loads the model on the other core
    # while this process imports Textual and draws the first screen.
    session = RemoteSession(path, options)
    if options.preserved and not _names_in_archive(path, options.preserved):
        # Preserved names the model lacks fail here too, with explain's sentence: the
        # engine process checks them once the model has loaded (the screen waits for
        # that only when the archive's own attribute list does not hold every name: a
        # method, or an unknown name).
        _check_plan(session, options.preserved, args.model)
    try:
        # Asked before Textual starts reading the keys (the terminal answers on stdin).
        from ..ui.graphics import detect_graphics

        graphics = detect_graphics()
        from ..ui.app import FreezeviewApp

        app = FreezeviewApp(
            path, options=options, output_dir=args.output_dir, session=session, graphics=graphics
        )
    except BaseException:
        session.close()
        raise
    loop = asyncio.new_event_loop()
    try:
        loop.run_until_complete(app.run_async())
    finally:
        session.close()
        if app.busy_at_exit:
            # A worker was still busy at `q` (highlighting a big graph, unpickling a
            # step): `q` must quit at once, so leave without joining it. Torch work was
            # in the engine process, stopped above; its writes are atomic and the input
            # model is never modified.
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(app.return_code or 0)
        loop.close()
    return app.return_code or 0
