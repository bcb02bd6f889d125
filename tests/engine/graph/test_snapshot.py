"""Snapshots: immutable, tensor-free pictures of graphs."""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pytest
import torch
from models.small import Branchy, Counter, scripted

from freezeview.engine.graph.snapshot import (
    module_scope,
    parse_source_range,
    snapshot_graph,
)
from freezeview.engine.graph.snapshot_walk import summarize_value


def _inlined(module: torch.jit.ScriptModule) -> torch._C.Graph:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def test_snapshot_counts_every_node_including_nested_blocks() -> None:
    graph = _inlined(scripted(Branchy))
    snap = snapshot_graph(graph)
    expected = len(graph.findAllNodes("prim::If", True))
    assert snap.kinds()["prim::If"] == expected > 0
    walked = list(snap.walk())
    assert [n.id for n in walked] == list(range(len(walked))) == list(range(snap.node_count))
    total = sum(1 for _ in torch_nodes(graph.block()))
    assert snap.node_count == total


def test_walk_order_is_the_blocks_pre_order_and_survives_pickling() -> None:
    """The parser's node table and a lazily made one both give the blocks' pre-order."""
    from freezeview.engine.graph.snapshot_values import GraphSnapshot, _walk_block

    snap = snapshot_graph(_inlined(scripted(Branchy)))
    by_blocks = tuple(_walk_block(snap.block))
    assert any(n.blocks for n in by_blocks)
    assert snap.nodes_in_order() == by_blocks
    assert all(a is b for a, b in zip(snap.nodes_in_order(), by_blocks, strict=True))
    assert snap.node(snap.node_count - 1) is by_blocks[-1]
    lazy = GraphSnapshot(snap.method, snap.block, snap.text, snap.node_count)
    assert lazy == snap and list(lazy.walk()) == list(by_blocks)
    copy = pickle.loads(pickle.dumps(snap))
    assert [n.id for n in copy.walk()] == list(range(snap.node_count))
    assert copy.node(3) == snap.node(3)
    with pytest.raises(KeyError):
        snap.node(snap.node_count)


def torch_nodes(block: torch._C.Block):  # type: ignore[no-untyped-def]
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from torch_nodes(sub)


def test_snapshot_survives_later_graph_changes() -> None:
    module = scripted(Counter)
    graph = _inlined(module)
    snap = snapshot_graph(graph)
    text = snap.text
    torch._C._jit_pass_dce(graph)
    torch._C._jit_pass_constant_propagation(graph)
    graph.insertConstant(5)
    assert snap.text == text
    assert "prim::GetAttr" in snap.kinds()


def test_snapshot_holds_no_tensors_and_is_immutable() -> None:
    frozen = torch.jit.freeze(scripted(Counter))
    snap = snapshot_graph(frozen.graph)
    tensors = [n.constant for n in snap.walk() if n.constant and n.constant.is_tensor]
    assert tensors, "freezing should have produced tensor constants"
    weight = next(c for c in tensors if c.attribute == "weight")
    assert weight.shape == (2,) and weight.dtype == "float32"
    # A snapshot pickles to a few kilobytes whatever the weights: no storage inside.
    blob = pickle.dumps(snap)
    assert b"storage" not in blob.lower()
    node = next(iter(snap.walk()))
    with pytest.raises(dataclasses.FrozenInstanceError):
        node.kind = "x"  # type: ignore[misc]


def test_snapshot_records_scope_source_and_schema() -> None:
    snap = snapshot_graph(_inlined(scripted(Branchy)))
    linear = next(n for n in snap.walk() if n.kind == "aten::linear")
    assert linear.scope == "lin"
    assert linear.source is not None and linear.source.file.endswith("linear.py")
    assert linear.schema is not None and linear.schema.startswith("aten::linear")
    append = next(n for n in snap.walk() if n.kind == "aten::append")
    assert append.source is not None and append.source.file.endswith("small.py")
    lines = Path(append.source.file).read_text().splitlines()
    assert "append" in lines[append.source.line - 1]


def test_producers_and_consumers_agree() -> None:
    snap = snapshot_graph(_inlined(scripted(Counter)))
    producers = snap.producers()
    for name, users in snap.consumers().items():
        for user in users:
            assert name in user.inputs
        if name in producers:
            assert producers[name].id < min(u.id for u in users) or name in {
                v.name for v in snap.inputs
            }


