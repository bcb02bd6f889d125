"""Graphviz's ``dot`` run on DOT text: its output bytes, or one clear error.

:func:`run_dot` hands DOT text to the program with a timeout and returns what it wrote;
a program that is missing, overruns or fails raises :class:`GraphvizMissingError`,
:class:`DotTimeoutError` or :class:`DotFailedError`, each a sentence for the user.
Graphviz is run directly with :mod:`subprocess` rather than ``graphviz.pipe`` because
the package offers no timeout, and a run that never finishes is exactly the failure
this module has to survive. While it runs, the process is tracked (:mod:`.queue`), so
that a queue closed by an error kills it.
"""

from __future__ import annotations

import shutil
import subprocess
from typing import Protocol

from ...plumbing import FreezeviewError
from .queue import tracked

__all__ = [
    "INSTALL_HINT",
    "DotFailedError",
    "DotProgram",
    "DotTimeoutError",
    "GraphvizMissingError",
    "find_dot",
    "run_dot",
]


class DotProgram(Protocol):
    """Which Graphviz program runs, and for how long (``RenderOptions`` is one)."""

    @property
    def engine(self) -> str:
        """Graphviz layout program (``dot``; ``sfdp`` for experiments)."""
        ...

    @property
    def timeout(self) -> float:
        """Seconds one run may take before it is killed."""
        ...

    @property
    def dot_command(self) -> str | None:
        """Path of the Graphviz executable; None: ``engine`` on PATH."""
        ...


INSTALL_HINT = (
    "Graphviz's `dot` program is not installed; install it (Debian/Ubuntu: "
    "`apt-get install graphviz`, macOS: `brew install graphviz`) to draw pictures."
)


class GraphvizMissingError(FreezeviewError):
    """``dot`` is not on PATH (or not at the configured path)."""

    exit_code = 1


class DotTimeoutError(FreezeviewError):
    """Graphviz did not finish a layout within the time allowed."""

    exit_code = 1


class DotFailedError(FreezeviewError):
    """Graphviz exited with an error on a picture (a layout bug on that graph).

    Attributes:
        dot_error: Graphviz's first error line (``Error: trouble in init_rank``).
    """

    exit_code = 1

    def __init__(self, message: str, dot_error: str = "", *, hint: str | None = None) -> None:
        super().__init__(message, hint=hint)
        self.dot_error = dot_error


def find_dot(options: DotProgram) -> str:
    """Path of the Graphviz program to run.

    Raises:
        GraphvizMissingError: it is not installed.
    """
    command = options.dot_command or options.engine
    found = shutil.which(command)
    if found is None:
        raise GraphvizMissingError(INSTALL_HINT)
    return found


def run_dot(source: str, fmt: str, options: DotProgram) -> bytes:
    """Lay out and render DOT ``source``; return the output bytes.

    Args:
        source: DOT text.
        fmt: ``svg`` or ``png``.
        options: engine, timeout and the program's path.

    Returns:
        The rendered bytes.

    Raises:
        GraphvizMissingError: the program is not installed.
        DotTimeoutError: it did not finish within ``options.timeout`` (it is killed).
        DotFailedError: it failed (its first error line is quoted).
    """
    command = find_dot(options)
    try:
        proc = subprocess.Popen(
            [command, f"-K{options.engine}", f"-T{fmt}"],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
    except OSError as exc:
        raise GraphvizMissingError(f"cannot run {command}: {exc.strerror or exc}.") from exc
    # Tracked while it runs: a DotQueue closed by an error kills it (queue.py).
    with proc, tracked(proc):
        try:
            stdout, stderr = proc.communicate(source.encode("utf-8"), timeout=options.timeout)
        except subprocess.TimeoutExpired as exc:
            # Killed and reaped, not read to the end: a `dot` wrapper's own children
            # could hold its pipes open long after it is gone.
            proc.kill()
            proc.wait()
            raise DotTimeoutError(f"Graphviz did not finish within {options.timeout:g} s.") from exc
        except BaseException:
            proc.kill()
            raise
    if proc.returncode != 0 or not stdout:
        first = (stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
        raise DotFailedError(
            f"Graphviz failed to draw the picture ({first[:200]}).", dot_error=first[:200]
        )
    return stdout
