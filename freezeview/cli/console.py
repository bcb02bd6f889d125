"""Where a command's human output goes, and how wide it may be.

On a terminal, rich lays text and tables out at the terminal's width (or at ``COLUMNS``
when it is set), as a person reads them there. Anywhere else (a file, a pipe, a CI
log) the text is read later, searched and diffed, so nothing is cut to a width nobody
chose: ``COLUMNS`` when set, and otherwise no width at all. Lines are as long as their
content (a path is never broken mid-name), each table is as wide as its widest cells
(one table row per line unless a cell holds several lines), and no line ends in the
spaces rich pads table rows with.

rich is imported when a console is asked for: ``--help`` and ``--json`` need none.
"""

from __future__ import annotations

import errno
import functools
import os
import sys
from typing import IO, TYPE_CHECKING, cast

if TYPE_CHECKING:
    from rich.console import Console
    from rich.table import Table

__all__ = ["UNBOUNDED", "fit_table", "is_terminal", "is_unbounded", "report_console"]

# The width a console without a width limit lays tables out at. Text is never wrapped
# there (soft wrap); a table takes only the columns its cells need, so this is a cap no
# real row reaches, not a width anything is padded to.
UNBOUNDED = 10_000


def is_terminal(stream: IO[str] | None) -> bool:
    """Whether ``stream`` is a terminal (False for None, closed or file-less streams)."""
    if stream is None:
        return False
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError, OSError):
        return False


def _columns() -> int | None:
    value = os.environ.get("COLUMNS", "").strip()
    return int(value) if value.isdigit() and int(value) > 0 else None


def report_console(*, stderr: bool = False) -> Console:
    """The console a command prints its human output with (standard output by default).

    On a terminal: rich's usual console (the terminal's width, or ``COLUMNS``).
    Elsewhere: ``COLUMNS`` when set, else :data:`UNBOUNDED` with soft wrapping, and
    trailing padding trimmed from every line either way.
    """
    console = _console_class()
    stream = sys.stderr if stderr else sys.stdout
    if is_terminal(stream):
        return console(stderr=stderr, highlight=False)
    columns = _columns()
    return console(
        # A write()/flush() stream is all rich uses of its file.
        file=cast("IO[str]", _TrimmedLines(stderr=stderr)),
        width=columns or UNBOUNDED,
        soft_wrap=columns is None,
        highlight=False,
    )


@functools.cache
def _console_class() -> type[Console]:
    from rich.console import Console

    class ReportConsole(Console):
        """rich's console, but a reader that goes away (``| head``) ends the command as
        any other write to standard output does: quietly, exit 0 (rich exits 1)."""

        def on_broken_pipe(self) -> None:
            raise BrokenPipeError(errno.EPIPE, os.strerror(errno.EPIPE))

    return ReportConsole


def is_unbounded(console: Console) -> bool:
    """Whether ``console`` has no width limit (output that is not a terminal, no COLUMNS)."""
    return console.width >= UNBOUNDED


def fit_table(console: Console, table: Table) -> Table:
    """``table`` as ``console`` shows it best; returns the same table.

    On a console without a width limit the table loses its outer border: a row then
    ends where its last cell's text does, not a long run of padding later at a border.
    """
    if is_unbounded(console):
        table.show_edge = False
    return table


class _TrimmedLines:
    """Standard output (or error) without the spaces that end rich's table rows.

    The stream is looked up at each write, as rich does for its own default.
    """

    def __init__(self, *, stderr: bool = False) -> None:
        self._stderr = stderr
        self._pending = ""

    @property
    def _stream(self) -> IO[str]:
        return sys.stderr if self._stderr else sys.stdout

    @property
    def encoding(self) -> str:
        return getattr(self._stream, "encoding", None) or "utf-8"

    def isatty(self) -> bool:
        return False

    def write(self, text: str) -> int:
        lines = (self._pending + text).split("\n")
        self._pending = lines.pop()
        if lines:
            self._stream.write("".join(line.rstrip(" ") + "\n" for line in lines))
        return len(text)

    def flush(self) -> None:
        # rich flushes after every print; a line still open then is written as it is.
        if self._pending:
            self._stream.write(self._pending)
            self._pending = ""
        self._stream.flush()
