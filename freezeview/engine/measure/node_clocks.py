"""The two clocks of the per-node times: Static Runtime's and torch.profiler's.

:func:`static_runtime_times` runs a frozen graph under Static Runtime's per-node
benchmark, in blocks, and maps its nodes back to the graph's (only when its per-kind
counts and times agree); :func:`profiler_times` records forwards with torch.profiler and
matches the ops each one ran to the graph's nodes in execution order.
:mod:`.node_time` decides which clock measures a graph and turns their figures into
:class:`~.node_time_values.NodeProfile` values.
"""

from __future__ import annotations

import math
import re
import statistics
import time
from collections import Counter
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

import torch

from ..plumbing import atomic_path, capture_stderr_fd, torch_cause
from .latency import warmup_calls

__all__ = [
    "Refused",
    "align_ops",
    "profiler_times",
    "static_runtime_kind",
    "static_runtime_times",
    "top_ops",
    "walk_nodes",
]

# The profiler's own start/stop lines torch writes to standard error (kineto's log):
# captured and dropped, so they never spill over the user's terminal.
_PROFILER_NOISE = re.compile(r".*(USDT:|profiler_start|profiler_stop|STAGE:)")
_MARK = "freezeview forward "
# Static Runtime: at least this many blocks, at most this many (a node's median is over
# them); the profiler: at least this many recorded forwards, at most this many.
_MIN_BLOCKS = 5
_MAX_BLOCKS = 20
_MIN_RUNS = 3
_MAX_RUNS = 30
_MAX_ITERS = 10_000


class Refused(Exception):
    """Static Runtime does not measure this graph (the message says why)."""


def walk_nodes(graph: torch._C.Graph) -> list[tuple[torch._C.Node, int]]:
    """Every node with its nesting depth, in the pre-order walk a snapshot numbers by."""
    out: list[tuple[torch._C.Node, int]] = []

    def visit(block: Any, depth: int) -> None:
        for node in block.nodes():
            out.append((node, depth))
            for sub in node.blocks():
                visit(sub, depth + 1)

    visit(graph.block(), 0)
    return out


def _mode(mode: str) -> AbstractContextManager[Any]:
    if mode == "inference_mode":
        return torch.inference_mode()
    if mode == "no_grad":
        return torch.no_grad()
    return torch.enable_grad()


def _writes_anything(graph: torch._C.Graph) -> bool:
    """True when a node may write one of its inputs (an ``(a!)`` schema, SetAttr)."""
    for node, _ in walk_nodes(graph):
        if node.kind() == "prim::SetAttr":
            return True
        try:
            schema = node.schema()
        except RuntimeError:
            continue
        if "!" in schema:
            return True
    return False


# --- Static Runtime --------------------------------------------------------------------


def static_runtime_times(
    graph: torch._C.Graph, inputs: Sequence[Any], budget: float
) -> tuple[dict[int, list[float]], list[float], dict[str, float], int, int, int]:
    """Per node (by pre-order id) its time per forward in each block, each block's total,
    Static Runtime's own percent per kind (the median over the blocks), warm-up forwards,
    recorded forwards and every forward run. Raises :class:`Refused` with the reason."""
    # Private API, on purpose: Static Runtime is the only tool torch ships that times
    # every node of a TorchScript graph with its own clock (torch 2.4 to 2.14 have it);
    # where it is missing or refuses, the public profiler measures instead.
    to_static = getattr(torch._C, "_jit_to_static_module", None)
    if to_static is None:
        raise Refused("this torch has no Static Runtime")
    if not all(isinstance(x, torch.Tensor) for x in inputs):
        raise Refused("Static Runtime's benchmark takes tensor inputs only")
    private = graph.copy()
    self_input = next(iter(private.inputs()), None)
    if self_input is None or self_input.uses():
        raise Refused("the graph still reads the module (kept attributes)")
    private.eraseInput(0)
    if _writes_anything(private):
        # A forward that writes a folded constant would write the module's own tensor.
        for node, _ in walk_nodes(private):
            if (
                node.kind() == "prim::Constant"
                and node.hasAttribute("value")
                and node.kindOf("value") == "t"
            ):
                node.t_("value", node.t("value").clone())
    try:
        module = to_static(private)
    except Exception as exc:
        raise Refused(f"Static Runtime refused the graph: {torch_cause(exc, 160)}") from exc
    args = list(inputs)
    warm = warmup_calls()
    try:
        with torch.inference_mode():
            probe = module.benchmark_individual_ops(args, {}, warm, 1)
    except Exception as exc:
        raise Refused(f"Static Runtime failed on the inputs: {torch_cause(exc, 160)}") from exc
    calls = 1 + warm + 1
    ours = [(node, i) for i, (node, depth) in enumerate(walk_nodes(graph)) if depth == 0]
    ours = [(n, i) for n, i in ours if n.kind() != "prim::Constant"]
    if not _maps(ours, probe):
        raise Refused("Static Runtime rewrote the graph, its nodes do not map back")
    per_iter = max(float(probe.total_time), 1e-6) / 1000
    iters = max(1, min(_MAX_ITERS, int(budget / _MIN_BLOCKS / per_iter)))
    times: dict[int, list[float]] = {i: [] for _, i in ours}
    totals: list[float] = []
    percents: dict[str, list[float]] = {}
    timed = 0.0
    while True:
        started = time.perf_counter()
        with torch.inference_mode():
            result = module.benchmark_individual_ops(args, {}, 1, iters)
        timed += time.perf_counter() - started
        calls += 2 + iters
        for (_, i), ms in zip(ours, result.time_per_node, strict=True):
            times[i].append(float(ms))
        totals.append(float(result.total_time))
        for k, v in result.percent_per_node_type.items():
            percents.setdefault(str(k), []).append(float(v))
        blocks = len(totals)
        if blocks >= _MAX_BLOCKS or (timed >= budget and blocks >= _MIN_BLOCKS):
            break
        if blocks >= 3 and timed >= 2 * budget:
            break
    # Static Runtime's own figure per kind: the median of its blocks' percentages.
    percent = {k: statistics.median(v) for k, v in percents.items()}
    return times, totals, percent, warm, len(totals) * iters, calls


