"""The torch side of an export: the stepwise freeze, read once, then let go.

An export reads from torch what its files show -- each step's notes, the snapshots of the
graph before and after freezing, explain's verdicts -- and then needs torch no more. On
a 70k-node model torch's side is most of the memory: the loaded weights, the frozen
clone, a copy of the graph per pass. :func:`run_for_export` reads each step while its
graphs are at hand and lets the graphs of the step before go (as ``freezeview freeze``
does), then frees the pipeline; the snapshots, pictures, diff and page are built in the
room that leaves (:func:`~freezeview.engine.plumbing.give_back_freed_memory`). A
snapshot costs more than the graph it is taken of is worth keeping beside torch's own:
the before snapshot (140k nodes: 300 MB while it is parsed) is taken last, from the
inlined graph alone.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import torch

from ..freeze import Pipeline, Plan, Step, release_graphs
from ..graph import GraphSnapshot, snapshot_graph
from ..load import LoadedModel
from ..measure import MeasuredRun, Measurement
from ..plumbing import PlanError, give_back_freed_memory
from ..reasons import Explanation
from .export_page import inlined_source_texts
from .export_profile import RunFacts, RunWatch
from .export_values import ExportResult, StepSummary

__all__ = ["FrozenRun", "run_for_export"]


@dataclass
class FrozenRun:
    """What an export read from the stepwise freeze (torch's modules let go).

    Attributes:
        plan: the plan the steps ran with.
        steps: every step (with ``per_step``), or what the page shows of each.
        shown: with ``per_step``, the steps that show a ``forward`` graph.
        after: the snapshot of the final ``forward`` graph.
        explanation: explain's verdicts (None if explain could not say).
        reasons: kept attribute path -> why (the after picture's attribute boxes).
        measurement: with sample inputs, each step's latency and the verdict.
        pairs: with ``per_step``, each shown step with the snapshot before it and its own.
        facts: with sample inputs, the forwards' per-node times (``profile``) and the
            bisections of the steps that moved the outputs past tolerance.
    """

    plan: Plan
    steps: list[Step] | list[StepSummary]
    shown: list[Step]
    after: GraphSnapshot
    explanation: Explanation | None
    reasons: dict[str, str]
    measurement: Measurement | None = None
    pairs: list[tuple[Step, GraphSnapshot | None, GraphSnapshot]] = field(default_factory=list)
    facts: RunFacts = field(default_factory=RunFacts)
    #: the inlined ``forward`` not yet snapshotted, or the snapshot and its source texts
    _before: torch._C.Graph | tuple[GraphSnapshot, dict[str, str]] | None = None

    def take_before(self, result: ExportResult) -> tuple[GraphSnapshot, dict[str, str]]:
        """The inlined ``forward``'s snapshot and its nodes' source line texts.

        Taken now from the inlined graph if not yet (``snapshot_seconds`` booked in
        ``result``), which is let go: call it once torch's graphs and modules are gone,
        so that the snapshot is not built beside them.
        """
        held = self._before
        if isinstance(held, tuple):
            return held
        assert held is not None
        start = time.perf_counter()
        snapshot = snapshot_graph(held, "forward")
        texts = inlined_source_texts(held, snapshot)
        self._before = (snapshot, texts)
        result.snapshot_seconds += time.perf_counter() - start
        return snapshot, texts


def kept_reasons(pipe: Pipeline, steps: Sequence[Step]) -> dict[str, str]:
    """Attribute path -> why freezing kept it, from freezeview's explain when it can.

    The explanation is the pipeline's own (:meth:`Pipeline.explanation`), which the fold
    step's notes read too: on a 12-layer transformer one explain costs about half a
    second, and the page needs both.
    """
    kept: set[str] = set()
    for step in steps:
        kept.update(step.kept)
    reasons = {path: "kept as a module attribute by torch.jit.freeze" for path in kept}
    if not kept:
        return reasons  # nothing to explain: skip explain's alias analysis
    explanation = pipe.explanation(pipe.plan.preserved_attrs)
    if explanation is None:
        return reasons
    for verdict in explanation.attributes:
        if verdict.status == "kept" and verdict.reasons:
            first = verdict.reasons[0]
            text = f"{first.code}: {first.message}"
            if first.source:
                text += f" ({first.source})"
            reasons[verdict.path] = text
    return reasons


def _step_pairs(
    loaded: LoadedModel, shown: Sequence[Step]
) -> list[tuple[Step, GraphSnapshot | None, GraphSnapshot]]:
    """Each drawn step with the snapshot before it and its own.

    Step 00 inlines the method as saved (one call per submodule), so that is its
    "before"; a model without a forward method has none.
    """
    previous: GraphSnapshot | None = (
        snapshot_graph(loaded.module._c._get_method("forward").graph)
        if loaded.module._c._has_method("forward")
        else None
    )
    pairs = []
    for step in shown:
        snap = step.snapshot
        assert snap is not None
        pairs.append((step, previous, snap))
        previous = snap
    return pairs


def _inlined_forward(loaded: LoadedModel) -> torch._C.Graph:
    """``forward`` inlined, as the inline step makes it (a copy, then torch's inline pass)."""
    graph = loaded.module._c._get_method("forward").graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def _before_and_texts(loaded: LoadedModel, inline: Step) -> tuple[GraphSnapshot, dict[str, str]]:
    """The inline step's ``forward`` snapshot and the source line texts of its nodes.

    The texts are read through the inlined graph (one node per line), before the
    snapshot lets the graph go and the fold step folds it in place; a graph already let
    go is made again from ``loaded``.
    """
    picture = inline.forward_graph
    assert picture is not None
    graph = picture.graph() if not picture.released else None
    if graph is None:
        graph = _inlined_forward(loaded)
    snapshot = picture.snapshot()
    return snapshot, inlined_source_texts(graph, snapshot)


def _shows_forward(step: Step) -> bool:
    # Listing a step's methods takes no snapshot.
    return any(m == "forward" for m in step.snapshots)


def _read_row(step: Step) -> None:
    """Read what a step shows while its graphs are at hand (as ``freezeview freeze`` reads
    its table's rows): its change, its counts and its leading note."""
    _ = step.changed, step.nodes_added, step.first_note, step.node_count


def run_for_export(
    loaded: LoadedModel,
    plan: Plan | None,
    result: ExportResult,
    *,
    per_step: bool = False,
    inputs: Sequence[object] | None = None,
    measure: tuple[int, float] | tuple[int, float, bool] = (1, 0.25),
    profile: bool = False,
) -> FrozenRun:
    """Run the stepwise freeze of ``loaded`` and read all an export shows of it.

    Each step is read as soon as it is yielded, in order, as ``freezeview freeze`` reads
    its rows (:attr:`Pipeline.read_in_order`): explain runs first (on torch's freeze,
    which exists before the first step is yielded), the fold step folds the inlined
    graph in place instead of copying it, and each step's graphs go once the step after
    it is read; the memory each stage freed is given back before the next builds. Then
    the pipeline lets go of its modules and torch's freezes (:meth:`Pipeline.release`),
    the final graph is snapshotted, and the inlined ``forward`` is made again from
    ``loaded`` (a copy holds no tensor) for :meth:`FrozenRun.take_before`: once the
    caller lets go of ``loaded``, nothing of torch's is held but that graph. With
    ``per_step`` every step's snapshot is taken and kept instead.

    Args:
        loaded: the model.
        plan: what to preserve and which passes to run (default: torch's plan).
        result: where the times are booked (``freeze_seconds``, ``snapshot_seconds``,
            ``notes_seconds``, ``reasons_seconds``).
        per_step: keep every step's snapshot (one picture and diff per step).
        inputs: sample inputs, measured per step (``measure``: threads, seconds a step,
            and optionally True to time with autograd on); the step that takes the
            outputs past tolerance is bisected to the node where the numbers move.
        profile: with ``inputs``, also time each node of the unfrozen module's forward
            and of every step that changed the graph (:class:`RunWatch`).

    Raises:
        PlanError: a step failed, or the model has no forward method to draw.
    """
    start = time.perf_counter()
    pipe = Pipeline(loaded, plan, inputs)
    pipe.read_in_order = not per_step
    measured = None
    if inputs is not None and measure[1] > 0:
        measured = MeasuredRun.of(pipe, measure)
        run = measured.run()
    else:
        run = pipe.run()
    watch = RunWatch(pipe, profile=profile and measure[1] > 0, measure=measure)
    steps: list[Step] = []
    explained = False
    apart = 0.0  # explain's, the notes' and the profiling's time inside the loop
    for step in run:
        steps.append(step)
        if per_step or step.error is not None:
            watch.observe(step)
            continue
        began = time.perf_counter()
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        # Profiled and bisected while the step's graphs are held, as freeze does.
        watch.observe(step)
        if not explained and pipe.torch_outcome(pipe.plan.preserved_attrs) is not None:
            # explain reads torch's freeze (made before the first step is yielded) and
            # builds graphs of its own: run while the least is held, its pages given
            # back before the steps' graphs take theirs.
            explained = True
            _ = pipe.explanation(pipe.plan.preserved_attrs)
            give_back_freed_memory()
            result.reasons_seconds += time.perf_counter() - began
        noted = time.perf_counter()
        _read_row(step)
        result.notes_seconds += time.perf_counter() - noted
        if len(steps) > 1:
            release_graphs(steps[-2], step)
        give_back_freed_memory()
        apart += time.perf_counter() - began
    facts = watch.finish()
    if per_step:
        apart += facts.seconds  # inside ``apart`` already otherwise
    result.freeze_seconds = time.perf_counter() - start - apart
    failed = next((s for s in steps if s.error is not None), None)
    if failed is not None:
        pipe.release()
        raise PlanError(f"step {failed.index} ({failed.title}) failed: {failed.error}")
    if measured is not None:
        # The verdict's pair, timed again together (alternating blocks), as freeze does.
        measured.time_verdict()
    shown = [s for s in steps if _shows_forward(s)]
    if not shown:
        pipe.release()
        raise PlanError("the model has no forward method to draw; preserve a method to export it.")

    start = time.perf_counter()
    before: torch._C.Graph | tuple[GraphSnapshot, dict[str, str]] | None = None
    pairs = []
    if per_step:
        before = _before_and_texts(loaded, shown[0])
        pairs = _step_pairs(loaded, shown)
    result.snapshot_seconds += time.perf_counter() - start

    start = time.perf_counter()
    reasons = kept_reasons(pipe, steps)
    explanation = pipe.explanation(pipe.plan.preserved_attrs)
    result.reasons_seconds += time.perf_counter() - start
    start = time.perf_counter()
    for step in steps:
        _ = step.notes
    result.notes_seconds += time.perf_counter() - start

    run_plan = pipe.plan
    if not per_step:
        for done, following in itertools.pairwise(steps):
            release_graphs(done, following)
    # The final graph is a private copy (the pipeline detached it): its snapshot is
    # taken once explain's and the pipeline's graphs are gone and their pages given
    # back, so that they and the snapshot are not held at once.
    pipe.release()
    give_back_freed_memory()
    start = time.perf_counter()
    after = shown[-1].snapshot
    assert after is not None
    summaries: list[StepSummary] = []
    if not per_step:
        summaries = [StepSummary.of(step) for step in steps]
        steps, shown = [], []  # their graphs' printouts go with them
        give_back_freed_memory()
        # What the inline step showed, made again (the fold step folded that graph in
        # place); the before snapshot is taken from it once the caller let go of torch.
        before = _inlined_forward(loaded)
    result.snapshot_seconds += time.perf_counter() - start
    return FrozenRun(
        plan=run_plan,
        steps=steps if per_step else summaries,
        shown=shown,
        after=after,
        explanation=explanation,
        reasons=reasons,
        measurement=measured.measurement if measured is not None else None,
        pairs=pairs,
        facts=facts,
        _before=before,
    )
