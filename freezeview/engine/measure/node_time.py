"""Where the forward's time goes: each node's time, for the unfrozen module and each step.

:class:`NodeTimer` follows a pipeline's run as :class:`~.measured_run.MeasuredRun` does.
With sample inputs, for the unfrozen module and for every step that changed the graph,
it times each node of the forward, maps it back to the graph's node (its id in the
step's snapshot, so its module path and source line) and, through the diff's node
matching, to the same node in the graph profiled before and in the unfrozen module.

Two tools measure, and every profile says which:

* **Static Runtime** (``torch._C._jit_to_static_module(graph).benchmark_individual_ops``)
  where it accepts the graph: a frozen graph that no longer reads the module. It times
  each node it runs with its own clock, in blocks; freezeview takes each node's median
  over the blocks. Its nodes are the graph's top-level nodes other than constants, in
  order; freezeview maps them so only when the kinds it reports agree (counts and
  per-kind sums), otherwise the profiler measures.
* **torch.profiler** (``record_shapes``) elsewhere: the unfrozen module
  (Static Runtime would freeze it first, which is not what the user runs), graphs that
  still read module attributes, graphs Static Runtime refuses. The ops each forward
  records are matched to the graph's nodes in execution order, kind by kind.

The rules of the latency column hold: nothing runs without sample inputs or with a
budget of 0; threads are fixed and stated; warm-up first; medians and their spread;
the profiling stops within a time budget; every forward runs on a private copy
(the pipeline's sandboxes, or a graph copy whose tensor constants are cloned when a
node may write them), never on the module that is written.
"""

from __future__ import annotations

import math
import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any

import torch

from ..diff import diff_snapshots, index_nodes
from ..freeze import Pipeline, SandboxError, Step
from ..graph import GraphSnapshot, snapshot_graph
from ..plumbing import torch_cause
from .latency import DEFAULT_BUDGET, DEFAULT_THREADS, fixed_threads
from .node_clocks import Refused, profiler_times, static_runtime_kind, static_runtime_times
from .node_time_values import (
    STATIC_RUNTIME,
    TORCH_PROFILER,
    KindChange,
    KindTime,
    NodeChange,
    NodeProfile,
    NodeTime,
    ProfileChange,
    change_word,
)

__all__ = ["NodeTimer", "compare_profiles", "profile_graph", "static_runtime_kind"]


def _median_spread(values: Sequence[float]) -> tuple[float, float]:
    middle = statistics.median(values)
    return middle, statistics.median(abs(v - middle) for v in values)


# --- one graph -------------------------------------------------------------------------


