"""freezeview's command line: ``freezeview MODEL.pt`` opens the app; each subcommand is a
thin call into the engine.

Each subcommand lives in its own module exposing ``register(subparsers)``; the module
sets ``func`` on its parser to a ``run(args) -> int``. No subcommand module imports
torch or the engine when it is imported: building the parser, ``--help``, ``--version``
and usage errors take no more than the standard library. A module whose ``run`` needs
the engine has an ``import_engine()`` that :func:`main` calls first, with Ctrl-C held
while torch initialises its C++ library. Errors the engine expects
(:class:`~freezeview.engine.plumbing.errors.FreezeviewError`) become one sentence on stderr and
their exit code; anything else is a bug and also gets one sentence, with the traceback
only under ``--debug``.

The modules:

- :mod:`.app`: ``freezeview MODEL.pt``: the engine process started, then the Textual app;
- :mod:`.serve`: ``freezeview serve``: the app in a browser, through textual-serve;
- :mod:`.explain`: ``freezeview explain``: each attribute's status and reasons;
- :mod:`.explain_export`: ``explain --migrate``: what torch.export does with each state write;
- :mod:`.explain_groups`: explain's alike submodules printed once;
- :mod:`.written`: the written-constant warning ``explain`` and ``freeze`` print;
- :mod:`.freeze`: ``freezeview freeze``: the steps, their measurements, the frozen file;
- :mod:`.export`: ``freezeview export``: pictures, IR diffs and the review page;
- :mod:`.check`: ``freezeview check``: a model held against its expectations, for CI;
- :mod:`.compare`: ``freezeview compare``: what freezing does differently to two models;
- :mod:`.migrate`: ``freezeview migrate``: TorchScript to ExportedProgram, with proof;
- :mod:`.passes`: ``freezeview passes``: the passes freezeview can run on this torch;
- :mod:`.options`: options several subcommands share, turned into engine calls;
- :mod:`.console`: where human output goes, and how wide it may be.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import errno
import gc
import importlib
import os
import signal
import sys
import threading
import traceback
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..engine.plumbing import FreezeviewError, interrupts_deferred
from .options import quiet_torch_warnings

if TYPE_CHECKING:
    from rich.console import Console

__all__ = ["CommandImportError", "build_parser", "main"]

SUBCOMMANDS: dict[str, str] = {}
COMMANDS = (
    "explain",
    "freeze",
    "export",
    "check",
    "compare",
    "migrate",
    "passes",
    "serve",
    "app",
)


class CommandImportError(ImportError):
    """A subcommand's module failed to import: freezeview is broken, not the command absent.

    Raised while the parser is built, so that no subcommand silently disappears from
    ``--help`` (and no test that asks ``--help`` what exists skips itself); :func:`main`
    turns it into one sentence and exit code 1.
    """

    def __init__(self, command: str, cause: ImportError) -> None:
        super().__init__(
            f"freezeview could not load its {command!r} command ({type(cause).__name__}: {cause})",
            name=cause.name,
            path=cause.path,
        )
        self.command = command


def _register_all(
    sub: argparse._SubParsersAction,  # type: ignore[type-arg]
    commands: Sequence[str],
) -> None:
    # Imported here, one module per asked-for command: `freezeview freeze` has no use
    # for the others. A module that fails to import is an error, never a missing command.
    for name in commands:
        try:
            module = importlib.import_module(f"{__name__}.{name}")
        except ImportError as exc:
            raise CommandImportError(name, exc) from exc
        module.register(sub)


def build_parser(commands: Sequence[str] = COMMANDS) -> argparse.ArgumentParser:
    """The argument parser with the given subcommands (all of them by default).

    No subcommand's module imports torch or the engine (they do when they run), so
    the parser costs the standard library's argparse and freezeview's own option
    tables; ``freezeview MODEL.pt`` builds a parser with ``app`` only, and
    ``freezeview COMMAND`` one with that command only.
    """
    parser = argparse.ArgumentParser(
        prog="freezeview",
        description=(
            "See what torch.jit.freeze does to a TorchScript model. "
            "`freezeview MODEL.pt` opens the app; the subcommands below work without it."
        ),
    )
    parser.add_argument("--version", action=_VersionAction)
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    _register_all(sub, commands)
    SUBCOMMANDS.clear()
    SUBCOMMANDS.update({name: name for name in sub.choices})
    return parser


class _VersionAction(argparse.Action):
    """``--version``: the version is looked up when asked for.

    Reading the installed package's metadata costs tens of milliseconds that every
    other command would pay while the parser is built.
    """

    def __init__(self, option_strings: Sequence[str], dest: str, **kwargs: object) -> None:
        super().__init__(
            option_strings,
            dest,
            nargs=0,
            default=argparse.SUPPRESS,
            help="show program's version number and exit",
        )

    def __call__(
        self,
        parser: argparse.ArgumentParser,
        namespace: argparse.Namespace,
        values: object,
        option_string: str | None = None,
    ) -> None:
        print(_version())
        parser.exit()


def _version() -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"freezeview {version('freezeview')}"
    except PackageNotFoundError:  # running from a source tree
        return "freezeview (source)"


def _stderr() -> Console:
    # rich is imported when there is something to say: `freezeview MODEL.pt` starts the
    # app's engine process before anything else, and that waits for these imports.
    from rich.console import Console

    return Console(stderr=True, highlight=False, soft_wrap=True)


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point of the ``freezeview`` console script; returns the exit code."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    process = argv is None and threading.current_thread() is threading.main_thread()
    if process:
        atexit.register(_leave)
    code: int | None = None
    try:
        code = _main(args_list, process=process)
        return code
    except KeyboardInterrupt:
        # Also while torch is still importing (each command's import_engine).
        _stderr().print("[bold red]interrupted:[/] no partial file was left behind.")
        code = 130
        return code
    finally:
        if process:
            # The command has finished (or said it was interrupted); a Ctrl-C now would
            # only land in torch's clean-up at interpreter exit and print a traceback.
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            if args_list and args_list[0] in COMMANDS[:-1]:
                _LEAVING["code"] = code


# The exit code a finished subcommand leaves the process with (see _leave).
_LEAVING: dict[str, int | None] = {"code": None}


def _leave() -> None:
    """End the process once a subcommand is done, without the interpreter's teardown.

    Registered before anything else, so Python runs it after every other exit handler
    (torch's, logging's...). By then the outputs are written (atomically) and closed,
    and the streams are flushed here; what is left is freeing every object one by one
    and a last full garbage collection, which grows with the model and buys nothing
    (docs/benchmarks.md has the figures). The app, ``--help`` and errors that
    escape ``main`` end the usual way.
    """
    code = _LEAVING["code"]
    if code is None:
        return
    try:
        sys.stdout.flush()
    except BrokenPipeError:
        pass  # the reader went away (`| head`): quiet, as the command itself is
    except (OSError, ValueError) as exc:
        # The report is still in the buffer (a full disk behind `> out.json`): it must
        # not vanish with a success code. Exit 2, as for any output freezeview cannot write.
        code = code or _stdout_failed(exc)
    with contextlib.suppress(Exception):
        sys.stderr.flush()
    os._exit(code)


def _main(args_list: list[str], *, process: bool = False) -> int:
    app_only = (
        bool(args_list)
        and args_list[0] not in COMMANDS[:-1]
        and (args_list[0] == "app" or not args_list[0].startswith("-"))
    )
    if app_only:
        commands: Sequence[str] = ("app",)
    elif args_list and args_list[0] in COMMANDS[:-1]:
        # One subcommand's module only: `freezeview freeze` has no use for the export,
        # check or compare options.
        commands = (args_list[0],)
    else:
        commands = COMMANDS
    try:
        parser = build_parser(commands)
    except CommandImportError as exc:
        # A broken installation (or a bug): say so, instead of a traceback or a
        # subcommand missing from --help.
        if "--debug" in args_list:
            traceback.print_exc()
        sys.stderr.write(
            f"error: {exc}; freezeview's installation looks incomplete: reinstall it, "
            "or rerun with --debug for the traceback and please report it.\n"
        )
        return 1
    if not args_list:
        parser.print_usage(sys.stderr)
        print(
            "freezeview: give a model to open (freezeview MODEL.pt) or a command "
            "(explain, freeze, export, check, compare, migrate, passes, serve); --help says "
            "more.",
            file=sys.stderr,
        )
        return 2
    # `freezeview MODEL.pt [options]` is short for `freezeview app MODEL.pt [options]`.
    if (
        args_list[0] not in SUBCOMMANDS
        and not args_list[0].startswith("-")
        and "app" in SUBCOMMANDS
    ):
        args_list.insert(0, "app")
    args = parser.parse_args(args_list)
    if not getattr(args, "func", None):
        parser.print_usage(sys.stderr)
        return 2
    import_engine = getattr(sys.modules.get(args.func.__module__), "import_engine", None)
    try:
        with quiet_torch_warnings():
            if import_engine is not None:
                # `import torch` initialises its C++ library: Ctrl-C waits until it is done.
                with interrupts_deferred():
                    import_engine()
            if process and args_list[0] in ("freeze", "explain", "check"):
                # What is imported by now (torch: hundreds of thousands of objects) lives
                # as long as the process: a full collection, which the run's own objects
                # trigger now and then, need not walk it again.
                gc.freeze()
            return int(args.func(args))
    except FreezeviewError as exc:
        if getattr(args, "debug", False):
            traceback.print_exc()
        from rich.markup import escape

        err = _stderr()
        # Messages quote files and code: `[attributes]` is text, not rich markup.
        err.print(f"[bold red]error:[/] {escape(exc.message)}")
        if exc.hint:
            err.print(escape(exc.hint))
        return exc.exit_code
    except BrokenPipeError:
        # The reader went away (`freezeview passes | head`): stop quietly, as Unix tools do.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - swallow the final flush
        return 0
    except OSError as exc:
        if exc.errno not in _DEVICE_FULL or exc.filename is not None:
            return _unexpected(args, exc)
        # A write to standard output failed midway (a full disk behind `> out.json`,
        # unbuffered or a report larger than the buffer): files go through atomic.py,
        # which names them, so a nameless "disk full" is the report's. What was written
        # stays; what was not is dropped, so the exit does not try again.
        with contextlib.suppress(OSError):
            sys.stdout = open(os.devnull, "w")  # noqa: SIM115 - swallow the final flush
        return _stdout_failed(exc)
    except Exception as exc:
        return _unexpected(args, exc)


# The errors of a write that found no room (ENOSPC, EDQUOT, EFBIG).
_DEVICE_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _stdout_failed(exc: BaseException) -> int:
    """Say in one sentence that standard output could not be written; the exit code (2)."""
    with contextlib.suppress(Exception):
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        sys.stderr.write(f"error: freezeview could not write to standard output: {reason}.\n")
        sys.stderr.flush()
    return 2


def _unexpected(args: argparse.Namespace, exc: Exception) -> int:
    """One sentence for an error freezeview has no sentence of its own for; exit 1."""
    if getattr(args, "debug", False):
        traceback.print_exc()
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0]
    from rich.markup import escape

    _stderr().print(
        f"[bold red]error:[/] freezeview failed unexpectedly ({type(exc).__name__}: "
        f"{escape(first[:200])}); rerun with --debug for the traceback and please report it."
    )
    return 1
