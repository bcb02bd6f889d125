"""Facts the app reads off snapshots, checked against torch's own graph."""

from __future__ import annotations

import torch
from ui.models import Small

from freezeview.engine.graph.facts import attribute_node_ids, line_index, node_facts, schema_effects
from freezeview.engine.graph.snapshot import snapshot_graph


def _inlined() -> torch._C.Graph:
    module = torch.jit.script(Small().eval())
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def test_every_node_gets_its_printed_line() -> None:
    for graph in (_inlined(), torch.jit.freeze(torch.jit.script(Small().eval())).graph):
        snap = snapshot_graph(graph)
        _by_line, by_node = line_index(snap)
        assert len(by_node) == snap.node_count
        lines = snap.text.splitlines()
        for node in snap.walk():
            assert node.kind in lines[by_node[node.id]]


def test_schema_effects_match_torch_alias_info() -> None:
    written, aliases = schema_effects(
        "aten::add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)"
    )
    assert written == (0,) and aliases == ((0, 0),)
    assert schema_effects("aten::relu(Tensor self) -> Tensor") == ((), ())


def test_attribute_lines_and_node_facts() -> None:
    graph = _inlined()
    snap = snapshot_graph(graph)
    ids = attribute_node_ids(snap, "calls")
    kinds = sorted(snap.node(i).kind for i in ids)
    # torch agrees on who writes it: alias analysis (frozen semantics) finds the writer.
    db = graph.alias_db(isFrozen=True)
    getattr_value = next(
        n.output() for n in graph.nodes() if n.kind() == "prim::GetAttr" and n.s("name") == "calls"
    )
    assert db.has_writers(getattr_value)
    assert kinds == ["aten::add_", "prim::GetAttr"]
    add = next(snap.node(i) for i in ids if snap.node(i).kind == "aten::add_")
    facts = node_facts(snap, add.id)
    assert facts.writes == (add.inputs[0],)
    assert facts.aliases == ((add.outputs[0].name, add.inputs[0]),)
    get = next(snap.node(i) for i in ids if snap.node(i).kind == "prim::GetAttr")
    get_facts = node_facts(snap, get.id)
    assert get_facts.attribute == "calls"
    assert any("aten::add_" in line for _, line in get_facts.writers)
