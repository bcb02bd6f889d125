"""What an export wrote: the values :func:`~.export.export` returns.

The pictures (each with how it was drawn), the steps' pictures and IR diffs, the page,
the notes and timings, and the measurement when sample inputs were given.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from ..draw import RenderResult
from ..freeze import Numerics, Step
from ..graph import GraphSnapshot
from ..measure import Measurement
from .export_profile import RunFacts

__all__ = ["ExportResult", "PictureEntry", "StepEntry", "StepSummary"]


@dataclass(frozen=True)
class StepSummary:
    """What the page's timeline shows of a step, read off it once: the step itself holds
    its graphs' printouts (tens of MB on a 70k-node model), which the page never shows."""

    index: int
    name: str
    title: str
    kind: str
    changed: bool
    seconds: float
    numerics: Numerics | None
    notes: tuple[str, ...]

    @classmethod
    def of(cls, step: Step) -> StepSummary:
        """The summary of ``step`` (its notes are read now)."""
        return cls(
            step.index,
            step.name,
            step.title,
            step.kind,
            step.changed,
            step.seconds,
            step.numerics,
            step.notes,
        )


@dataclass
class PictureEntry:
    """One picture written (or, without Graphviz, its DOT source)."""

    name: str
    title: str
    result: RenderResult


@dataclass
class StepEntry:
    """What export wrote for one pipeline step."""

    step: Step
    summary: str
    diff_file: Path | None  # None when the step changed nothing (no empty file is left)
    picture: PictureEntry | None
    before: GraphSnapshot | None = None
    after: GraphSnapshot | None = None


@dataclass
class ExportResult:
    """Everything :func:`export` wrote and how long it took.

    Attributes:
        directory: the output directory.
        files: every file written, in order.
        pictures: the main pictures (before, after, diff, side-by-side).
        steps: per-step entries (empty without ``per_step``).
        index: the ``index.html`` path.
        notes: sentences for the user (Graphviz fallbacks, missing Graphviz).
        load_seconds: time loading the model (when the export was given a path or a
            loader; 0 for a model already loaded).
        freeze_seconds: time running the pipeline (torch's own work).
        snapshot_seconds: time the pipeline took to snapshot the graphs drawn (it
            snapshots lazily, when export first reads them).
        notes_seconds: time the pipeline took to summarise its steps for the page.
        reasons_seconds: time finding why kept attributes were kept (explain).
        diff_seconds: time diffing snapshots.
        ir_diff_seconds: time writing the IR diffs.
        index_seconds: time writing ``index.html``.
        helper_seconds: the time a forked helper process spent on diffs and IR diffs
            while this one explained and drew (:mod:`.forked`). What was made here is
            in ``diff_seconds`` and ``ir_diff_seconds`` instead.
        helper_wait_seconds: how long the export waited for that helper's results.
        dot_wait_seconds: how long the export waited for Graphviz at the end (Graphviz
            lays the pictures out in the background: ``dot_seconds`` overlaps the rest).
        gc_seconds: time the garbage collector took at the end, scanning what the
            export built (it is paused while the export runs).
        total_seconds: the whole export, from its call to its return (gc included).
        graphviz_missing: True when only text outputs could be written.
    """

    directory: Path
    files: list[Path] = field(default_factory=list)
    pictures: list[PictureEntry] = field(default_factory=list)
    steps: list[StepEntry] = field(default_factory=list)
    index: Path | None = None
    notes: list[str] = field(default_factory=list)
    load_seconds: float = 0.0
    freeze_seconds: float = 0.0
    snapshot_seconds: float = 0.0
    notes_seconds: float = 0.0
    reasons_seconds: float = 0.0
    diff_seconds: float = 0.0
    ir_diff_seconds: float = 0.0
    index_seconds: float = 0.0
    helper_seconds: float = 0.0
    helper_wait_seconds: float = 0.0
    dot_wait_seconds: float = 0.0
    gc_seconds: float = 0.0
    total_seconds: float = 0.0
    graphviz_missing: bool = False
    #: With sample inputs: each step's latency and the verdict (the page's timeline).
    measurement: Measurement | None = None
    #: With sample inputs: per-node times (``profile``) and the steps bisected.
    facts: RunFacts = field(default_factory=RunFacts)

    def all_renders(self) -> list[RenderResult]:
        """Every render result (main pictures and step pictures)."""
        out = [p.result for p in self.pictures]
        out += [s.picture.result for s in self.steps if s.picture is not None]
        return out

    @property
    def build_seconds(self) -> float:
        """freezeview's time building views and DOT, all pictures."""
        return sum(r.build_seconds for r in self.all_renders())

    @property
    def dot_seconds(self) -> float:
        """Graphviz's time, all pictures."""
        return sum(r.dot_seconds for r in self.all_renders())

    @property
    def write_seconds(self) -> float:
        """Time writing picture files."""
        return sum(r.write_seconds for r in self.all_renders())