def static_runtime_kind(kind: str) -> str:
    """The kind Static Runtime reports for a node of ``kind``: it runs in-place ops as
    their out-of-place forms (``aten::relu_`` as ``aten::relu``)."""
    if kind.endswith("_") and not kind.endswith("__"):
        return kind[:-1]
    return kind


def _maps(ours: list[tuple[torch._C.Node, int]], result: Any) -> bool:
    """True when Static Runtime's node ``i`` is our ``i``-th node: as many nodes, and
    for every kind the same count and the same time as the nodes of that kind here."""
    per_node = list(result.time_per_node)
    if len(per_node) != len(ours):
        return False
    counts = Counter(static_runtime_kind(n.kind()) for n, _ in ours)
    theirs = {str(k): int(v) for k, v in result.instances_per_node_type.items()}
    if dict(counts) != theirs:
        return False
    sums: dict[str, float] = {}
    for (node, _), ms in zip(ours, per_node, strict=True):
        kind = static_runtime_kind(node.kind())
        sums[kind] = sums.get(kind, 0.0) + float(ms)
    for kind, ms in result.time_per_node_type.items():
        if not math.isclose(sums.get(str(kind), 0.0), float(ms), rel_tol=1e-4, abs_tol=1e-7):
            return False
    return True


# --- torch.profiler --------------------------------------------------------------------


# One recorded op: name, start and end (ns), input shapes.
_Row = tuple[str, int, int, tuple[tuple[int, ...], ...]]
# What a profiler run gives (see _profiler).
_Profiled = tuple[
    dict[int, list[float]],
    dict[int, tuple[tuple[int, ...], ...]],
    list[float],
    str,
    int,
    int,
    int,
    float,
]


def _shapes(raw: Any) -> tuple[tuple[int, ...], ...]:
    return tuple(tuple(int(d) for d in s) for s in (raw or []) if isinstance(s, list))


def _rows(prof: Any) -> list[_Row]:
    """Every recorded event of the profiling thread, by start (outer before inner).

    Read from the profiler's raw results: building torch's own event tree
    (``prof.events()``) costs more per event than the forwards cost, and only the
    ops' names, times and shapes are needed here (nesting follows from the times).
    """
    raw = getattr(getattr(prof, "profiler", None), "kineto_results", None)
    rows: list[_Row] = []
    if raw is not None and hasattr(raw, "events"):
        try:
            for e in raw.events():
                if e.device_type() != torch.autograd.DeviceType.CPU:
                    continue
                start = int(e.start_ns())
                rows.append((e.name(), start, start + int(e.duration_ns()), _shapes(e.shapes())))
        except AttributeError:
            rows = []
    if not rows:  # an older layout of the raw results: torch's event objects
        for f in prof.events():
            lo, hi = int(f.time_range.start * 1000), int(f.time_range.end * 1000)
            rows.append((f.name, lo, hi, _shapes(f.input_shapes)))
    rows.sort(key=lambda r: (r[1], -r[2]))
    return rows


