"""A sparse reading of a printout (``engine/graph/snapshot_sparse.py``) says what the
snapshot says: the same nodes, use counts and why-not sentences, on the whole corpus."""

from __future__ import annotations

import collections
from dataclasses import replace

import pytest
import torch
from corpus import CASES, Case

from freezeview.engine.freeze.lazy_graph import LazyGraph
from freezeview.engine.freeze.pass_diagnosis import SCOPED_KINDS, Reading
from freezeview.engine.freeze.passes import REGISTRY
from freezeview.engine.graph import GraphSnapshot, SparseReading
from freezeview.engine.graph.snapshot import partial_snapshot, snapshot_graph

FREEZABLE = [c for c in CASES if c.expect_error is None]


def _same_as_the_snapshot(graph: torch._C.Graph, label: str) -> None:
    full = snapshot_graph(graph)
    sparse = SparseReading(graph, full.text, SCOPED_KINDS)
    for info in REGISTRY.values():
        if info.diagnose is not None and info.available:
            reading = Reading(full.kinds(), lambda: sparse)
            assert info.why_not(reading) == info.why_not(full), (label, info.id)
    part = partial_snapshot(graph, text=full.text, scope_kinds=SCOPED_KINDS)
    uses = collections.Counter(name for n in full.walk() for name in n.inputs)
    uses.update(name for n in full.walk() for b in n.blocks for name in b.outputs)
    uses.update(full.block.outputs)
    for node in part.walk():
        assert sparse.node(node.id) == replace(node, blocks=()), label
        for out in node.output_names:
            assert sparse.use_count(out) == uses[out], (label, node.line, out)
            assert sparse.value(out) == full.value(out), (label, out)
    for value in full.inputs:
        assert sparse.value(value.name) == value and sparse.producer(value.name) is None


@pytest.mark.slow
@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_a_sparse_reading_is_the_snapshot(case: Case) -> None:
    """Every node, use count, value and why-not sentence of the frozen and of the
    inlined graph, read sparsely, is the snapshot's."""
    module = case.build()
    frozen = torch._C._freeze_module(module._c, list(case.preserved_attrs), True)
    for method in frozen._method_names():
        _same_as_the_snapshot(frozen._get_method(method).graph, f"{case.name} {method}")
        inlined = module._c._get_method(method).graph.copy()
        torch._C._jit_pass_inline(inlined)
        _same_as_the_snapshot(inlined, f"{case.name} {method} inlined")


def test_a_printout_it_does_not_know_gets_a_partial_snapshot() -> None:
    """A line that is neither a node, a block nor a block's return (a constant printed
    over several lines) is refused; the step's picture then reads a partial snapshot."""
    graph = torch._C.parse_ir(
        """graph(%x : Tensor):
  %y : Tensor = aten::relu(%x)
  return (%y)"""
    )
    text = str(graph)
    odd = text.replace("aten::relu(%x)", "aten::relu(%x)\n      continued")
    with pytest.raises(ValueError):
        SparseReading(graph, odd, SCOPED_KINDS)
    assert isinstance(LazyGraph("forward", graph, text=odd).reading(SCOPED_KINDS), GraphSnapshot)
    assert isinstance(LazyGraph("forward", graph).reading(SCOPED_KINDS), SparseReading)