def profile_graph(
    graph: torch._C.Graph,
    snapshot: GraphSnapshot,
    call: Callable[[], Any],
    inputs: Sequence[Any],
    *,
    step: int | None = None,
    name: str = "unfrozen",
    title: str = "unfrozen module",
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    autograd: bool = False,
    after_call: Callable[[], None] | None = None,
    static_runtime: bool = True,
    profiler_why: str = "",
    trace: Path | None = None,
) -> NodeProfile:
    """Time each node of ``graph``'s forward on ``inputs``.

    Args:
        graph: the (inlined) forward graph; ``snapshot`` is its snapshot (the node ids).
        call: one forward of ``graph`` on a private copy (the pipeline's sandbox).
        inputs: the sample inputs (Static Runtime runs ``graph`` on them itself).
        step, name, title: what the profile is of (None / ``unfrozen`` for the module).
        threads: torch's intra-op threads (restored afterwards).
        budget: seconds of recorded blocks or forwards (a few at least).
        autograd: forwards under autograd (the profiler only: Static Runtime is
            inference-only, so it is not asked then).
        after_call: puts back what a forward wrote (after every block, outside timing).
        static_runtime: try Static Runtime first; ``profiler_why`` says why not.
        trace: where to write a Chrome trace of the profiled forwards (the profiler runs
            three forwards for it when Static Runtime measured).

    Returns:
        The :class:`NodeProfile`.

    Raises:
        SandboxError: the private copy cannot run the graph.
        Exception: the forward failed on the inputs (torch's error).
    """
    started = time.perf_counter()
    startup = 0.0
    info = index_nodes(snapshot)
    why = profiler_why
    percent: dict[str, float] = {}
    shapes: dict[int, tuple[tuple[int, ...], ...]] = {}
    with fixed_threads(threads):
        result = None
        if static_runtime and not autograd:
            try:
                result = static_runtime_times(graph, inputs, budget)
            except Refused as exc:
                why = str(exc)
        elif autograd:
            why = "--autograd: Static Runtime runs inference only"
        if result is not None:
            times, totals, percent, warm, runs, calls = result
            tool, mode, blocks = STATIC_RUNTIME, "inference_mode", len(totals)
            forward = statistics.median(totals)
            if trace is not None:
                traced = profiler_times(call, graph, budget, autograd, after_call, trace, runs=3)
                calls += traced[-2]
                startup = traced[-1]
        else:
            times, shapes, spans, mode, warm, runs, calls, startup = profiler_times(
                call, graph, budget, autograd, after_call, trace
            )
            tool, blocks = TORCH_PROFILER, runs
            forward = statistics.median(spans) if spans else math.nan
    medians = {i: _median_spread(v) for i, v in times.items() if v}
    total = sum(m for m, _ in medians.values()) or 1.0
    nodes = []
    for i in sorted(medians):
        node = info[i].node if i in info else None
        ms, spread = medians[i]
        nodes.append(
            NodeTime(
                id=i,
                kind=node.kind if node is not None else "?",
                scope=node.scope if node is not None else "",
                source=str(node.source) if node is not None and node.source else "",
                ms=ms,
                spread=spread,
                share=ms / total,
                shapes=shapes.get(i, ()),
            )
        )
    return NodeProfile(
        step=step,
        name=name,
        title=title,
        tool=tool,
        why=why,
        threads=threads,
        warmup=warm,
        runs=runs,
        blocks=blocks,
        forward_ms=forward,
        nodes=tuple(nodes),
        kinds=_kinds(nodes, total),
        calls=calls,
        seconds=time.perf_counter() - started,
        torch_percent=percent,
        startup=startup,
        trace=str(trace) if trace is not None else None,
        mode=mode,
    )


def _kinds(nodes: Sequence[NodeTime], total: float) -> tuple[KindTime, ...]:
    ms: dict[str, float] = {}
    spread: dict[str, float] = {}
    count: Counter[str] = Counter()
    for n in nodes:
        ms[n.kind] = ms.get(n.kind, 0.0) + n.ms
        spread[n.kind] = spread.get(n.kind, 0.0) + n.spread
        count[n.kind] += 1
    return tuple(
        KindTime(kind, count[kind], ms[kind], spread[kind], ms[kind] / total)
        for kind in sorted(ms, key=lambda k: (-ms[k], k))
    )