def _inside(rows: list[_Row], lo: int, hi: int) -> list[_Row]:
    """The events directly inside ``[lo, hi]``: not nested in another one inside it."""
    out: list[_Row] = []
    end = lo - 1
    for row in rows:
        if row[1] < lo or row[2] > hi or (row[1] == lo and row[2] == hi):
            continue
        if row[1] >= end or not out:
            out.append(row)
            end = row[2]
    return out


def top_ops(rows: list[_Row], marker: _Row, kinds: set[str]) -> list[_Row]:
    """The ops one forward ran at its top level (the function's event stepped through)."""
    inner = [r for r in rows if marker[1] <= r[1] and r[2] <= marker[2] and r is not marker]
    children = _inside(inner, marker[1], marker[2])
    while len(children) == 1 and children[0][0] not in kinds:
        only = children[0]
        children = _inside([r for r in inner if r is not only], only[1], only[2])
    return children


def align_ops(events: Sequence[_Row], nodes: Sequence[tuple[int, str]]) -> list[tuple[int, _Row]]:
    """Each recorded op matched to the next node of its kind in execution order.

    The profiler records operators, not interpreter instructions (constants, lists,
    ``prim::If``): those nodes are stepped over; an op with no node of its kind (an op
    the executor added) is left out.
    """
    out: list[tuple[int, _Row]] = []
    cursor = 0
    present = {kind for _, kind in nodes}
    for event in events:
        if event[0] not in present:
            continue
        j = cursor
        while j < len(nodes) and nodes[j][1] != event[0]:
            j += 1
        if j == len(nodes):
            continue
        out.append((nodes[j][0], event))
        cursor = j + 1
    return out


def profiler_times(
    call: Callable[[], Any],
    graph: torch._C.Graph,
    budget: float,
    autograd: bool,
    after_call: Callable[[], None] | None,
    trace: Path | None,
    runs: int | None = None,
) -> tuple[
    dict[int, list[float]],
    dict[int, tuple[tuple[int, ...], ...]],
    list[float],
    str,
    int,
    int,
    int,
    float,
]:
    """Per node its time in each recorded forward, its input shapes, each forward's span,
    the mode, warm-up forwards, recorded forwards, every forward run, and the seconds
    the profiler's start took."""
    mode = "autograd" if autograd else "inference_mode"

    def once() -> None:
        try:
            with _mode(mode):
                call()
        finally:
            if after_call is not None:
                after_call()

    try:
        once()
    except Exception:
        if mode != "inference_mode":
            raise
        mode = "no_grad"
        once()
    warm = warmup_calls()
    for _ in range(warm - 1):
        once()
    started = time.perf_counter()
    once()
    one = max(time.perf_counter() - started, 1e-6)
    calls = warm + 1
    if runs is None:
        runs = max(_MIN_RUNS, min(_MAX_RUNS, int(budget / one)))
    from torch.profiler import ProfilerActivity, profile, record_function

    # No ``with_modules``: on torch 2.13 it crashes the process (a segmentation fault,
    # nothing to catch) profiling a frozen ResNet-50's graph run as a function. Each
    # node's module path comes from the graph itself (its scope), which the mapping of
    # ops to nodes gives anyway.
    prof = profile(activities=[ProfilerActivity.CPU], record_shapes=True)
    with capture_stderr_fd(_PROFILER_NOISE):
        begun = time.perf_counter()
        prof.start()  # the first start in a process sets the profiler up (a one-off)
        startup = time.perf_counter() - begun
        try:
            for k in range(runs):
                try:
                    with record_function(f"{_MARK}{k}"), _mode(mode):
                        call()
                finally:
                    if after_call is not None:
                        after_call()
        finally:
            prof.stop()
    calls += runs
    if trace is not None:
        with atomic_path(trace) as tmp:
            prof.export_chrome_trace(str(tmp))
    nodes = [(i, node.kind()) for i, (node, _) in enumerate(walk_nodes(graph))]
    kinds = {kind for _, kind in nodes}
    rows = _rows(prof)
    markers = [r for r in rows if r[0].startswith(_MARK)]
    times: dict[int, list[float]] = {}
    shapes: dict[int, tuple[tuple[int, ...], ...]] = {}
    spans: list[float] = []
    for number, marker in enumerate(markers):
        spans.append((marker[2] - marker[1]) / 1e6)
        seen: dict[int, float] = {}
        for node_id, event in align_ops(top_ops(rows, marker, kinds), nodes):
            seen[node_id] = seen.get(node_id, 0.0) + (event[2] - event[1]) / 1e6
            shapes.setdefault(node_id, event[3])
        for node_id in set(times) | set(seen):
            # A node a forward did not run (a branch not taken) took no time in it.
            times.setdefault(node_id, [0.0] * number).append(seen.get(node_id, 0.0))
    return times, shapes, spans, mode, warm, runs, calls, startup
