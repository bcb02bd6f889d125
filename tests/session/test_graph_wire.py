"""A step's graph crosses from the engine process to the screen in slices
(``freezeview/session/graph_wire.py``): the same graph, unpickled a slice at a time, a
slice a millisecond or two of the screen's GIL, none of it tracked by the garbage
collector, one graph at a time, standing aside while the user is at the keys."""

from __future__ import annotations

import gc
import pickle
import threading

import pytest
import torch

from freezeview.engine.graph import snapshot_graph
from freezeview.session import collector, graph_wire


@torch.jit.script
def _looped(x: torch.Tensor, n: int) -> torch.Tensor:
    for _ in range(n):
        x = x.relu() + 1 if bool(x.sum() > 0) else x * 2
    return x


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """Nobody at the keys; the pauses between two slices, recorded instead of slept."""
    pauses: list[float] = []
    monkeypatch.setattr(graph_wire.time, "sleep", pauses.append)
    monkeypatch.setattr(collector, "idle_seconds", lambda: 100.0)
    return pauses


def test_the_graph_comes_back_whole_a_slice_at_a_time(quiet: list[float]) -> None:
    graph = snapshot_graph(_looped.graph, "forward")
    slices = graph_wire.dump_in_slices(graph, nodes=3)
    node_slices = -(-graph.node_count // 3)
    assert len(slices) == node_slices + 3  # the nodes, the value map, the text, the rest
    count = len(slices)
    back = graph_wire.load_in_slices(slices)
    assert slices == []  # each slice let go of once read
    assert back is not None
    assert back == graph == pickle.loads(pickle.dumps(graph))
    assert back.text == graph.text and back.node_count == graph.node_count
    assert [n.id for n in back.nodes_in_order()] == list(range(graph.node_count))
    assert back.value_map() == graph.value_map()
    with pytest.raises(TypeError):  # handed out read-only
        back.value_map()["x"] = graph.inputs[0]  # type: ignore[index]
    assert all(back.value(name) == graph.value(name) for name in graph.value_map())
    # The nested nodes are the very objects their blocks hold, not copies.
    by_id = {node.id: node for node in back.nodes_in_order()}
    assert any(node.blocks for node in back.block.nodes)
    assert all(
        by_id[n.id] is n for block in back.block.nodes for b in block.blocks for n in b.nodes
    )
    assert quiet == [0.0005] * (count - 1)  # the event loop's turn between two slices


def test_no_slice_holds_more_than_a_few_hundred_nodes_or_the_whole_graph() -> None:
    """A slice is the GIL held in one block on the screen's side: at 2,000 nodes it was
    22-36 ms with the event loop competing, and the last slice carried the graph's text
    and value map (tens of milliseconds more) with the graph."""
    graph = snapshot_graph(_looped.graph, "forward")
    assert graph_wire.SLICE_NODES <= 500
    slices = graph_wire.dump_in_slices(graph, nodes=3)
    unpickler = pickle.Unpickler(__import__("io").BytesIO(b"".join(slices)))
    kinds = [unpickler.load()[0] for _ in slices]
    assert kinds[-2:] == ["text", "graph"] and "values" in kinds
    assert len(slices[-1]) < 200  # the graph's own fields: the rest went before


def test_the_graph_received_is_not_tracked_by_the_collector(quiet: list[float]) -> None:
    """No collection walks a received graph (hundreds of thousands of objects at 70k
    nodes: the screen's deep collection took 0.26 s walking them). ``gc.freeze`` is no
    substitute: the deep collection unfreezes (session/graph_wire.py says why the
    untracking goes through CPython's C API)."""
    import sys

    if sys.implementation.name == "cpython":  # the C API call the screen relies on
        assert graph_wire._UNTRACK is not None
    graph = snapshot_graph(_looped.graph, "forward")
    back = graph_wire.load_in_slices(graph_wire.dump_in_slices(graph, nodes=3))
    assert back is not None
    # The value map itself (value_map() hands it out behind a read-only view).
    (values,) = gc.get_referents(back.value_map())
    parts: list[object] = [back, back.block, back.nodes_in_order(), values]
    for node in back.nodes_in_order():
        parts += [node, node.inputs, node.outputs, *node.outputs, node.attributes]
        parts += [*node.attributes, node.blocks, *node.blocks]
        parts += [x for b in node.blocks for x in (b.inputs, b.nodes, b.outputs)]
    tracked = [p for p in parts if gc.is_tracked(p)]
    assert tracked == [], tracked[:3]


def test_the_transfer_stands_aside_while_the_user_is_at_the_keys(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A key pressed while a graph arrives waits for one slice, not for a convoy of
    them: between two slices the receiving thread leaves the GIL for longer."""
    pauses: list[float] = []
    monkeypatch.setattr(graph_wire.time, "sleep", pauses.append)
    monkeypatch.setattr(collector, "idle_seconds", lambda: 0.0)  # a key just now
    graph = snapshot_graph(_looped.graph, "forward")
    graph_wire.load_in_slices(graph_wire.dump_in_slices(graph, nodes=3))
    assert pauses and min(pauses) >= 0.01


def test_a_stale_transfer_stops_at_its_next_slice(quiet: list[float]) -> None:
    graph = snapshot_graph(_looped.graph, "forward")
    slices = graph_wire.dump_in_slices(graph, nodes=2)
    count = len(slices)
    asked: list[int] = []
    back = graph_wire.load_in_slices(slices, stale=lambda: asked.append(1) or len(asked) > 1)
    assert back is None
    assert len(slices) >= count - 3  # the rest was never read


def test_one_graph_is_received_at_a_time(quiet: list[float]) -> None:
    """Two workers unpickling at once leave the event loop a third of the GIL."""
    graph = snapshot_graph(_looped.graph, "forward")
    got: list[object] = []
    slices = graph_wire.dump_in_slices(graph, nodes=3)
    with graph_wire._receiving:  # another graph on its way
        worker = threading.Thread(target=lambda: got.append(graph_wire.load_in_slices(slices)))
        worker.start()
        worker.join(0.3)
        assert worker.is_alive() and not got
    worker.join(10)
    assert got == [graph]
