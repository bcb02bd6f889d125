"""The screen's garbage collector (session/collector.py): no full collection walks a run's
graphs, so neither a step arriving nor a re-run's start holds the event loop for it.

A big model is stood for by ballast: each step arrives with a few hundred thousand
extra objects the screen keeps until the next run, as a big snapshot's objects are.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freezeview.session import collector
from freezeview.session.collector import Handoff
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

from .conftest import wait_ready
from .test_app import SIZE

# Objects per step: walking them all takes a full collection over 100 ms.
BALLAST = 150_000


class _BallastSession(Session):
    """Each step comes with objects the screen holds until the next run (kept, as the
    engine process's session keeps a run's graphs, in ``_keys`` until a re-run)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path=path)
        self._keys: dict[int, list[list[Any]]] = {}

    @property
    def ballast(self) -> list[list[Any]]:
        return [b for run in self._keys.values() for b in run]

    def forget_runs(self) -> list[list[Any]]:
        dropped = self.ballast
        self._keys.clear()
        return dropped

    def run_steps(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        run = self._keys.setdefault(len(self._keys) + 1, [])
        for step in super().run_steps(*args, **kwargs):
            run.append([[] for _ in range(BALLAST)])
            yield step


@pytest.mark.slow
@pytest.mark.asyncio
async def test_no_full_collection_walks_the_steps(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    walked: list[int] = []  # at each full collection: how many steps' ballast it walks

    def watch(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 2:
            ballast = {id(b) for b in session.ballast}
            walked.append(sum(id(o) in ballast for o in gc.get_objects(generation=2)))

    from freezeview.ui.screens import main

    session = _BallastSession(small_pt)
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=session)
    # One at every start (the collection a user who never pauses gets there); the quiet
    # timer's, which walks what is alive (the graphs received from the engine process
    # are not tracked, ballast is), not in this test.
    monkeypatch.setattr(collector, "RUN_START_DUE", -(10**9))
    monkeypatch.setattr(collector, "RUN_START_SHARE", 0.0)
    monkeypatch.setattr(main, "_SWEEP_SECONDS", 1000.0)
    gc.callbacks.append(watch)
    try:
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(pilot)
            screen = app.main_screen
            steps = len(screen.steps)
            assert steps >= 4
            assert gc.get_freeze_count() > steps * BALLAST  # kept out of the walks
            walked.clear()
            sweeps = len(collector.deep_sweeps)
            for _ in range(2):
                await pilot.press("r")
                await wait_ready(pilot)
            for _ in range(200):  # the collection follows the last run's freeing
                if len(collector.deep_sweeps) > sweeps:
                    break
                await pilot.pause(0.05)
    finally:
        gc.callbacks.remove(watch)
    # Full collections ran (the re-run's start), none over a step's ballast (the last
    # run's is let go first), and none by itself while steps arrived.
    assert walked and max(walked) == 0, walked


def test_a_handoff_gives_its_value_once() -> None:
    box = Handoff([1, 2])
    assert box.take() == [1, 2]
    with pytest.raises(RuntimeError):
        box.take()


def test_install_and_uninstall_restore_the_thresholds() -> None:
    before = gc.get_threshold()
    collector.install()
    try:
        assert gc.get_threshold()[:2] == before[:2] and gc.get_threshold()[2] > 10**6
    finally:
        collector.uninstall()
    assert gc.get_threshold() == before


def test_what_arrives_paused_joins_the_frozen_objects(monkeypatch: pytest.MonkeyPatch) -> None:
    """The screen unpickles a snapshot with the collector paused (remote_session.py);
    with the screen's objects frozen, what was built is frozen with them, not walked
    by a young collection (all of a 70k-node snapshot at once, holding the GIL), and
    without counting the frozen objects first (a walk of them all: 25 ms on a big
    model's screen, for every large message)."""
    collector.install()
    try:
        collector.keep()
        before = gc.get_freeze_count()
        counts = count_walks(monkeypatch)
        with collector.paused():
            built = [[] for _ in range(50_000)]
        assert counts == []
        monkeypatch.undo()
        assert gc.get_freeze_count() >= before + len(built)
    finally:
        collector.uninstall()


def test_outside_the_app_what_was_built_paused_stays_collectable() -> None:
    """The CLI and the API freeze nothing of their own: what a paused block built joins
    the oldest generation, not the frozen objects (a cycle among it is found again)."""
    from freezeview.engine.plumbing import collector_paused

    gc.unfreeze()
    with collector.paused():
        built = [[] for _ in range(1000)]
    assert gc.get_freeze_count() == 0 and gc.is_tracked(built)
    with collector_paused(frozen_kept=False):
        built = [[] for _ in range(1000)]
    assert gc.get_freeze_count() == 0


def calls_of(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[set[str]]:
    """Every call of ``owner.name`` from now on, as the names of the functions on the
    stack that made it."""
    import traceback

    calls: list[set[str]] = []
    function = getattr(owner, name)

    def recording(*args: Any, **kwargs: Any) -> Any:
        calls.append({frame.name for frame in traceback.extract_stack()})
        return function(*args, **kwargs)

    monkeypatch.setattr(owner, name, recording)
    return calls


def count_walks(monkeypatch: pytest.MonkeyPatch) -> list[set[str]]:
    """Every ``gc.get_freeze_count()`` from now on (each one walks every frozen object),
    as the names of the functions on the stack that asked."""
    return calls_of(monkeypatch, gc, "get_freeze_count")


def test_let_go_frees_a_graph_in_slices_off_the_calling_thread(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-run's start hands the last run's graphs to let_go: freed in another thread a
    few nodes at a time (the event loop gets the GIL between slices), then ``then``,
    then the freed C heap goes back to the system (from that thread too)."""
    import sys
    import threading

    import torch

    from freezeview.engine.graph import snapshot_graph

    @torch.jit.script
    def f(x: torch.Tensor) -> torch.Tensor:
        for _ in range(3):
            x = x.relu() + 1
        return x * 2

    snap = snapshot_graph(f.graph, "forward")
    node = snap.nodes_in_order()[-1]
    held = sys.getrefcount(node)
    slices: list[float] = []
    sleep = collector.time.sleep
    monkeypatch.setattr(collector, "_SLICE", 2)
    monkeypatch.setattr(collector.time, "sleep", lambda s: (slices.append(s), sleep(s)))
    done: list[str] = []
    monkeypatch.setattr(collector, "give_back_freed_memory", lambda: done.append("trim") or True)
    thread = collector.let_go([snap], then=lambda: done.append(threading.current_thread().name))
    del snap
    thread.join(10)
    assert done == ["freezeview-let-go", "trim"]
    assert len(slices) >= 3  # not one cascade
    assert sys.getrefcount(node) < held  # the graph let go of the node


def test_let_go_calls_then_when_a_graph_cannot_be_walked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The next run starts in ``then``: a graph whose nodes cannot be listed goes whole,
    the ones after it too, and ``then`` still comes (the screen read "running…" for
    good otherwise)."""

    class Broken:
        def nodes_in_order(self) -> list[Any]:
            raise ValueError("no nodes here")

    done: list[str] = []
    monkeypatch.setattr(collector, "give_back_freed_memory", lambda: done.append("trim") or True)
    thread = collector.let_go([object(), Broken()], then=lambda: done.append("then"))
    thread.join(10)
    assert not thread.is_alive()
    assert done == ["then", "trim"]


def test_a_deep_collection_waits_for_enough_frozen_garbage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A run's start collects everything (0.1-0.2 s on a big model's screen) only once
    enough objects joined the frozen ones since the last time."""
    ran: list[int] = []
    monkeypatch.setattr(collector, "deep_sweep", lambda: ran.append(1) or 0.0)
    monkeypatch.setattr(collector, "_saved", (700, 10, 10))
    monkeypatch.setattr(collector, "_frozen_after_deep", gc.get_freeze_count())
    monkeypatch.setattr(collector, "DUE_GARBAGE", 1000)
    monkeypatch.setattr(collector, "DUE_SHARE", 0.0)  # this process's heap is no screen's
    collector.deep_sweep_if_due()
    assert ran == []
    kept = [[] for _ in range(2000)]
    gc.freeze()
    try:
        collector.deep_sweep_if_due()
    finally:
        gc.unfreeze()
    assert ran == [1] and kept


def test_a_runs_start_decides_from_the_count_its_last_run_end_took(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``r`` starts a run: counting the frozen objects there walked them all (25 ms of
    the key's 60-120 ms on the 48-layer transformer's screen). The run's start decides
    from the count the last run's end took; a deep sweep counts afresh after itself."""
    ran: list[int] = []
    monkeypatch.setattr(collector, "_saved", (700, 10, 10))
    monkeypatch.setattr(collector, "_frozen_counted", None)
    monkeypatch.setattr(collector, "_frozen_after_deep", None)
    monkeypatch.setattr(collector, "RUN_START_SHARE", 0.0)
    deep_sweep = collector.deep_sweep
    monkeypatch.setattr(collector, "deep_sweep", lambda: ran.append(1) or deep_sweep())
    walks = count_walks(monkeypatch)
    assert collector.deep_sweep_if_due(1000, recount=False) == 0.0  # the first run's start
    gc.freeze()  # the screen's objects, as the first run leaves them
    try:
        collector.note_run_end()
        collector.deep_sweep_if_due(1000, recount=False)  # sets the count to measure from
        kept = [[] for _ in range(2000)]
        gc.freeze()
        assert collector.deep_sweep_if_due(1000, recount=False) == 0.0 and ran == []
        collector.note_run_end()
        collector.deep_sweep_if_due(1000, recount=False)
        assert ran == [1] and kept
        collector.deep_sweep_if_due(1000, recount=False)  # swept: not due again
        assert ran == [1]
    finally:
        gc.unfreeze()
    starts = [w for w in walks if "note_run_end" not in w and "deep_sweep" not in w]
    assert starts == [], starts


@pytest.mark.slow
@pytest.mark.asyncio
async def test_a_rerun_leaves_little_frozen_garbage(small_pt: Path, tmp_path: Path) -> None:
    """What the screen drew and dropped during a run is freed by reference counting:
    the objects only a deep sweep (0.15-0.3 s on a big model's screen, at a run's start)
    could free stay few, so that sweep is rarely due. Textual's strips caching
    themselves left thousands per run (nine in ten of what it freed), the model tree's
    rows each explanation's."""
    from textual.strip import Strip

    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=Session(path=small_pt))
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        collector.deep_sweep()  # what was frozen garbage so far is gone
        gc.collect()
        for _ in range(3):
            await pilot.press("n", "d", "d", "d")
            await pilot.pause(0.05)
        screen = app.main_screen
        screen.ir.focus()
        await pilot.press("pagedown", "down", "down", "pageup")
        screen.model_tree.focus()
        await pilot.press("down", "down", "space")  # explained again: the tree rebuilt
        await wait_ready(pilot)
        await pilot.press("r")
        await wait_ready(pilot)
        await pilot.pause(0.2)
        collector.keep()
        gc.collect()  # the garbage not frozen: not what this test counts
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            gc.unfreeze()
            gc.collect()
            garbage = list(gc.garbage)
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.freeze()
    strips = sum(type(o) is Strip for o in garbage)
    # (The footer's keys, rebuilt when a focus changes the keys shown, are garbage of
    # that kind too: a couple of thousand objects a rebuild.)
    from textual.widgets.tree import TreeNode

    nodes = sum(type(o) is TreeNode for o in garbage)
    assert strips < 20 and nodes == 0, (strips, nodes, len(garbage))


@pytest.mark.slow  # waits out the app's own quiet timer (5 s of wall clock)
@pytest.mark.asyncio
async def test_the_quiet_collection_waits_for_a_pause_in_the_keys(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The screen's periodic collection (one block of a few to tens of milliseconds)
    runs while nobody is at the keys, never between two keys of a burst."""
    from freezeview.ui.screens import main

    monkeypatch.setattr(main, "_SWEEP_SECONDS", 0.05)
    # The app's own: a loaded machine can space two of the burst's keys by over 0.5 s.
    monkeypatch.setattr(main, "_QUIET_SECONDS", 2.0)
    sweeps: list[float] = []
    sweep = collector.sweep
    monkeypatch.setattr(collector, "sweep", lambda: sweeps.append(1) or sweep())
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=Session(path=small_pt))
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        app.main_screen.ir.focus()
        sweeps.clear()
        for _ in range(12):  # a burst of keys, each under the quiet time after the last
            await pilot.press("down")
            await pilot.pause(0.1)
        assert sweeps == []
        for _ in range(200):
            if sweeps:
                break
            await pilot.pause(0.05)
        assert sweeps  # once the keys stop


@pytest.mark.asyncio
async def test_the_first_runs_start_no_deep_collection(small_pt: Path, tmp_path: Path) -> None:
    """The deep collection measures the garbage gained since the first run's start: it
    used to count every object the screen had frozen by then (all of them alive), so
    the first or second ``r`` of every session walked the whole heap (0.45 s on the
    48-layer transformer's screen)."""
    sweeps = len(collector.deep_sweeps)
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=Session(path=small_pt))
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("r")
        await wait_ready(pilot)
        await pilot.pause(0.3)
    assert len(collector.deep_sweeps) == sweeps, collector.deep_sweeps[sweeps:]


@pytest.mark.slow  # waits out the app's own quiet timer (5 s of wall clock)
@pytest.mark.asyncio
async def test_a_due_deep_collection_waits_for_a_pause_in_the_keys(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The deep collection walks every object the screen tracks (0.26 s on the 48-layer
    transformer's screen, on the r key when it was due at the run's start): due, it
    waits for the quiet timer, never runs from a run's start or a key's handler."""

    from freezeview.ui.screens import main

    monkeypatch.setattr(main, "_SWEEP_SECONDS", 0.05)
    monkeypatch.setattr(main, "_QUIET_SECONDS", 0.5)  # ten times the keys' spacing below
    monkeypatch.setattr(collector, "DUE_GARBAGE", -(10**9))  # due whenever asked
    monkeypatch.setattr(collector, "DUE_SHARE", 0.0)
    callers = calls_of(monkeypatch, collector, "deep_sweep")
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=Session(path=small_pt))
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        app.main_screen.ir.focus()
        for _ in range(2):
            await pilot.press("r")
            for _ in range(6):
                await pilot.press("n", "down")
                await pilot.pause(0.05)
            await wait_ready(pilot)
        for _ in range(200):  # once the keys stop
            if any("_quiet_sweep" in c for c in callers):
                break
            await pilot.pause(0.05)
    assert callers and all("_quiet_sweep" in c for c in callers), callers


def test_a_deep_sweep_first_lets_go_of_what_the_screen_hands_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The screen's caches of removed widgets (ui/textual_caches.py) are emptied before
    the collection that frees them; the collector itself knows nothing of Textual."""
    order: list[str] = []
    monkeypatch.setattr(collector.gc, "collect", lambda *_: order.append("collect") or 0)
    collector.install(before_deep_sweep=lambda: order.append("let go"))
    try:
        collector.deep_sweep()
    finally:
        collector.uninstall()
    assert order == ["let go", "collect"], order
    order.clear()
    collector.install()  # none given (or after uninstall): nothing called
    try:
        collector.deep_sweep()
    finally:
        collector.uninstall()
    assert order == ["collect"], order


def test_deep_collections_measure_from_the_first_runs_end_at_a_share_of_what_is_alive(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """What the first run makes alive (a 2,048-block stack's explanation, tree and steps:
    500k objects) is not garbage: a count taken while the model loaded made the first
    re-run's ``r`` walk it all (0.45 s). Nothing is due before the first run's end; then
    the quiet timer waits for a quarter of what is alive to join the frozen objects (at
    least DUE_GARBAGE), a run's start for as many as are alive (at least RUN_START_DUE)."""
    ran: list[int] = []
    counts = iter([600_000, 600_000, 700_000, 760_000, 1_300_000])  # each walk's count
    monkeypatch.setattr(collector, "_saved", (700, 10, 10))
    monkeypatch.setattr(collector, "_frozen_counted", None)
    monkeypatch.setattr(collector, "_frozen_after_deep", None)
    monkeypatch.setattr(collector, "DUE_GARBAGE", 1000)
    monkeypatch.setattr(collector, "RUN_START_DUE", 1000)
    monkeypatch.setattr(collector.gc, "get_freeze_count", lambda: next(counts))
    monkeypatch.setattr(collector, "deep_sweep", lambda: ran.append(1) or 0.0)
    assert collector.deep_sweep_if_due() == 0.0  # while loading: nothing to measure from
    collector.note_run_end()  # the first run's end: 600k alive
    assert collector.deep_sweep_if_due() == 0.0 and ran == []  # 600k: nothing gained
    assert collector.deep_sweep_if_due() == 0.0 and ran == []  # 700k: under a quarter more
    collector.deep_sweep_if_due()  # 760k: over a quarter more
    assert ran == [1]
    collector.note_run_end()  # 1.3M counted at a run's end
    monkeypatch.setattr(collector, "_frozen_after_deep", 600_000)
    monkeypatch.setattr(collector, "_frozen_counted", 1_100_000)
    assert collector.deep_sweep_if_due(collector.RUN_START_DUE, recount=False) == 0.0
    monkeypatch.setattr(collector, "_frozen_counted", 1_300_000)
    collector.deep_sweep_if_due(collector.RUN_START_DUE, recount=False)  # twice as many
    assert ran == [1, 1]