def test_fast_path_agrees_with_the_per_node_path() -> None:
    """The IR-printout parser gives what asking torch node by node gives."""
    from freezeview.engine.graph import snapshot as snap_mod
    from freezeview.engine.graph.snapshot_values import _walk_block

    for module in (scripted(Branchy), scripted(Counter), torch.jit.freeze(scripted(Counter))):
        graph = module.forward.graph.copy()
        torch._C._jit_pass_inline(graph)
        fast = snap_mod._fast_snapshot(graph, "forward")
        builder = snap_mod.SnapshotBuilder()
        slow_block = builder.block(graph.block(), list(graph.inputs()))
        slow = list(_walk_block(slow_block))
        assert fast.node_count == len(slow)
        for a, b in zip(fast.walk(), slow, strict=True):
            assert (a.kind, a.inputs, a.output_names, a.scope) == (
                b.kind,
                b.inputs,
                b.output_names,
                b.scope,
            )
            assert len(a.blocks) == len(b.blocks)
            if a.constant is not None:
                assert b.constant is not None
                assert (a.constant.kind, a.constant.shape, a.constant.attribute) == (
                    b.constant.kind,
                    b.constant.shape,
                    b.constant.attribute,
                )
            if b.source is not None:
                assert a.source is not None and a.source.line == b.source.line


def test_parse_source_range_and_scope() -> None:
    text = '  File "m.py", line 7\n    def f(x):\n        x.add_(1)\n        ~~~~~~ <--- HERE\n'
    loc = parse_source_range(text)
    assert loc is not None and (loc.file, loc.line, loc.text) == ("m.py", 7, "x.add_(1)")
    assert loc.short() == "m.py:7"
    assert parse_source_range("") is None
    assert module_scope("layer1(Sequential).0(Block).bn1(BatchNorm2d).SELF(BatchNorm2d)") == (
        "layer1.0.bn1"
    )
    assert module_scope("bn(BatchNorm2d).UNKNOWN_INSTANCE(UNKNOWN_TYPE)") == "bn"
    assert module_scope("") == ""


@pytest.mark.parametrize(
    ("value", "kind", "text"),
    [
        (torch.zeros(64, 3, 7, 7), "tensor", "Float(64, 3, 7, 7)"),
        (torch.tensor(2.5), "tensor", "Float(2.5)"),
        (None, "none", "None"),
        (True, "bool", "True"),
        (3, "int", "3"),
        ([1, 1], "list", "[1, 1]"),
        (list(range(10)), "list", "[0, 1, 2, 3, 4, 5, ...]"),
        ("x" * 50, "str", repr("x" * 37 + "...")),
    ],
)
def test_summarize_value(value: object, kind: str, text: str) -> None:
    summary = summarize_value(value)
    assert (summary.kind, summary.text) == (kind, text)


class _CountedBlock:
    """A torch block whose ``nodes()`` calls are counted (the rest passes through)."""

    def __init__(self, block: torch._C.Block, calls: list[int]) -> None:
        self.block, self.calls = block, calls

    def nodes(self):  # type: ignore[no-untyped-def]
        self.calls[0] += 1
        return (_CountedNode(n, self.calls) for n in self.block.nodes())

    def returnNode(self) -> _CountedNode:
        return _CountedNode(self.block.returnNode(), self.calls)


class _CountedNode:
    def __init__(self, node: torch._C.Node, calls: list[int]) -> None:
        self.node, self.calls = node, calls

    def blocks(self):  # type: ignore[no-untyped-def]
        return (_CountedBlock(b, self.calls) for b in self.node.blocks())

    def prev(self) -> _CountedNode:
        return _CountedNode(self.node.prev(), self.calls)

    def __getattr__(self, name: str) -> object:
        return getattr(self.node, name)


def test_the_walk_lists_nested_blocks_without_asking_torch_for_their_node_lists() -> None:
    """``Block.nodes()`` costs more than a small block's nodes: a transformer's inlined
    graph has tens of thousands of shape-check blocks. Only the graph's own block is
    listed that way; the walk still sees every node in pre-order."""
    from freezeview.engine.graph.snapshot_walk import Walked, block_nodes

    graph = _inlined(scripted(Branchy))
    nested = [b for n in torch_nodes(graph.block()) for b in n.blocks()]
    assert len(nested) >= 3  # the if's two branches and the loop's body
    for block in nested:
        assert [n.kind() for n in block_nodes(block)] == [n.kind() for n in block.nodes()]
    calls = [0]

    class _Graph:
        def block(self) -> _CountedBlock:
            return _CountedBlock(graph.block(), calls)

    counted = Walked(_Graph())  # type: ignore[arg-type]
    assert calls == [1]
    plain = Walked(graph)
    assert counted.kinds == plain.kinds == [n.kind() for n in torch_nodes(graph.block())]
    assert counted.scopes == plain.scopes and counted.schemas == plain.schemas
