"""The small, torch-free values the app's widgets draw.

:class:`~freezeview.session.local.Session` turns engine objects into these, so widgets
never depend on an engine class, and importing the app does not import torch (the
first screen appears before torch has even loaded).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "AttrSummary",
    "MigrationSummary",
    "NodeTime",
    "NodeTimes",
    "OpenedSummary",
    "PassSummary",
    "ReasonSummary",
    "StepSummary",
    "migration_summary",
    "step_summary",
]


@dataclass(frozen=True)
class ReasonSummary:
    """One reason for an attribute's status, as text ready to show."""

    code: str
    message: str
    node: str = ""
    source: str = ""
    method: str = ""
    #: The source line's own text, from the model's debug information.
    source_text: str = ""


@dataclass(frozen=True)
class AttrSummary:
    """An attribute (or submodule) with its verdict under the current plan."""

    path: str
    kind: str
    type: str
    status: str
    reasons: tuple[ReasonSummary, ...] = ()
    preserved: bool = False
    #: The value, for the values the tree shows (a TorchScript Enum member by name).
    value: str = ""

    @property
    def name(self) -> str:
        """The last path component."""
        return self.path.rsplit(".", 1)[-1]

    @property
    def written_constant(self) -> bool:
        """Folded, yet the frozen graph still writes it (a ``written-constant`` reason):
        the frozen model mutates its own constant."""
        return any(r.code == "written-constant" for r in self.reasons)

    @property
    def owner(self) -> str:
        """Dotted path of the module holding it (``""`` for the root)."""
        return self.path.rsplit(".", 1)[0] if "." in self.path else ""


@dataclass(frozen=True)
class PassSummary:
    """A pass the user can switch on or off."""

    id: str
    description: str
    default: bool
    group: str = ""


@dataclass(frozen=True)
class StepSummary:
    """One step of freezing, as the steps bar and the IR pane show it.

    The step's graph is not in it: ``graph`` names it in the session
    (``session.step_graph(graph)`` takes it, blocking; ``session.known_graph(graph)``
    says whether the screen has it already). Steps that leave the graph as it was share
    their key. A run's steps cost what torch's freeze costs, plus one snapshot per step
    somebody looks at.
    """

    index: int
    name: str
    title: str
    #: The key of the step's ``forward`` graph in the session (this run only).
    graph: int
    changed: bool
    #: Nodes of that graph, nested blocks included.
    node_count: int = 0
    added: int = 0
    removed: int = 0
    changed_nodes: int = 0
    seconds: float = 0.0
    numerics: str = ""
    error: str = ""
    code: str | None = None
    kind: str = ""
    #: The step's forward latency and its change against the unfrozen module
    #: (``0.014 ms -41%``, ``same (±5%)``); empty when not timed (no sample inputs).
    latency: str = ""
    #: The run's verdict so far (the last step's is the final one): how much faster or
    #: slower the frozen forward is, and which steps did it; empty when not timed.
    verdict: str = ""
    #: What the step did, or why it did not fire (torch's condition), as the notes
    #: column of ``freezeview freeze`` says it; a failed step's error.
    notes: str = ""
    #: Where this step moved the numbers (the bisection, when its outputs went past
    #: tolerance): the id of the first node whose value differs, in the step's graph
    #: snapshot (None: no bisection, or no single node named).
    moved_node: int | None = None
    #: The bisection's text block (``freezeview freeze`` prints the same), or empty.
    moved: tuple[str, ...] = ()
    #: True when each node of the step's graph was timed (``session.node_times``).
    timed_nodes: bool = False

    @property
    def label(self) -> str:
        """``5 · conv -> batchnorm (round 1)``: the step's number, counted from 0, and its
        title, as ``freezeview freeze``'s table, the timeline, the review page and the
        file names of ``g`` and ``export`` (``05-fold_conv_bn.svg``) number it."""
        return f"{self.index} · {self.title}"