def compare_profiles(
    before: NodeProfile, after: NodeProfile, matched: dict[int, int], most: int = 5
) -> ProfileChange:
    """What changed between two profiles, node by node through ``matched`` (node id in
    ``before``'s graph -> node id in ``after``'s, the diff's matching)."""
    old = {n.id: n for n in before.nodes}
    new = {n.id: n for n in after.nodes}
    kinds: list[KindChange] = []
    for kind in sorted({k.kind for k in before.kinds} | {k.kind for k in after.kinds}):
        a, b = before.kind(kind), after.kind(kind)
        a_ms, b_ms = (a.ms if a else 0.0), (b.ms if b else 0.0)
        a_n, b_n = (a.count if a else 0), (b.count if b else 0)
        noise = (a.spread if a else 0.0) + (b.spread if b else 0.0)
        word = change_word(a_ms, b_ms, noise)
        if word != "same" or a_n != b_n:
            kinds.append(KindChange(kind, a_ms, b_ms, a_n, b_n, word))
    kinds.sort(key=lambda k: (-abs(k.after_ms - k.before_ms), k.kind))
    nodes: list[NodeChange] = []
    for b_id, a_id in matched.items():
        x, y = old.get(b_id), new.get(a_id)
        if x is None or y is None:
            continue
        word = change_word(x.ms, y.ms, x.spread + y.spread)
        if word != "same":
            nodes.append(NodeChange(b_id, a_id, y.kind, y.where(), x.ms, y.ms, word))
    for b_id, x in old.items():
        if b_id not in matched:
            nodes.append(NodeChange(b_id, None, x.kind, x.where(), x.ms, 0.0, "gone"))
    taken = set(matched.values())
    for a_id, y in new.items():
        if a_id not in taken:
            nodes.append(NodeChange(None, a_id, y.kind, y.where(), 0.0, y.ms, "new"))
    nodes.sort(key=lambda n: (-abs(n.after_ms - n.before_ms), n.kind))
    noise = sum(n.spread for n in before.nodes) + sum(n.spread for n in after.nodes)
    return ProfileChange(
        step=after.step if after.step is not None else -1,
        title=after.title,
        against=before.step,
        before_ms=before.total_ms,
        after_ms=after.total_ms,
        word=change_word(before.total_ms, after.total_ms, noise),
        kinds=tuple(kinds),
        nodes=tuple(nodes[:most]),
    )


# --- a pipeline's run ------------------------------------------------------------------


