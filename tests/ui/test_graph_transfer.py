"""A step's graph crosses from the engine process to the screen in slices
(``freezeview/ui/graph_transfer.py``): the same graph, unpickled a slice at a time."""

from __future__ import annotations

import pickle

import pytest
import torch

from freezeview.engine.graph import snapshot_graph
from freezeview.ui import graph_transfer


@torch.jit.script
def _looped(x: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        x = x.relu() + 1 if bool(x.sum() > 0) else x * 2
    return x


def test_the_graph_comes_back_whole_a_slice_at_a_time(monkeypatch: pytest.MonkeyPatch) -> None:
    graph = snapshot_graph(_looped.graph, "forward")
    slices = graph_transfer.dump_in_slices(graph, nodes=3)
    assert len(slices) == -(-graph.node_count // 3) + 1  # the nodes, then the graph
    pauses: list[float] = []
    monkeypatch.setattr(graph_transfer.time, "sleep", pauses.append)
    count = len(slices)
    back = graph_transfer.load_in_slices(slices)
    assert slices == []  # each slice let go of once read
    assert back == graph == pickle.loads(pickle.dumps(graph))
    assert back.text == graph.text and back.node_count == graph.node_count
    # The nested nodes are the very objects their blocks hold, not copies.
    by_id = {node.id: node for node in back.nodes_in_order()}
    assert any(node.blocks for node in back.block.nodes)
    assert all(
        by_id[n.id] is n for block in back.block.nodes for b in block.blocks for n in b.nodes
    )
    assert len(pauses) == count - 1  # the event loop's turn between two slices