@dataclass(frozen=True)
class NodeTime:
    """One node's time in a profiled forward, as the graph view and the inspector show it.

    ``id`` is the node's id in the step's graph snapshot; ``unfrozen_ms`` is the time of
    the same node (matched through the steps' diffs) in the unfrozen module, None when
    it has no match there (an op a fold made) or the unfrozen module was not profiled.
    """

    id: int
    kind: str
    ms: float
    share: float
    unfrozen_ms: float | None = None
    #: The spread of ``ms`` over the timed blocks, and of ``unfrozen_ms``: a difference
    #: inside them is noise.
    spread: float = 0.0
    unfrozen_spread: float = 0.0


@dataclass(frozen=True)
class NodeTimes:
    """Where one graph's forward spends its time, node by node (``freeze --profile``).

    Kept as columns, one entry per timed node in the same order, not as a
    :class:`NodeTime` each: a 70k-node graph's times cross from the engine process in a
    few milliseconds of unpickling (objects one by one take a tenth of a second, the
    screen's GIL held). :attr:`nodes` and :meth:`of` make the :class:`NodeTime` values.

    Attributes:
        graph: the graph's key in the session (:attr:`StepSummary.graph`).
        step: the profiled step's index (None: the unfrozen module, shown by the inline
            step's graph).
        title: ``conv -> batchnorm (round 1)`` or ``unfrozen module``.
        clock: which tool measured, and with how many threads, in words.
        forward_ms: the forward's median time.
        total_ms: the timed nodes together (what a share is of).
        ids, kinds, ms, shares, unfrozen_ms, spreads, unfrozen_spreads: the columns of
            :class:`NodeTime`'s fields.
    """

    graph: int
    step: int | None
    title: str
    clock: str
    forward_ms: float
    total_ms: float
    ids: tuple[int, ...] = ()
    kinds: tuple[str, ...] = ()
    ms: tuple[float, ...] = ()
    shares: tuple[float, ...] = ()
    unfrozen_ms: tuple[float | None, ...] = ()
    spreads: tuple[float, ...] = ()
    unfrozen_spreads: tuple[float, ...] = ()

    @property
    def nodes(self) -> tuple[NodeTime, ...]:
        """Every timed node, in the profile's order."""
        return tuple(self._node(i) for i in range(len(self.ids)))

    def ms_by_id(self) -> dict[int, float]:
        """Each timed node's milliseconds, by its snapshot id."""
        return dict(zip(self.ids, self.ms, strict=True))

    def of(self, node_ids: Sequence[int]) -> list[NodeTime]:
        """The timed nodes among ``node_ids`` (a box's), in that order."""
        index = self._index
        return [self._node(index[i]) for i in node_ids if i in index]

    @functools.cached_property
    def _index(self) -> dict[int, int]:
        return {node_id: position for position, node_id in enumerate(self.ids)}

    def _node(self, i: int) -> NodeTime:
        return NodeTime(
            self.ids[i],
            self.kinds[i],
            self.ms[i],
            self.shares[i],
            self.unfrozen_ms[i],
            self.spreads[i],
            self.unfrozen_spreads[i],
        )


def node_times_summary(key: int, profile: Any, unfrozen: Any) -> NodeTimes:
    """An engine ``NodeProfile`` of graph ``key`` as the screen reads it, each node with
    the time of its match in ``unfrozen`` (the unfrozen module's profile, or None)."""
    before = {n.id: n for n in unfrozen.nodes} if unfrozen is not None else {}
    own = profile is unfrozen
    nodes = profile.nodes
    matches = [
        n if own else before.get(n.unfrozen) if n.unfrozen is not None else None for n in nodes
    ]
    return NodeTimes(
        graph=key,
        step=profile.step,
        title=profile.title,
        clock=profile.measured_by(),
        forward_ms=profile.forward_ms,
        total_ms=profile.total_ms,
        ids=tuple(n.id for n in nodes),
        kinds=tuple(n.kind for n in nodes),
        ms=tuple(n.ms for n in nodes),
        shares=tuple(n.share for n in nodes),
        unfrozen_ms=tuple(m.ms if m is not None else None for m in matches),
        spreads=tuple(n.spread for n in nodes),
        unfrozen_spreads=tuple(m.spread if m is not None else 0.0 for m in matches),
    )


@dataclass(frozen=True)
class OpenedSummary:
    """A model just opened: what the app shows before any step exists."""

    name: str
    #: IR of the inlined forward graph (torch's own printout).
    text: str
    node_count: int
    #: ``.code`` of the loaded module.
    code: str
    load_seconds: float
    warnings: tuple[str, ...]
    passes: tuple[PassSummary, ...]