class NodeTimer:
    """Profile the unfrozen module and every step that changed the graph, per node.

    Args:
        pipe: the pipeline (its ``inputs``; None: nothing runs).
        threads: torch's intra-op threads while profiling (``--threads``).
        budget: seconds of recorded forwards per graph (``--time-budget``); 0 runs nothing.
        autograd: forwards under autograd (``--autograd``; the profiler measures then).
        trace_dir: write a Chrome trace of each profiled forward there (``--trace DIR``).

    Call :meth:`observe` with each step as the pipeline yields it (its graphs are still
    held then). Example::

        timer = NodeTimer(pipe)
        for step in pipe.run():
            for profile in timer.observe(step):
                print(profile.title, profile.top_nodes(3))
    """

    def __init__(
        self,
        pipe: Pipeline,
        *,
        threads: int = DEFAULT_THREADS,
        budget: float = DEFAULT_BUDGET,
        autograd: bool = False,
        trace_dir: str | Path | None = None,
    ) -> None:
        self.pipe = pipe
        self.threads = threads
        self.budget = budget
        self.autograd = autograd
        self.trace_dir = Path(trace_dir) if trace_dir is not None else None
        self.profiles: list[NodeProfile] = []
        self.changes: dict[int, ProfileChange] = {}
        self.notes: dict[int, str] = {}
        self._last: tuple[NodeProfile, GraphSnapshot] | None = None
        self._unfrozen_tried = False

    @property
    def active(self) -> bool:
        """True when forwards run (sample inputs and a budget above zero)."""
        return self.pipe.inputs is not None and self.budget > 0

    @property
    def unfrozen(self) -> NodeProfile | None:
        """The unfrozen module's profile, once taken."""
        return next((p for p in self.profiles if p.step is None), None)

    def _trace(self, label: str) -> Path | None:
        if self.trace_dir is None:
            return None
        self.trace_dir.mkdir(parents=True, exist_ok=True)
        return self.trace_dir / f"{label}.trace.json"

    def observe(self, step: Step) -> list[NodeProfile]:
        """Profile a just-yielded step (and the unfrozen module first, once).

        Returns:
            The profiles this call made, in order (empty when nothing ran).
        """
        if not self.active or step.error is not None or not step.changed:
            return []
        made: list[NodeProfile] = []
        if not self._unfrozen_tried:
            self._unfrozen_tried = True
            first = self._profile_unfrozen()
            if first is not None:
                made.append(first)
        if step.name == "inline":
            # The inlined graph is what the unfrozen module runs: profiled as that.
            return made
        graphs = self.pipe.step_graphs(step)
        module = self.pipe.step_module(step)
        snapshot = step.snapshot
        if "forward" not in graphs or module is None or snapshot is None:
            return made
        graph = graphs["forward"]
        # The inline and fold pictures run on the input module (its attributes): the
        # profiler; from torch's clean-up on, a frozen graph Static Runtime may take.
        frozen = not (step.kind == "freeze" and step.name != "cleanup")
        why = "" if frozen else "the graph still runs on the unfrozen module"
        try:
            call = self.pipe.sandboxed_call(graph, module)
            profile = profile_graph(
                graph,
                snapshot,
                call,
                self.pipe.inputs or (),
                step=step.index,
                name=step.name,
                title=step.title,
                threads=self.threads,
                budget=self.budget,
                autograd=self.autograd,
                after_call=self.pipe.restore_state,
                static_runtime=frozen,
                profiler_why=why,
                trace=self._trace(f"{step.index:02d}-{step.name}"),
            )
        except Exception as exc:
            self.pipe.restore_state()
            cause = str(exc) if isinstance(exc, SandboxError) else torch_cause(exc)
            self.notes[step.index] = f"not profiled: {cause}"
            return made
        made.append(self._add(profile, snapshot))
        return made

    def _profile_unfrozen(self) -> NodeProfile | None:
        module = self.pipe.module
        if not module._c._has_method("forward"):
            return None
        graph = module._c._get_method("forward").graph.copy()
        torch._C._jit_pass_inline(graph)
        try:
            call = self.pipe.sandboxed_call(graph, module)
            profile = profile_graph(
                graph,
                snapshot_graph(graph),
                call,
                self.pipe.inputs or (),
                threads=self.threads,
                budget=self.budget,
                autograd=self.autograd,
                after_call=self.pipe.restore_state,
                static_runtime=False,
                profiler_why="the unfrozen module: Static Runtime would freeze it first",
                trace=self._trace("unfrozen"),
            )
        except Exception as exc:
            self.pipe.restore_state()
            cause = str(exc) if isinstance(exc, SandboxError) else torch_cause(exc)
            self.notes[-1] = f"unfrozen module not profiled: {cause}"
            return None
        return self._add(profile, snapshot_graph(graph))

    def _add(self, profile: NodeProfile, snapshot: GraphSnapshot) -> NodeProfile:
        """Map ``profile``'s nodes to the profile before (and the unfrozen module's)."""
        if self._last is not None:
            before, before_snapshot = self._last
            matched = dict(diff_snapshots(before_snapshot, snapshot).matched)
            back = {a: b for b, a in matched.items()}
            unfrozen_of = {
                n.id: (n.unfrozen if before.step is not None else n.id) for n in before.nodes
            }
            nodes = tuple(
                _with(n, back.get(n.id), unfrozen_of.get(back[n.id]) if n.id in back else None)
                for n in profile.nodes
            )
            profile = _replace_nodes(profile, nodes)
            if profile.step is not None:
                self.changes[profile.step] = compare_profiles(before, profile, matched)
        self.profiles.append(profile)
        self._last = (profile, snapshot)
        return profile

    def run(self, steps: Iterator[Step]) -> Iterator[Step]:
        """``steps`` passed through, each observed before it is yielded."""
        for step in steps:
            self.observe(step)
            yield step


def _with(node: NodeTime, previous: int | None, unfrozen: int | None) -> NodeTime:
    return NodeTime(
        node.id,
        node.kind,
        node.scope,
        node.source,
        node.ms,
        node.spread,
        node.share,
        previous,
        unfrozen,
        node.shapes,
    )


def _replace_nodes(profile: NodeProfile, nodes: tuple[NodeTime, ...]) -> NodeProfile:
    import dataclasses

    return dataclasses.replace(profile, nodes=nodes)
