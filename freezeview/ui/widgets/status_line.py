"""The status line above the footer: what the app is doing, or the last error."""

from __future__ import annotations

from pathlib import Path

from rich.style import Style
from rich.text import Text
from textual.widgets import Label

__all__ = ["StatusLine"]


class StatusLine(Label):
    """One line of status; red (``-error``) for a failure."""

    def show(self, text: str | Text, error: bool = False) -> None:
        """Replace the line's text."""
        # Fixed-size line: no layout pass (a full-screen layout costs tens of ms).
        self.update(text, layout=False)
        self.set_class(error, "-error")

    def show_link(self, what: str, path: Path | None) -> None:
        """``what`` followed by the written file as a link (OSC 8 where it is supported).

        A terminal that shows links opens it on a click; ``o`` opens it in the local
        browser; over SSH the path is there to copy.
        """
        if path is None:
            self.show(what)
            return
        uri = path.resolve().as_uri()
        text = Text(f"{what} ")
        text.append(str(path), Style(link=uri, underline=True))
        text.append("  (o opens it)", "dim")
        self.show(text)
