"""Time per node and where the numbers move, as a session gives them to the app
(``run_steps(profile=True)``, ``node_times``, ``StepSummary.moved_node``).

The in-process session and the engine process must give the same structure: the same
steps timed, each graph's times on the nodes of that graph's own snapshot (kinds agree
node by node), the inline step's graph timed as the unfrozen module; the numbers' first
move named on the node torch's own comparison finds (tests/ui/test_node_time_view.py
holds that oracle for the app); nothing timed unless asked.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from freezeview.session import SessionOptions
from freezeview.session.local import Session
from freezeview.session.remote import RemoteSession

OPTIONS = SessionOptions(input_shapes=("1,3,8,8",), time_budget=0.01)


def _passes(session: Session | RemoteSession) -> tuple[str, ...]:
    return tuple(p.id for p in session.open().passes if p.default)


def _timed(session: Session | RemoteSession) -> dict[int, tuple[str, list[tuple[int, str]]]]:
    """Each timed step's graph: (the profile's title, its nodes' ids and kinds), checked
    against the step's snapshot on the way."""
    steps = list(session.run_steps((), _passes(session), profile=True))
    out = {}
    for step in steps:
        times = session.node_times(step.graph)
        assert (times is not None) == step.timed_nodes, step.name
        if times is None:
            continue
        snapshot = session.step_graph(step.graph)
        assert snapshot is not None
        nodes = [(n.id, n.kind) for n in times.nodes]
        assert all(snapshot.node(i).kind == kind for i, kind in nodes), step.name
        assert times.total_ms == pytest.approx(sum(n.ms for n in times.nodes))
        if step.name == "inline":
            # The inlined graph is the unfrozen module's forward: timed as that.
            assert times.step is None and all(n.unfrozen_ms == n.ms for n in times.nodes)
        out[step.index] = (times.title, nodes)
    return out


@pytest.mark.slow
def test_local_and_engine_process_time_the_same_nodes(small_pt: Path) -> None:
    from freezeview.session import engine_process

    local = Session(path=small_pt, options=OPTIONS)
    want = _timed(local)
    assert want and any(title == "unfrozen module" for title, _ in want.values())
    # The engine process's side of the wire, in this process: the arguments as
    # RemoteSession sends them (the plan, then profile), each answer as it goes out.
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(small_pt, OPTIONS, sent.append)
    engine.handle(1, "open", ())
    engine.handle(2, "run_steps", ((), _passes(local), True))
    steps = [m[2] for m in sent if m[:2] == ("item", 2)]
    assert [s.index for s in steps if s.timed_nodes] == list(want)
    for rid, step in enumerate(steps, start=3):
        engine.handle(rid, "node_times", (step.graph,))
        times = sent[-1][2]
        assert sent[-1][:2] == ("done", rid)
        got = (times.title, [(n.id, n.kind) for n in times.nodes]) if times else None
        assert got == want.get(step.index), step.name
    # Unasked, a run times no node (and its graphs have no times).
    engine.handle(99, "run_steps", ((), _passes(local)))
    steps = [m[2] for m in sent if m[:2] == ("item", 99)]
    assert steps and not any(s.timed_nodes for s in steps)
    assert local.node_times(steps[-1].graph) is None


@pytest.mark.slow
def test_without_sample_inputs_nothing_is_timed_or_bisected(small_pt: Path) -> None:
    session = Session(path=small_pt)
    steps = list(session.run_steps((), _passes(session), profile=True))
    assert steps and not any(s.timed_nodes or s.moved or s.moved_node for s in steps)
    assert all(session.node_times(s.graph) is None for s in steps)


def test_node_times_are_columns_read_node_by_node() -> None:
    """The screen reads a box's nodes (``of``) and every node's time (``ms_by_id``) from
    the columns the engine process sends."""
    import pickle

    from freezeview.session import NodeTime, NodeTimes

    times = NodeTimes(
        7, 2, "t", "clock", 1.0, 3.0,
        ids=(4, 9), kinds=("aten::conv2d", "aten::relu"), ms=(2.0, 1.0), shares=(0.6, 0.3),
        unfrozen_ms=(2.5, None), spreads=(0.1, 0.05), unfrozen_spreads=(0.2, 0.0),
    )  # fmt: skip
    conv = NodeTime(4, "aten::conv2d", 2.0, 0.6, 2.5, 0.1, 0.2)
    relu = NodeTime(9, "aten::relu", 1.0, 0.3, None, 0.05, 0.0)
    assert times.nodes == (conv, relu)
    assert times.of([9, 5, 4]) == [relu, conv]  # a box's order; 5 was not timed
    assert times.ms_by_id() == {4: 2.0, 9: 1.0}
    assert pickle.loads(pickle.dumps(times)).of([4]) == [conv]
