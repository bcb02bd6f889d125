"""An export's forward times and where its numbers move: read during the run, drawn after.

With sample inputs, ``export(profile=True)`` times each node of the unfrozen module's
forward and of every step that changed the graph (:class:`~freezeview.engine.measure.NodeTimer`,
the same as ``freeze --profile``); with sample inputs at all, the step that takes the
outputs past tolerance is bisected to the first node whose value differs
(:class:`~freezeview.engine.measure.ValueBisector`, as ``freeze`` does). Both are read
while the steps' graphs are at hand (:class:`RunWatch`) and kept as torch-free values
(:class:`RunFacts`); the pictures then get them as overlays (a heat fill per box, an
outline on the node named), by the node ids of the snapshots the pictures draw.

A profile is laid over a snapshot only when its nodes are that snapshot's (every timed
node's kind agrees at its id): a picture never shows another graph's times.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from ..draw import Overlay
from ..freeze import Pipeline, Step
from ..graph import GraphSnapshot
from ..measure import Bisection, NodeTimer, ValueBisector

__all__ = ["RunFacts", "RunWatch", "clock_name"]

# measure offers NodeTimer and ValueBisector, not the classes of their values: the
# profiles (NodeProfile) and their changes (ProfileChange) are held as they come.
Profile = Any
Change = Any


def clock_name(profile: Profile) -> str:
    """``Static Runtime`` or ``torch.profiler``: the tool that timed ``profile``."""
    return "Static Runtime" if profile.tool == "static-runtime" else "torch.profiler"


@dataclass
class RunFacts:
    """What an export read of the forwards' time and of where the numbers move.

    Attributes:
        profiled: per-node times were asked for (``profile=True`` with sample inputs).
        profiles: the unfrozen module's profile (``step`` None) first, then each step's.
        changes: per step index, what it did to the time against the profile before.
        notes: why a forward could not be profiled.
        bisections: the steps bisected (the one that took the outputs past tolerance).
        seconds: the wall time the profiling and the bisections took.
    """

    profiled: bool = False
    profiles: list[Profile] = field(default_factory=list)
    changes: dict[int, Change] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)
    bisections: list[Bisection] = field(default_factory=list)
    seconds: float = 0.0

    # --- which profile shows on which picture ------------------------------------------

    def profile_of(self, step: int | None) -> Profile | None:
        """The profile of step ``step`` (None: the unfrozen module's), if taken."""
        return next((p for p in self.profiles if p.step == step), None)

    def last(self) -> Profile | None:
        """The last step's profile (the frozen graph's), if any step was profiled."""
        stepped = [p for p in self.profiles if p.step is not None]
        return stepped[-1] if stepped else None

    def bisection_of(self, step: int) -> Bisection | None:
        """The bisection of step ``step``, if it was bisected."""
        return next((b for b in self.bisections if b.step == step), None)

    def overlay(
        self,
        profile: Profile | None,
        snapshot: GraphSnapshot | None,
        *,
        ghosts: Profile | None = None,
        before: GraphSnapshot | None = None,
        step: int | None = None,
    ) -> Overlay | None:
        """The overlay of ``snapshot``'s picture: ``profile``'s times (when they are that
        snapshot's), ``ghosts``' times for the removed ops (when they are ``before``'s),
        and the node step ``step``'s bisection named, outlined."""
        times: dict[int, float] = {}
        total, clock = 0.0, ""
        if profile is not None and snapshot is not None and _fits(profile, snapshot):
            times = {n.id: n.ms for n in profile.nodes}
            total, clock = profile.total_ms, clock_name(profile)
        ghost_times: dict[int, float] = {}
        if times and ghosts is not None and before is not None and _fits(ghosts, before):
            ghost_times = {n.id: n.ms for n in ghosts.nodes}
        outlined: frozenset[int] = frozenset()
        found = self.bisection_of(step) if step is not None else None
        if found is not None and found.status == "named" and found.node is not None:
            outlined = frozenset({found.node.id})
        if not times and not outlined:
            return None
        return Overlay(times, total, clock, ghost_times, outlined)

    def step_overlay(
        self, step: int, snapshot: GraphSnapshot | None, before: GraphSnapshot | None
    ) -> Overlay | None:
        """A step picture's overlay: the step's profile (the unfrozen module's for the
        inline step, which draws the inlined graph), the ghosts' times from the profile
        it was compared with, the node its bisection named."""
        if step == 0:
            return self.overlay(self.profile_of(None), snapshot)
        change = self.changes.get(step)
        against = self.profile_of(change.against) if change is not None else None
        return self.overlay(
            self.profile_of(step), snapshot, ghosts=against, before=before, step=step
        )

    # --- JSON -------------------------------------------------------------------------

    def profile_json(self) -> dict[str, Any] | None:
        """``export --json``'s ``profile`` (None when per-node times were not asked)."""
        if not self.profiled:
            return None
        lines = []
        for profile in self.profiles:
            change = self.changes.get(profile.step) if profile.step is not None else None
            lines.append(
                profile.to_json() | {"change": change.to_json() if change is not None else None}
            )
        return {"profiles": lines, "notes": list(self.notes), "seconds": self.seconds}


def _fits(profile: Profile, snapshot: GraphSnapshot) -> bool:
    """True when every timed node of ``profile`` is at its id in ``snapshot``."""
    try:
        return all(snapshot.node(n.id).kind == n.kind for n in profile.nodes)
    except (IndexError, KeyError):
        return False


class RunWatch:
    """Profiles and bisects a pipeline's steps as they are yielded (graphs at hand).

    Args:
        pipe: the pipeline (with sample inputs, or nothing runs).
        profile: time each node (``export --profile``).
        measure: ``(threads, seconds per forward, [autograd])`` as the latency column's.
    """

    def __init__(
        self,
        pipe: Pipeline,
        *,
        profile: bool,
        measure: tuple[int, float] | tuple[int, float, bool],
    ) -> None:
        self.facts = RunFacts(profiled=profile and pipe.inputs is not None)
        autograd = bool(measure[2]) if len(measure) > 2 else False
        self._timer: NodeTimer | None = (
            NodeTimer(pipe, threads=int(measure[0]), budget=float(measure[1]), autograd=autograd)
            if self.facts.profiled
            else None
        )
        self._bisector: ValueBisector | None = (
            ValueBisector(pipe) if pipe.inputs is not None else None
        )

    def observe(self, step: Step) -> None:
        """Profile and bisect ``step`` as asked (its graphs must still be held)."""
        started = time.perf_counter()
        if self._bisector is not None:
            self._bisector.observe(step)
        if self._timer is not None:
            self._timer.observe(step)
        self.facts.seconds += time.perf_counter() - started

    def finish(self) -> RunFacts:
        """The facts read; the timer and the bisector (which hold the pipeline's
        modules and graph copies) are let go."""
        if self._timer is not None:
            self.facts.profiles = list(self._timer.profiles)
            self.facts.changes = dict(self._timer.changes)
            self.facts.notes = [note for _, note in sorted(self._timer.notes.items())]
        if self._bisector is not None:
            self.facts.bisections = list(self._bisector.bisections)
        self._timer = self._bisector = None
        return self.facts
