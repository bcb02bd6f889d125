"""Tests for engine/draw/folding/: the shortcuts that keep building a drawing fast give
what walking op by op gives.

build.py places whole scopes at a time, counts edges by scope pair, walks each snapshot
backwards once and finds the readers of removed ops from the drawn edges (see
``PreparedSide`` in prepared.py and ``_DrawingBuilder``). Each test here computes the
same thing the plain way, one node or one edge at a time, on graphs with blocks
(If/Loop, RaiseException branches), ModuleLists and diffs, and compares.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from functools import cache, lru_cache

import pytest
import torch
from render_models import KeepsBuffer, Stacked, scripted, transformer_encoder

from freezeview.engine.diff.diff import diff_snapshots, index_nodes
from freezeview.engine.diff.diff_values import GraphDiff
from freezeview.engine.draw.folding.build import build_drawing
from freezeview.engine.draw.folding.drawing import Drawing
from freezeview.engine.draw.folding.module_boxes import _top_kinds
from freezeview.engine.draw.folding.prepared import (
    PreparedSide,
    ScopeOps,
    drawn_scope_counts,
    drawn_scopes,
    levels,
    prepare_snapshot,
    readers_of,
)
from freezeview.engine.draw.folding.scopes import module_paths
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph

Edge = tuple[int, int | str, str, str]


@lru_cache(maxsize=1)
def _encoder() -> torch.jit.ScriptModule:
    # Two layers keep the test quick and still hold the MultiheadAttention checks that
    # make most of a transformer's nodes (If blocks ending in RaiseException).
    return transformer_encoder(layers=2, d_model=16, heads=2)


def _inlined(module: torch.jit.ScriptModule) -> GraphSnapshot:
    graph = module.graph.copy()
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph)


@cache
def _case(name: str) -> tuple[GraphDiff, frozenset[str]]:
    """Inlined graph -> frozen graph of a model, and the model's module paths."""
    makers: dict[str, Callable[[], torch.jit.ScriptModule]] = {
        "encoder": _encoder,
        "keeps": lambda: scripted(KeepsBuffer()),
        "stacked": lambda: scripted(Stacked()),
    }
    module = makers[name]()
    before = _inlined(module)
    after = snapshot_graph(torch.jit.freeze(module).forward.graph)
    return diff_snapshots(before, after), module_paths(module)


CASES = ["encoder", "keeps", "stacked"]


def _edges_reference(side: PreparedSide) -> list[Edge]:
    """Drawn edges, walking forwards with a set of every value read."""
    info, folder, snapshot = side.info, side.folder, side.snapshot
    inputs = {v.name: f"i{k}" for k, v in enumerate(snapshot.inputs)}
    owner_of: dict[str, int] = {}
    used = set(snapshot.outputs)
    for node_id, i in info.items():
        used.update(i.node.inputs)
        for block in i.node.blocks:
            used.update(block.outputs)
            owner_of.update((v.name, node_id) for v in block.inputs)

    def tail_of(value: str) -> int | str | None:
        pid = folder.producer.get(value)
        if pid is not None:
            return None if pid in folder.folded else pid
        return inputs.get(value, owner_of.get(value))

    out: list[Edge] = []
    for node_id, i in info.items():
        if node_id in folder.folded:
            continue
        for value in i.node.inputs:
            if (tail := tail_of(value)) is not None:
                out.append((node_id, tail, value, ""))
        for block in i.node.blocks:
            for value in block.outputs:
                if (tail := tail_of(value)) is not None:
                    out.append((node_id, tail, value, "dashed"))
        if i.parent is not None and not any(o.name in used for o in i.node.outputs):
            out.append((i.parent, node_id, "", "dotted"))
    return out


def _sides(name: str) -> list[PreparedSide]:
    d, modules = _case(name)
    return [prepare_snapshot(s, c, modules) for s in (d.before, d.after) for c in ("fold", "nodes")]


@pytest.mark.parametrize("name", CASES)
def test_backward_walk_gives_the_forward_walks_edges(name: str) -> None:
    for side in _sides(name):
        expected = _edges_reference(side)
        assert side.edges == expected
        # Every edge in exactly one group, in order, under its scopes.
        seen: list[int] = []
        for (tail_input, tail_scope, head_scope), indices in side.edge_groups.items():
            assert indices == sorted(indices)
            for k in indices:
                head, tail, _, _ = expected[k]
                assert side.scopes[head] == head_scope
                if isinstance(tail, str):
                    assert (tail_input, tail_scope) == (tail, "")
                else:
                    assert (tail_input, tail_scope) == ("", side.scopes[tail])
            seen += indices
        assert sorted(seen) == list(range(len(expected)))
    assert any(style == "dotted" for _, _, _, style in _sides("encoder")[0].edges)


@pytest.mark.parametrize("name", CASES)
def test_ops_by_scope_lists_every_drawn_op_once_in_walk_order(name: str) -> None:
    for side in _sides(name):
        drawn = [i for i in side.info if i not in side.folder.folded]
        by_scope = side.ops_by_scope
        assert sorted(i for ops in by_scope.values() for i in ops.ids) == drawn
        assert list(by_scope) == list(dict.fromkeys(side.scopes[i] for i in drawn))
        for scope, ops in by_scope.items():
            assert ops.ids == sorted(ops.ids)
            assert {side.scopes[i] for i in ops.ids} == {scope}
            kinds = [side.info[i].node.kind for i in ops.ids]
            ranked = Counter(k for k in kinds if k not in ("prim::GetAttr", "prim::Constant"))
            assert {k: n for k, (n, _) in ops.kinds.items()} == dict(ranked)
            for kind, (_, first) in ops.kinds.items():
                assert first == ops.ids[kinds.index(kind)]


