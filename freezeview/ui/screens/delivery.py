"""What the app wrote for the user (``g`` pictures, ``e`` exports) and how it reaches them.

In a terminal the last file written opens in the local browser (``o``), when this
machine has one; in a browser tab (``freezeview serve``) the files are on the server,
so each is handed to the browser (Textual's ``App.deliver_text`` / ``deliver_binary``).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from textual.app import App

__all__ = ["Delivery", "has_local_browser"]

# What a browser shows in a tab; any other file is downloaded.
_SHOWN = {".html": "text/html", ".svg": "image/svg+xml", ".png": "image/png"}


def has_local_browser() -> bool:
    """Whether a browser can open on this machine (not over a plain SSH session)."""
    if sys.platform in ("darwin", "win32"):
        return True
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    return not os.environ.get("SSH_CONNECTION") and bool(os.environ.get("BROWSER"))


class Delivery:
    """The last output written and the ways to hand it over.

    Args:
        app: the running app (notifications, the browser it may run in).
        status: shows one line in the screen's status line.
        link: shows a label and a path as a link in the status line.
    """

    def __init__(
        self,
        app: App[Any],
        status: Callable[[str], None],
        link: Callable[[str, Path | None], None],
    ) -> None:
        self.app = app
        self.status = status
        self.link = link
        #: The last picture rendered (g) or review page exported (e): what ``o`` opens.
        self.last: Path | None = None

    def rendered(self, paths: Sequence[Path], notes: Sequence[str]) -> None:
        """Say what ``g`` wrote; in a browser, send the pictures there."""
        where = paths[0].parent if paths else "?"
        self.app.notify(f"wrote {', '.join(p.name for p in paths)} in {where}", title="rendered")
        self._notes(notes)
        pictures = [p for p in paths if p.suffix in (".svg", ".png")]
        written = pictures or list(paths)
        self.last = written[-1] if written else None
        self.link("rendered", self.last)
        if self.app.is_web:
            for path in pictures:
                self.send(path)

    def exported(self, directory: Path, paths: Sequence[Path], notes: Sequence[str]) -> None:
        """Say what ``e`` wrote; in a browser, send the review page there."""
        self.app.notify(f"{len(paths)} files in {directory}", title="exported")
        self._notes(notes)
        page = directory / "index.html"
        self.last = page if page.exists() else directory
        self.link(f"exported {len(paths)} files:", self.last)
        if self.app.is_web and page.exists():
            self.send(page)

    def open_last(self) -> None:
        """Open the last output in the local browser, or send it to the app's browser."""
        path = self.last
        if path is None:
            self.app.notify("nothing written yet: g renders the step, e exports", timeout=3)
        elif self.app.is_web:
            self.send(path)
        elif not has_local_browser():
            self.status(f"no browser on this machine (SSH?): open {path} where you are")
        else:
            self.app.open_url(path.resolve().as_uri())
            self.status(f"opened {path} in the browser")

    def send(self, path: Path) -> None:
        """Hand a file to the browser the app runs in: pages and pictures open in a new
        tab, other files are downloaded."""
        mime = _SHOWN.get(path.suffix)
        if mime is None:
            self.app.deliver_binary(path, open_method="download")
        elif mime.startswith("text/"):
            self.app.deliver_text(path, open_method="browser", mime_type=mime, encoding="utf-8")
        else:
            self.app.deliver_binary(path, open_method="browser", mime_type=mime)
        self.status(f"sent {path.name} to the browser (o sends it again)")

    def _notes(self, notes: Sequence[str]) -> None:
        # What the engine noted while drawing (pictures too big to lay out, ...).
        for note in notes:
            self.app.notify(note, severity="warning")
