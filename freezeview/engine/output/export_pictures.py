"""An export's pictures: each started in the background, collected in the order drawn.

:class:`PictureQueue` hands each picture of an export to Graphviz through a
:class:`~freezeview.engine.draw.DotQueue` as soon as the picture's graph is known, and
collects the results at the end: the files, the notes of coarser levels drawn, and one
sentence for a picture left out.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..draw import DotFailedError, DotQueue, DotTimeoutError, PendingPicture
from .export_values import ExportResult, PictureEntry

__all__ = ["PictureQueue"]


class PictureQueue:
    """The pictures of one export, started in turn and collected in the same order.

    Args:
        out: the directory the files are written into.
        fmt: the pictures' format (``svg``, ``png`` or ``dot``).
        dots: the queue Graphviz runs on.
        result: the export's result (files and notes are added to it).
        say: the export's progress callback.
    """

    def __init__(
        self,
        out: Path,
        fmt: str,
        dots: DotQueue,
        result: ExportResult,
        say: Callable[[str], None],
    ) -> None:
        self.out = out
        self.fmt = fmt
        self.dots = dots
        self.result = result
        self.say = say
        self._started: list[tuple[str, str, PendingPicture | None]] = []

    def draw(self, name: str, title: str, start: Callable[..., PendingPicture]) -> int:
        """Start the picture ``name`` (``start``: a ``start_*`` function given all but
        where, how and its title); returns its index for :meth:`finish`."""
        self.say(f"drawing {name}")
        try:
            pending = start(
                self.out / f"{name}.{self.fmt}", fmt=self.fmt, title=title, dots=self.dots
            )
        except (DotTimeoutError, DotFailedError) as exc:
            self.result.notes.append(f"{name}.{self.fmt} was left out: {exc}")
            pending = None
        self._started.append((name, title, pending))
        return len(self._started) - 1

    def finish(self, index: int) -> PictureEntry | None:
        """Wait for the picture started as ``index``; None if it was left out."""
        name, title, pending = self._started[index]
        if pending is None:
            return None
        try:
            rendered = pending.result()
        except (DotTimeoutError, DotFailedError) as exc:
            # Every level failed or overran: this one picture is left out, the rest of
            # the export goes on (the page says so).
            self.result.notes.append(f"{name}.{self.fmt} was left out: {exc}")
            return None
        self.result.files.append(rendered.path)
        self.result.notes.extend(rendered.notes)
        return PictureEntry(name, title, rendered)
