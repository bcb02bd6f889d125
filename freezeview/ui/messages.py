"""Messages the app's workers post back to the event loop.

Workers run engine calls in threads and never touch widgets; each result arrives as one
of these small messages and is drawn by a handler on the app.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.message import Message

if TYPE_CHECKING:
    pass
from .views import AttrView, PassView, StepView

__all__ = [
    "EngineFailed",
    "ExplanationReady",
    "Exported",
    "Highlighted",
    "ModelLoaded",
    "Rendered",
    "StepReady",
    "StepsFinished",
]


@dataclass
class ModelLoaded(Message):
    """The model is loaded; ``text`` is its inlined forward graph's IR."""

    name: str
    text: str
    node_count: int
    code: str
    load_seconds: float
    warnings: list[str]
    passes: list[PassView]


@dataclass
class ExplanationReady(Message):
    """Verdicts for every attribute under the given preserved names."""

    views: list[AttrView]
    preserved: tuple[str, ...]
    inventory: Any


@dataclass
class StepReady(Message):
    """One more freezing step is available."""

    run_id: int
    step: StepView


@dataclass
class StepsFinished(Message):
    """The run ``run_id`` produced all its steps (or stopped on an error / cancel)."""

    run_id: int
    count: int
    seconds: float


@dataclass
class Highlighted(Message):
    """A document was lexed into highlighted lines (for the IR pane)."""

    key: tuple[Any, ...]
    lines: list[Text]
    text: str = ""
    #: Prefetched in the background: cache it, do not show it.
    prefetch: bool = False


@dataclass
class Rendered(Message):
    """The current step was rendered to files."""

    paths: list[Path]


@dataclass
class Exported(Message):
    """Everything was exported into ``directory``."""

    directory: Path
    paths: list[Path]


@dataclass
class EngineFailed(Message):
    """An engine call failed; ``task`` says which (load, explain, steps, render, export)."""

    task: str
    message: str
    fatal: bool = False
