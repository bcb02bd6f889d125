"""The screen's memory stays put across re-runs (issue 23): what a run showed goes when a
re-run replaces it, however often the user presses ``r`` or toggles the plan."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from freezeview.engine.diff import diff as diff_module
from freezeview.engine.draw.folding import prepared

from .conftest import wait_ready
from .test_app import SIZE, app_for, wait_worker

pytestmark = pytest.mark.asyncio

RERUNS = 6


@pytest.mark.slow
@pytest.mark.long_pole
async def test_reruns_free_the_earlier_runs(small_pt: Path, tmp_path: Path) -> None:
    """Each run's steps are seen in every view mode and in the graph view, then re-run:
    earlier runs' step graphs must be freed by reference counting alone (the app
    freezes what it holds, so a graph held in a cycle would stay for good) and the IR
    pane's documents must not pile up."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        pane = screen.ir_pane
        earlier: dict[int, object] = {}  # (snapshots take no weak references)
        documents: list[int] = []
        for run in range(RERUNS):
            for _ in range(3):  # ir -> code -> diff -> ir, on a few steps
                await pilot.press("n", "d", "d", "d")
                await pilot.pause(0.05)
            if run % 3 == 0:  # the graph view shown on a step, then hidden
                await pilot.press("v")
                await wait_worker(pilot, "graph")
                await pilot.press("v")
            documents.append(len(pane._doc_cache))
            shown = [screen.session.known_graph(step.graph) for step in screen.steps]
            earlier.update((id(g), g) for g in shown if g is not None)
            del shown
            await pilot.press("space" if run % 2 else "r")  # a toggled plan re-runs too
            if run % 2:
                await pilot.press("r")
            await wait_ready(pilot)
        await pilot.pause(0.2)
        current = {id(screen.session.known_graph(step.graph)) for step in screen.steps}
        assert len(earlier) >= RERUNS, "the steps shown were taken"
        # The engine's diff and drawing caches keep the last few dozen snapshots they
        # saw, by design (bounded): this test is about what the app holds.
        diff_module._side_cache.clear()
        diff_module._diff_cache.clear()
        prepared._prepared_cache.clear()
        # No collection here: the app freezes what it holds (session/collector.py), so an
        # earlier run's graph must be freed by reference counting alone, held by no
        # cycle, or it would stay for good.
        # Held by ``earlier`` only, or by the app too? (An object nobody else holds,
        # counted the same way, says how many references the counting itself makes.)
        earlier[0] = object()
        counts = {i: sys.getrefcount(s) for i, s in earlier.items()}
        held = [i for i, n in counts.items() if i not in current and n > counts[0]]
        assert not held, f"{len(held)} step graphs of earlier runs are still held"
        assert max(documents) == documents[0], documents


@pytest.mark.slow
@pytest.mark.long_pole
async def test_thirty_reruns_keep_the_screen_memory(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 23: after 30 re-runs (r, with preserved attributes and passes toggled on
    the way, and a pause at the keys now and then, as a person makes) the screen holds
    within 10 % of what it held after the first run.

    Through the engine process, as ``freezeview MODEL.pt`` runs: this process is the
    screen's. Counted in Python's allocated blocks (what the screen's objects take;
    this test process's torch, loaded by the test itself, does not move it)."""
    from freezeview.session import collector
    from freezeview.ui.screens import main

    monkeypatch.setattr(main, "_SWEEP_SECONDS", 0.2)  # the quiet timer looks often
    monkeypatch.setattr(main, "_QUIET_SECONDS", 0.5)  # and a pause is shorter than a person's
    # This process holds torch's objects too, frozen with the screen's: a share of them
    # all would be due far later than a share of the screen's alone.
    monkeypatch.setattr(collector, "DUE_SHARE", 0.02)
    collector.deep_sweeps.clear()
    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=120)
        screen = app.main_screen
        await pilot.press("n", "d", "d", "d")
        await pilot.pause(0.2)
        first = sys.getallocatedblocks()
        counts = []
        for run in range(30):
            if run % 5 == 1:
                screen.model_tree.focus()
                await pilot.press("down", "space")  # a preserved attribute toggled
            elif run % 5 == 3:
                passes = screen.steps_bar.passes
                passes.focus()
                passes.highlighted = 2
                await pilot.press("t")  # a pass toggled
            await pilot.press("r")
            await wait_ready(pilot, timeout=60)
            await pilot.press("n", "d", "d", "d")
            await pilot.pause(0.05)
            if run % 10 == 9:  # a pause at the keys: the quiet timer's turn
                await pilot.pause(0.9)
            counts.append(sys.getallocatedblocks())
    # When the keys pause and enough frozen garbage has gathered, it is freed.
    assert collector.deep_sweeps
    assert max(counts[-10:]) <= first * 1.10, (first, counts, collector.deep_sweeps)


@pytest.mark.slow
async def test_a_reruns_start_holds_no_graph_of_the_last_run(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """At a re-run's start the screen collects everything once (session/collector.py): the
    last run's graphs must be gone by then, or that walk visits every node of them
    (0.3 s at 17k nodes, on the ``r`` key). A cursor resting on a big graph's line used
    to keep that graph in its timer until the next move."""
    import gc

    from textual.worker import WorkerState

    from freezeview.session import collector
    from freezeview.ui.widgets import ir_pane

    # Every graph read as a big one is: node facts when the cursor rests, in a worker.
    monkeypatch.setattr(ir_pane, "_SYNC_FACTS_NODES", 0)
    alive: list[int] = []
    deep_sweep = collector.deep_sweep
    # Graphs earlier tests in this worker keep (module caches) are not the app's: held
    # here, so that their ids stay theirs.
    earlier = [o for o in gc.get_objects() if type(o).__name__ == "GraphSnapshot"]
    earlier_ids = {id(o) for o in earlier}

    def counting() -> float:
        gc.unfreeze()
        alive.append(
            sum(
                type(o).__name__ == "GraphSnapshot" and id(o) not in earlier_ids
                for o in gc.get_objects()
            )
        )
        return deep_sweep()

    monkeypatch.setattr(collector, "deep_sweep", counting)
    # One at every start.
    monkeypatch.setattr(
        collector, "deep_sweep_if_due", lambda due=None, **_: collector.deep_sweep()
    )
    handed: list[int] = []
    let_go = collector.let_go

    def handing(graphs, then=None):  # type: ignore[no-untyped-def]
        graphs = list(graphs)
        handed.append(len(graphs))
        return let_go(graphs, then)

    # The last run's graphs are freed off the event loop, not by the r key's handler.
    monkeypatch.setattr(collector, "let_go", handing)
    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=120)
        screen = app.main_screen
        await pilot.press("n", "n")
        await wait_ready(pilot)
        screen.ir.focus()
        await pilot.press("down", "down")
        await pilot.pause(0.3)  # the cursor rests: its node's facts are read
        # ... in a worker, which holds the graph while it reads (a loaded machine takes
        # longer than the pause): what must be gone is what is left once it is done.
        for _ in range(200):
            if not any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers):
                break
            await pilot.pause(0.05)
        assert screen.session.known_graph(screen.steps[screen.current_step].graph)
        await pilot.press("r")
        await wait_ready(pilot, timeout=60)
        for _ in range(100):  # the collection follows the freeing, a moment later
            if len(alive) >= 2:
                break
            await pilot.pause(0.05)
    assert len(alive) >= 2 and alive[-1] == 0, alive
    assert handed[-1] >= 1, handed