@dataclass(frozen=True)
class MigrationSummary:
    """What ``freezeview migrate`` found about the model, as the app's ``m`` shows it."""

    model: str
    #: ``converts and behaves the same``, ``converts with differences`` or ``does not
    #: convert``.
    verdict: str
    #: The command line's exit code: 0 when it converts and behaves the same, else 1.
    exit_code: int
    #: False on a torch without the converter (``lines`` then say so in one sentence).
    converter_available: bool
    #: torch's converter made an ExportedProgram.
    converted: bool
    #: What ``freezeview migrate`` prints, line by line, as (kind, text): the kinds are
    #: the engine's ``LINE_KINDS`` (``write-lost``, ``speed``, ...).
    lines: tuple[tuple[str, str], ...]
    #: Each state write the program loses: (attribute, ``file:line`` of the write, that
    #: line's text).
    lost_writes: tuple[tuple[str, str, str], ...] = ()
    #: Each behaviour difference in one sentence (listed when the ``.pt2`` is written
    #: anyway).
    differences: tuple[str, ...] = ()
    #: The ``.pt2`` written by this call, if any.
    written: str = ""
    #: Why it was not, when asked to write it.
    not_written: str = ""
    #: How long the migration took (converter, runs and timing).
    seconds: float = 0.0

    @property
    def same(self) -> bool:
        """It converts and behaves the same: the ``.pt2`` may be written as it is."""
        return self.exit_code == 0


def _numerics_cell(value: Any) -> str:
    """The steps bar's narrow cell: ``exact``, ``3e-07`` or ``0.2 ✗`` (not allclose); empty
    when not checked (the CLI's wider one is ``output.report.numerics_text``)."""
    if value is None:
        return ""
    text = "exact" if value.exact else f"{value.max_abs:.2g}"
    return text if value.allclose else f"{text} ✗"


def step_summary(step: Any, graph: int, node_count: int, measurement: Any = None) -> StepSummary:
    """The summary of an engine step whose forward graph is ``graph`` (a key) of
    ``node_count`` nodes, with its latency when the run was timed (``measurement``)."""
    # The counts, and the note ``freezeview freeze`` prints (what changed, or why the
    # pass did not fire): the first note only, as the CLI's table, since the fold step's
    # later notes (the kept attributes' reasons) run explain. A step that changed
    # nothing added, removed and changed nothing.
    counted = bool(step.changed) or step.error is not None
    added, removed, changed = (
        (int(step.nodes_added), int(step.nodes_removed), int(step.nodes_changed))
        if counted
        else (0, 0, 0)
    )
    latency = verdict = ""
    if measurement is not None and measurement.unfrozen is not None:
        from ..engine.measure import latency_cell, verdict_text  # the engine process only

        cell = latency_cell(measurement, int(step.index))
        latency = "" if cell == "-" else cell
        verdict = verdict_text(measurement)
    return StepSummary(
        index=int(step.index),
        name=str(step.name),
        title=str(step.title),
        graph=graph,
        changed=bool(step.changed),
        node_count=node_count,
        added=added,
        removed=removed,
        changed_nodes=changed,
        seconds=float(step.seconds),
        numerics=_numerics_cell(step.numerics),
        error=str(step.error or ""),
        kind=str(step.kind),
        latency=latency,
        verdict=verdict,
        notes=str(step.error) if step.error else str(step.first_note),
    )


def migration_summary(migration: Any) -> MigrationSummary:
    """The summary of an engine ``Migration`` (``freezeview.engine.migrate``)."""
    conversion = migration.conversion
    return MigrationSummary(
        model=str(migration.model),
        verdict=str(migration.verdict),
        exit_code=int(migration.exit_code),
        converter_available=bool(conversion.available),
        converted=bool(conversion.converted),
        lines=tuple((line.kind, line.text) for line in migration.report_lines()),
        lost_writes=tuple((w.path, w.source, w.source_text) for w in migration.lost_writes),
        differences=tuple(migration.differences),
        written=str(migration.written),
        not_written=str(migration.not_written),
        seconds=float(migration.seconds),
    )
