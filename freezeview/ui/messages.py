"""Messages of the main screen that no one widget owns.

Workers run engine calls in threads and never touch widgets; each result arrives as one
of these small messages and the screen routes it to the widgets that show it. A widget's
own messages (the model tree's ``PreserveToggled``, the steps bar's ``StepSelected``, ...)
are nested in the widget's class.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.message import Message
from textual.worker import Worker

from ..session import AttrSummary, FreezeviewError, PassSummary, StepSummary, Written

if TYPE_CHECKING:
    from ..session import Inventory, NodeTimes
    from .tree_rows import TreeRows

__all__ = [
    "EngineFailed",
    "ExplanationReady",
    "Exported",
    "FinalCodeReady",
    "Highlighted",
    "ModelLoaded",
    "NodeTimesReady",
    "Rendered",
    "Status",
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
    passes: list[PassSummary]


@dataclass
class ExplanationReady(Message):
    """Verdicts for every attribute under the given preserved names: torch's statuses
    with the reasons still pending (``complete`` False), then the whole explanation;
    ``request`` names the explain they answer (a newer one makes them stale)."""

    summaries: list[AttrSummary]
    preserved: tuple[str, ...]
    inventory: Inventory | None
    request: int = 0
    complete: bool = True
    #: The model tree's rows, laid out off the event loop (None: the tree lays them out).
    rows: TreeRows | None = None


@dataclass
class StepReady(Message):
    """One more freezing step is available."""

    run_id: int
    step: StepSummary


@dataclass
class StepsFinished(Message):
    """The run ``run_id`` produced all its steps (or stopped on an error / cancel)."""

    run_id: int
    count: int
    seconds: float


@dataclass
class NodeTimesReady(Message):
    """The node times of run ``run_id``'s graph ``key`` arrived (None: not profiled)."""

    run_id: int
    key: int
    times: NodeTimes | None


@dataclass
class FinalCodeReady(Message):
    """The run ``run_id``'s frozen ``.code`` reached the screen after its last step
    (the engine process reads it once the screen has every step)."""

    run_id: int


@dataclass
class Highlighted(Message):
    """A document for the IR pane is ready (a diff computed off the event loop);
    ``lines``: its lines already highlighted, when its maker lexed them."""

    key: tuple[Any, ...]
    lines: list[Text]
    text: str = ""


@dataclass
class Rendered(Message):
    """The current step was rendered to files."""

    written: Written


@dataclass
class Exported(Message):
    """Everything was exported into ``directory``."""

    directory: Path
    written: Written


@dataclass
class Status(Message):
    """A sentence for the status line (what the app is doing, or an error)."""

    text: str | Text
    error: bool = False


@dataclass
class EngineFailed(Message):
    """A worker failed; ``task`` is its group (load, explain, steps, render, export, ...)."""

    task: str
    message: str
    fatal: bool = False

    @classmethod
    def of(cls, worker: Worker[Any]) -> EngineFailed:
        """The failure of ``worker`` in one sentence; a failed load is fatal."""
        return cls.of_error(worker.group, worker.error)

    @classmethod
    def of_error(cls, task: str, error: BaseException | None) -> EngineFailed:
        """``task``'s failure in one sentence (freezeview's own, or the first line of any
        other error); a failed load is fatal."""
        if isinstance(error, FreezeviewError):
            message = error.message
        else:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            message = f"{type(error).__name__}: {first[:200]}"
        return cls(task, message, fatal=task == "load")
