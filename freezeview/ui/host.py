"""What the main screen needs of the app that hosts it.

The screen reads a few of the app's settings (the model's name, the plan, where files
go) and hands it warnings. Naming them as a :class:`typing.Protocol` keeps the import
one-way: ``ui/app.py`` imports ``ui/screens/main.py``, never the other way round, and
any app with these attributes can host the screen (a test double included).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Protocol

if TYPE_CHECKING:
    from textual.binding import Binding

    from ..session import EngineSession, SessionOptions

__all__ = ["ScreenHost"]


class ScreenHost(Protocol):
    """The app as the main screen sees it."""

    @property
    def model_label(self) -> str:
        """The model's name, for the title and status line."""

    #: How the model is opened and run (the command line's options).
    options: SessionOptions
    #: Where ``g`` and ``e`` write.
    output_dir: Path
    #: The pass ids asked for (``--passes``); None for torch's default plan.
    passes: list[str] | None
    #: Show per-step timings (snapshot tests switch them off).
    show_timings: bool
    #: The engine session (in this process, or the engine process).
    session: EngineSession | None
    #: Warnings torch raised, kept as information (the help screen lists them).
    captured_warnings: list[str]

    def record_warning(self, text: str) -> None:
        """Keep a warning torch raised, to show as information."""

    def all_bindings(self) -> list[Binding]:
        """Every key of the main screen and of the app (the help screen lists them)."""
