"""Whether the terminal can show real pictures: kitty's graphics protocol or sixel.

Asked once, before Textual starts (it reads standard input from then on, and the
terminal's answers would land among the keys), by ``freezeview MODEL.pt``. The
``textual-image`` package asks the terminal (a device attributes query, then a kitty
graphics query, each waiting 0.1 s at most for an answer) and picks the best protocol it
supports; iTerm2 answers as a sixel terminal. tmux and screen are not asked: they pass
neither protocol through by default, and an unanswered query can swallow the first key.
Where there is no protocol, the graph view's character drawing is the view, and ``i``
says so.
"""

from __future__ import annotations

import os
import sys

__all__ = ["PROTOCOLS", "detect_graphics"]

#: What :func:`detect_graphics` may answer, and how the app names it.
PROTOCOLS = {"kitty": "kitty graphics protocol", "sixel": "sixel"}


def detect_graphics() -> str | None:
    """``"kitty"``, ``"sixel"`` or None (no protocol, not a terminal, or not asked).

    ``FREEZEVIEW_GRAPHICS=off`` skips the question; ``=kitty`` or ``=sixel`` answers it
    without asking the terminal.
    """
    choice = os.environ.get("FREEZEVIEW_GRAPHICS", "").strip().lower()
    if choice in ("off", "none", "0", "no"):
        return None
    if choice in PROTOCOLS:
        return choice
    if not (
        sys.__stdin__ and sys.__stdout__ and sys.__stdin__.isatty() and sys.__stdout__.isatty()
    ):
        return None
    if os.environ.get("TMUX") or os.environ.get("TERM", "").startswith(("screen", "tmux")):
        return None
    try:
        from textual_image.renderable import Image, SixelImage, TGPImage
    except Exception:  # not installed, or the terminal answered nonsense
        return None
    found = {TGPImage: "kitty", SixelImage: "sixel"}.get(Image)
    if found is not None:
        # The terminal's cell size in pixels is asked now too, while it still can be.
        import textual_image.widget  # noqa: F401
    return found