@pytest.mark.parametrize("name", CASES)
def test_readers_from_edges_are_the_snapshots_consumers(name: str) -> None:
    for side in _sides(name):
        drawn = {i for i in side.info if i not in side.folder.folded}
        readers = readers_of(side.edges, drawn)
        consumers = side.snapshot.consumers()
        for node_id in drawn:
            for out in side.info[node_id].node.outputs:
                expected = [n.id for n in consumers.get(out.name, [])]
                assert readers.get(out.name, []) == expected


def test_top_kinds_ranks_as_most_common_over_the_ops_in_walk_order() -> None:
    # Ties (conv x2, relu x2, add x2) broken by first occurrence across two scopes.
    walk = ["aten::relu", "aten::conv2d", "aten::add", "aten::relu", "aten::add", "aten::conv2d"]
    a, b = ScopeOps(), ScopeOps()
    for position, kind in enumerate(walk):
        ops = a if position % 2 else b
        seen = ops.kinds.setdefault(kind, [0, position])
        seen[0] += 1
    expected = Counter(k.removeprefix("aten::") for k in walk).most_common(3)
    assert _top_kinds([a, b]) == expected
    assert _top_kinds([b, a]) == expected


def _edges_by_walk(view: Drawing, side: PreparedSide) -> list[tuple[str, str, str, int]]:
    """The view's edges as walking each drawn edge of the snapshot one at a time gives
    them: (tail, head, first value, count), in order of first occurrence."""

    def key(tail: int | str) -> str:
        if isinstance(tail, str):
            return tail if tail in view.nodes else ""  # `self` is not drawn
        holder = view.holder(tail)
        assert holder is not None
        return holder.key

    found: dict[tuple[str, str], tuple[str, int]] = {}
    walked = [(tail, head_id, value) for head_id, tail, value, _ in side.edges]
    for tail, head_id, value in walked + [(t, "out", v) for t, v in side.output_tails]:
        pair = (key(tail), "out" if head_id == "out" else key(head_id))
        if pair[0] and pair[0] != pair[1]:
            first, count = found.get(pair, (value, 0))
            found[pair] = (first, count + 1)
    return [(t, h, v, n) for (t, h), (v, n) in found.items()]


@pytest.mark.parametrize(
    "name", [pytest.param(c, marks=pytest.mark.slow) if c == "encoder" else c for c in CASES]
)
def test_edges_counted_by_scope_pair_are_the_edges_walked_one_by_one(name: str) -> None:
    d, modules = _case(name)
    for snapshot in (d.before, d.after):
        side = prepare_snapshot(snapshot, "fold", modules)
        for level in levels(snapshot, modules=modules):
            view = build_drawing(snapshot, level=level, modules=modules)
            got = [(e.tail, e.head, e.tooltip.split(" ")[0][1:], e.count) for e in view.edges]
            assert got == _edges_by_walk(view, side), level


@pytest.mark.parametrize("name", CASES)
def test_module_boxes_count_what_their_ops_say(name: str) -> None:
    d, modules = _case(name)
    reasons = {"count": "written in forward"}
    after_info = index_nodes(d.after)
    for level in levels(d.after, modules=modules)[:-1]:
        view = build_drawing(d.after, level=level, diff=d, reasons=reasons, modules=modules)
        for box in (v for v in view.nodes.values() if v.role == "scope"):
            assert box.node_ids == sorted(box.node_ids)
            assert box.ghost_ids == sorted(box.ghost_ids)
            statuses = Counter(d.status(i) for i in box.node_ids)
            statuses["removed"] += len(box.ghost_ids)
            assert box.counts["ops"] == len(box.node_ids)
            for status in ("added", "changed", "removed"):
                assert box.counts[status] == statuses[status], (box.key, status)
            kinds = Counter(
                after_info[i].node.kind.removeprefix("aten::")
                for i in box.node_ids
                if after_info[i].node.kind not in ("prim::GetAttr", "prim::Constant")
            )
            top = ", ".join(f"{k} x{n}" for k, n in kinds.most_common(3))
            assert re.search(rf"\b\d+ ops? \({re.escape(top)}\)", box.tooltip), box.tooltip
        side_by_side = build_drawing(d.before, level=level, diff=d, side="before", modules=modules)
        for box in (v for v in side_by_side.nodes.values() if v.role == "scope"):
            removed = sum(i in d.removed for i in box.node_ids)
            changed = sum(d.matched.get(i) in d.changed for i in box.node_ids if i not in d.removed)
            assert (box.counts["removed"], box.counts["changed"]) == (removed, changed)


@pytest.mark.parametrize("name", CASES)
def test_scope_counts_are_the_drawn_scopes_counted(name: str) -> None:
    d, modules = _case(name)
    for snapshot, ids in ((d.after, None), (d.before, None), (d.before, d.removed)):
        for m in (modules, None):
            counts = drawn_scope_counts(snapshot, ids=ids, modules=m)
            assert counts == Counter(drawn_scopes(snapshot, ids=ids, modules=m))
