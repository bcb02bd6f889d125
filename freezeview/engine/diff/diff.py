"""Compare two graph snapshots: which nodes match, which were added, removed or changed.

Freezing and the folding passes rename values and renumber everything, so freezeview
matches nodes the way a reviewer would, by what they are and where they sit (the
algorithm is :mod:`~freezeview.engine.diff.diff_match`'s; what it finds, a
:class:`~freezeview.engine.diff.diff_values.GraphDiff`, is in
:mod:`~freezeview.engine.diff.diff_values`). This module is the way in: it keeps the
snapshots prepared for matching and the diffs found recently, and takes in diffs a
forked helper found (:func:`adopt_diff`).
"""

from __future__ import annotations

import threading
from collections import OrderedDict

from ..graph import GraphSnapshot
from ..plumbing import renewed_in_children
from .diff_match import DiffSide, graph_diff, match_snapshots
from .diff_values import DiffFacts, GraphDiff, NodeInfo, diff_facts
from .text_diff import forget_printouts, line_opcodes, unified_ir_diff, unified_text_diff

__all__ = [
    "DiffFacts",
    "GraphDiff",
    "NodeInfo",
    "adopt_diff",
    "diff_facts",
    "diff_snapshots",
    "forget_recent",
    "index_nodes",
    "line_opcodes",
    "unified_ir_diff",
    "unified_text_diff",
]

# Snapshots are immutable, so what is computed from one can be reused while it lives.
# An export diffs every step against the next and draws each snapshot several times;
# keeping the last few prepared snapshots (with a reference, so ids stay unique)
# avoids redoing that work for 10k-node graphs. The app reads them from worker
# threads, hence the lock.
_CACHE_SIZE = 16
_side_cache: OrderedDict[int, tuple[GraphSnapshot, DiffSide]] = OrderedDict()
_cache_lock = renewed_in_children(threading.Lock())  # the forked helper diffs too


def forget_recent() -> None:
    """Drop the snapshots kept for reuse (prepared sides, recent diffs, printouts).

    For a caller that knows none of them will be asked for again: the app, when a
    re-run replaces every step (a big model's prepared snapshots hold hundreds of MB).
    """
    with _cache_lock:
        _side_cache.clear()
        _diff_cache.clear()
    forget_printouts()


def _side_for(snapshot: GraphSnapshot) -> DiffSide:
    with _cache_lock:
        hit = _side_cache.get(id(snapshot))
        if hit is not None and hit[0] is snapshot:
            _side_cache.move_to_end(id(snapshot))
            return hit[1]
    side = DiffSide(snapshot)
    with _cache_lock:
        _side_cache[id(snapshot)] = (snapshot, side)
        while len(_side_cache) > _CACHE_SIZE:
            _side_cache.popitem(last=False)
    return side


# Diffs of the same two snapshots are asked for more than once in an export (its
# pictures, then the pipeline's step notes), so recent results are kept too.
_DIFF_CACHE_SIZE = 32
_diff_cache: OrderedDict[tuple[int, int], tuple[GraphSnapshot, GraphSnapshot, GraphDiff]] = (
    OrderedDict()
)


def index_nodes(snapshot: GraphSnapshot) -> dict[int, NodeInfo]:
    """Every node of ``snapshot`` by id, with its nesting and attribute path.

    Args:
        snapshot: the graph to index.

    Returns:
        Node id -> :class:`NodeInfo`, in walk order (shared; do not modify).
    """
    return _side_for(snapshot).info


def diff_snapshots(before: GraphSnapshot, after: GraphSnapshot) -> GraphDiff:
    """Match the nodes of two snapshots of the same method and classify the differences.

    Args:
        before: the graph before a step (or before freezing).
        after: the graph after it.

    Returns:
        A :class:`GraphDiff`, shared with later calls for the same two snapshots (do not
        modify it). Diffing a snapshot against itself (or against a snapshot of an
        identical graph) reports nothing added, removed or changed.

    Example::

        d = diff_snapshots(snapshot_graph(g1), snapshot_graph(g2))
        print(d.summary())  # +0 added, -1 removed, ~1 changed (aten::batch_norm -1)
    """
    key = (id(before), id(after))
    with _cache_lock:
        hit = _diff_cache.get(key)
        if hit is not None and hit[0] is before and hit[1] is after:
            _diff_cache.move_to_end(key)
            return hit[2]
    result = match_snapshots(_side_for(before), _side_for(after))
    _remember(before, after, result)
    return result


def _remember(before: GraphSnapshot, after: GraphSnapshot, result: GraphDiff) -> None:
    with _cache_lock:
        _diff_cache[(id(before), id(after))] = (before, after, result)
        while len(_diff_cache) > _DIFF_CACHE_SIZE:
            _diff_cache.popitem(last=False)


def adopt_diff(before: GraphSnapshot, after: GraphSnapshot, facts: DiffFacts) -> GraphDiff:
    """The :class:`GraphDiff` of ``before`` and ``after`` from facts found elsewhere.

    A forked copy of this process diffed the same two snapshots (node ids are the
    snapshots' own, so they mean the same here). The result is remembered as
    :func:`diff_snapshots`'s own would be, so later calls for the pair get it.
    """
    result = graph_diff(_side_for(before), _side_for(after), facts)
    _remember(before, after, result)
    return result
