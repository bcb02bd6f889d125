"""The app's engine loads its model anew once torch's leftovers have grown (issue 23):
torch registers each frozen clone's types and graphs in the loaded model's compilation
unit for good, and a model loaded again leaves them behind. The user's results are the
same across a reload, a file changed on disk is never loaded in its model's place, and
a call arriving while the model is loaded again is answered."""

from __future__ import annotations

import itertools
import os
import threading
import time
from pathlib import Path
from typing import Any

import pytest
import torch
from oracle import frozen_graph_signature as kinds_of
from ui.models import save_small

import freezeview.session.engine_process as engine_process
from freezeview.engine.graph.naming import demangle
from freezeview.engine.load.reload import file_stamp, share_tensors
from freezeview.session import SessionOptions
from freezeview.session.local import Session
from session.test_local_reruns import counting


def _passes() -> list[str]:
    return [p.id for p in Session.available_passes() if p.default]


def _run(session: Session, preserved: list[str], passes: list[str]) -> list[tuple[Any, ...]]:
    """A run's steps as the user sees them: each step's facts and graph."""
    steps = list(session.run_steps(preserved, passes))
    graphs = [session.step_graph(s.graph).text for s in steps]
    facts = [(s.name, s.changed, s.added, s.removed, s.changed_nodes, s.error) for s in steps]
    return list(zip(facts, graphs, strict=True))


def _views(session: Session, preserved: list[str]) -> list[Any]:
    return [(v.path, v.status, v.reasons, v.preserved) for v in session.explain(preserved)]


def test_results_are_the_same_after_the_model_is_loaded_again(tmp_path: Path) -> None:
    """Statuses, reasons, steps and graphs are the same before and after a reload; the
    last run's graphs stay readable; the old model is let go; the weights are the old
    model's tensors (no second copy); the final graph is torch's own."""
    import weakref

    session = Session(path=save_small(tmp_path / "small.pt"))
    session.open()
    passes = _passes()
    before = {names: _views(session, list(names)) for names in ((), ("scale",))}
    runs = {names: _run(session, list(names), passes) for names in ((), ("scale",))}
    last = list(session.run_steps([], passes[:-1]))
    old = session.loaded
    assert old is not None
    weights = {n: p for n, p in old.module.named_parameters()}
    fresh = session.load_again()
    assert fresh is not None and fresh.module is not old.module
    assert fresh.module._c._type() is not old.module._c._type()
    session.take_reloaded(fresh)
    del fresh
    gone = weakref.ref(old.module)
    del old
    assert session.loaded is not None
    assert all(p is weights[n] for n, p in session.loaded.module.named_parameters())
    # The last run's graphs, taken after the reload, are that run's.
    assert [session.step_graph(s.graph).node_count for s in last] == [s.node_count for s in last]
    del last
    for names, views in before.items():
        assert _views(session, list(names)) == views
    for names, steps in runs.items():
        assert _run(session, list(names), passes) == steps
    assert gone() is None
    expected = torch.jit.freeze(torch.jit.load(str(session.path)).eval())
    graph = session.step_graph(list(session.run_steps([], passes))[-1].graph)
    assert graph.kinds() == kinds_of(expected.graph)


def test_a_file_changed_on_disk_is_not_loaded_again(tmp_path: Path) -> None:
    """The session's model stays the one the user opened: once its file changed (or is
    gone), nothing is loaded in its place."""
    path = save_small(tmp_path / "small.pt")
    session = Session(path=path)
    session.open()
    assert session.load_again() is not None
    stamp = file_stamp(path)
    assert stamp is not None
    os.utime(path, ns=(stamp[3] + 10**9, stamp[3] + 10**9))
    assert session.load_again() is None
    os.utime(path, ns=(stamp[3], stamp[3]))
    assert session.load_again() is not None
    path.write_bytes(path.read_bytes() + b"\0")
    assert session.load_again() is None
    path.unlink()
    assert session.load_again() is None
    # A model given loaded has no file to load again.
    given = Session(loaded=Session(path=save_small(tmp_path / "other.pt")).load())
    assert given.load_again() is None


def test_weights_are_shared_only_where_both_models_agree(tmp_path: Path) -> None:
    """The new model takes the old one's tensors only when every slot matches."""
    path = save_small(tmp_path / "small.pt")
    old, fresh = torch.jit.load(str(path)), torch.jit.load(str(path))
    changed = torch.jit.load(str(path))
    param = next(iter(changed.parameters()))
    with torch.no_grad():
        param.add_(1.0)
    assert share_tensors(changed, old) == 0
    assert next(iter(changed.parameters())) is param
    shared = share_tensors(fresh, old)
    assert shared == len(list(old.named_parameters())) + len(list(old.named_buffers()))
    assert all(a is b for a, b in zip(fresh.parameters(), old.parameters(), strict=True))
    assert all(a is b for a, b in zip(fresh.buffers(), old.buffers(), strict=True))


class _Slow:
    """Session.load_again held until released, to put a call in the middle of it."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.started = threading.Event()
        self.release = threading.Event()
        real = Session.load_again

        def slow(session: Session) -> Any:
            self.started.set()
            assert self.release.wait(30)
            return real(session)

        monkeypatch.setattr(Session, "load_again", slow)


def test_a_call_during_a_reload_is_answered(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine loads the model again once it has grown past its margin, in the
    background: a run asked for meanwhile is answered with the old model, and the
    new one is put in place once no call is under way."""
    session = Session(path=save_small(tmp_path / "small.pt"))
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(session.path, SessionOptions(), sent.append)
    engine._open_done.wait(60)
    passes = _passes()

    def call(method: str, *args: Any) -> Any:
        rid = len(sent) + 1000
        engine.handle(rid, method, args)
        done = [m for m in sent if m[0] in ("done", "error") and m[1] == rid]
        assert done and done[-1][0] == "done", done
        return [m[2] for m in sent if m[0] == "item" and m[1] == rid]

    sizes = iter([100, 200])  # after the first run; then grown past the margin
    monkeypatch.setattr(engine_process, "resident_bytes", lambda: next(sizes, 100))
    monkeypatch.setattr(engine_process, "RELOAD_RUNS", 0)
    expected = call("run_steps", [], passes)  # its size is the first run's
    original = engine.session.loaded
    slow = _Slow(monkeypatch)
    engine.watch_memory(engine._swaps)  # grown: the reload starts
    assert slow.started.wait(30)
    during = call("run_steps", [], passes)  # answered with the old model
    assert engine.session.loaded is original
    slow.release.set()
    assert engine._reload is not None
    engine._reload.join(30)
    assert engine.session.loaded is not original
    after = call("run_steps", [], passes)
    strip = [(v.name, v.changed, v.node_count, v.added, v.removed) for v in expected]
    assert [(v.name, v.changed, v.node_count, v.added, v.removed) for v in during] == strip
    assert [(v.name, v.changed, v.node_count, v.added, v.removed) for v in after] == strip


def test_the_model_is_put_in_place_only_when_no_call_is_under_way(tmp_path: Path) -> None:
    """A call under way when the new model is ready keeps the old one to its end; the
    next call waits for the new one to be in place."""
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    original = engine.session.loaded
    with engine._idle:
        engine._active += 1  # a call under way
    reload = threading.Thread(target=engine._load_again)
    reload.start()
    time.sleep(0.2)
    assert engine.session.loaded is original
    with engine._idle:
        engine._active -= 1
        engine._idle.notify_all()
    reload.join(30)
    assert engine.session.loaded is not original
    assert engine._swaps == 1


class _WithConstant(torch.nn.Module):
    """A traced module whose code holds a tensor constant (constants.pkl)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.c = torch.ones(3)  # not a buffer: tracing makes it a constant of the code

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.c


class _WithTensorAttribute(torch.nn.Module):
    """A scripted module holding a tensor in a plain attribute (neither a parameter
    nor a buffer)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)
        self.table: list[torch.Tensor] = [torch.ones(3)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) + self.table[0]


def test_a_model_is_loaded_without_its_weights_only_when_they_are_all_it_holds(
    tmp_path: Path,
) -> None:
    """The new model is loaded without weights and given the old one's only when every
    tensor it holds is a parameter or buffer and its code holds none; otherwise it is
    loaded whole (its tensors still shared where they match), with the same results."""
    from freezeview.engine.load.reload import attach_weights, has_code_tensors

    small = save_small(tmp_path / "small.pt")
    assert not has_code_tensors(small)
    assert attach_weights(torch.jit.load(str(small), map_location="meta"), torch.jit.load(small))
    traced = tmp_path / "traced.pt"
    torch.jit.save(torch.jit.trace(_WithConstant().eval(), torch.randn(2, 3)), str(traced))
    assert has_code_tensors(traced)
    listed = tmp_path / "listed.pt"
    torch.jit.save(torch.jit.script(_WithTensorAttribute().eval()), str(listed))
    assert not has_code_tensors(listed)
    meta = torch.jit.load(str(listed), map_location="meta")
    assert not attach_weights(meta, torch.jit.load(str(listed)))
    for path in (traced, listed, small):
        session = Session(path=path)
        session.open()
        x = torch.randn(2, 3) if path != small else torch.randn(1, 3, 4, 4)
        expected = torch.jit.freeze(torch.jit.load(str(path)).eval())(x)
        fresh = session.load_again()
        assert fresh is not None
        assert not any(t.is_meta for t in fresh.module.state_dict().values())
        torch.testing.assert_close(torch.jit.freeze(fresh.module.eval())(x), expected)


def test_the_model_is_loaded_again_at_most_every_few_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run after a reload makes its inline and fold steps anew: however the size goes,
    reloads are RELOAD_RUNS runs apart (and the first comes after as many)."""
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    sizes = itertools.count(100, 50)  # after the first run; then always over the margin
    monkeypatch.setattr(engine_process, "resident_bytes", lambda: next(sizes))
    started: list[int] = []
    monkeypatch.setattr(engine, "_load_again", lambda idle=False: started.append(engine._runs))
    for _ in range(3 * engine_process.RELOAD_RUNS + 1):
        engine.watch_memory(engine._swaps)
        if engine._reload is not None:
            engine._reload.join()
        if started and engine._swaps < len(started):  # as a reload puts its model in place
            engine._swaps, engine._runs = len(started), 0
            engine.watch_memory(engine._swaps)  # the first run on the new model
    assert started == [engine_process.RELOAD_RUNS] * len(started) and len(started) >= 2


def test_the_model_loaded_again_keeps_its_module_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The file loaded again is the same model: its explains use the module tree listed
    before (not listed again, 0.3 s at 512 blocks), so the explanations kept from before
    the reload and those made after share one tree instead of holding one each (+8 MB a
    reload at 512 blocks); the statuses are still torch's."""
    from freezeview.engine.reasons import verdicts

    session = Session(path=save_small(tmp_path / "small.pt"))
    session.open()
    before = session.explain([])
    tree = session._explainer.memo._kept[()][1].inventory
    fresh = session.load_again()
    assert fresh is not None
    session.take_reloaded(fresh)
    listed = counting(monkeypatch, verdicts, "build_inventory")
    after = session.explain(["scale"])
    assert not listed
    assert session._explainer.memo._kept[("scale",)][1].inventory is tree
    assert [v.path for v in after] == [v.path for v in before]
    frozen = torch.jit.freeze(torch.jit.load(str(session.path)), preserved_attrs=["scale"])
    assert hasattr(frozen, "scale")
    assert {v.path: v.status for v in after}["scale"] == "kept"


def test_a_toggle_after_a_reload_waits_for_torchs_freeze_alone(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What torch's statuses are read against (the module objects and each path's
    canonical name: 0.1 s at 512 blocks, every first toggle after a reload) is made for
    the model loaded again while it is loaded, off the user's calls; the statuses the
    first toggle after the reload shows are still torch's."""
    from freezeview.engine.reasons import verdicts

    session = Session(path=save_small(tmp_path / "small.pt"))
    session.open()
    session.explain([])
    shown: list[list[Any]] = []
    session.explain(["scale"], statuses=shown.append)  # torch's statuses first
    assert shown
    fresh = session.load_again()
    assert fresh is not None
    named = counting(monkeypatch, verdicts, "canonical_paths")
    session.take_reloaded(fresh)
    shown.clear()
    views = session.explain(["unused"], statuses=shown.append)
    assert shown and not named
    first = {v.path: v.status for v in shown[0]}
    assert first == {v.path: v.status for v in views}
    frozen = torch.jit.freeze(torch.jit.load(str(session.path)), preserved_attrs=["unused"])
    assert hasattr(frozen, "unused") and first["unused"] == "kept"
    assert not hasattr(frozen, "scale") and first["scale"] != "kept"


def test_the_size_to_grow_from_is_the_least_after_the_first_runs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The first run's size may be read while other work of the engine's is still under
    way: the size the engine grows from is the least after its first runs (which never
    reload), so a reload still comes once torch's leftovers have grown it past the
    margin over that, not over a passing high."""
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    runs = engine_process.RELOAD_RUNS
    grown = int(100 * (1 + engine_process.RELOAD_MARGIN)) + 4
    sizes = iter([130] + [100] * (runs - 1) + [grown] * 3)
    monkeypatch.setattr(engine_process, "resident_bytes", lambda: next(sizes))
    started: list[int] = []
    monkeypatch.setattr(engine, "_load_again", lambda idle=False: started.append(engine._runs))
    for _ in range(runs + 1):
        engine.watch_memory(engine._swaps)
        if engine._reload is not None:
            engine._reload.join()
    assert started == [runs]


def test_an_idle_reload_lets_the_old_model_go_at_once(tmp_path: Path) -> None:
    """The last run's frozen module (kept for its .code) is a clone of the old model and
    holds its compilation unit: a reload made while the user is idle reads its .code
    and lets it go, so the old model goes when the new one is put in place, not at the
    next run. The .code is the run's, torch's own."""
    import gc
    import weakref

    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    session = engine.session
    engine.handle(1, "run_steps", ([], _passes()))
    assert session.final_code is None and session._kept is not None
    old = weakref.ref(session.module)
    engine._load_again(idle=True)
    assert engine._swaps == 1 and session._kept is None
    expected = torch.jit.freeze(torch.jit.load(str(session.path)).eval()).code
    assert session.final_code == expected
    gc.collect()
    assert old() is None


def test_an_idle_engine_over_its_limit_loads_the_model_again_sooner(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reloads stay RELOAD_RUNS runs apart while the user goes on running; an engine
    over its limit that then gets no call for IDLE_RELOAD seconds loads the model anew
    all the same. A call in that time puts it off."""
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    monkeypatch.setattr(engine_process, "IDLE_RELOAD", 0.2)
    sizes = iter([100, 100] + [200] * 100)  # the first runs; then over the margin
    monkeypatch.setattr(engine_process, "resident_bytes", lambda: next(sizes))
    started: list[int] = []
    monkeypatch.setattr(engine, "_load_again", lambda idle=False: started.append(engine._runs))
    engine.watch_memory(engine._swaps)
    engine.watch_memory(engine._swaps)
    engine.watch_memory(engine._swaps)  # over, two runs after the first
    engine._calls += 1  # a call came meanwhile
    time.sleep(0.5)
    assert started == []
    engine.watch_memory(engine._swaps)  # over again, three runs after the first
    time.sleep(0.5)
    if engine._reload is not None:
        engine._reload.join(30)
    assert started == [3] and engine._runs < engine_process.RELOAD_RUNS
    assert engine._reload is None or not engine._reload.is_alive()


def test_after_a_reload_at_work_the_old_model_goes_once_the_user_stops(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reload made while the user goes on running leaves the last run's frozen module
    (a clone of the old model) to the next run; if no call comes within IDLE_RELOAD
    seconds, its .code is read and the old model let go then. A call in that time
    leaves it to that call."""
    import gc
    import weakref

    monkeypatch.setattr(engine_process, "IDLE_RELOAD", 0.2)
    sent: list[tuple[Any, ...]] = []
    engine = engine_process._Engine(
        save_small(tmp_path / "small.pt"), SessionOptions(), sent.append
    )
    engine._open_done.wait(60)
    session = engine.session
    engine.handle(1, "run_steps", ([], _passes()))
    old = weakref.ref(session.module)
    engine._load_again()
    engine._calls += 1  # a call came meanwhile
    time.sleep(0.5)
    gc.collect()
    assert session._kept is not None and session.final_code is None
    assert old() is not None  # held by the last run's frozen module
    engine._load_again()
    time.sleep(0.5)
    assert session._kept is None
    assert session.final_code == torch.jit.freeze(torch.jit.load(str(session.path)).eval()).code
    gc.collect()
    assert old() is None


def _small_steps(session: Session) -> list[Any]:
    """The last run's graphs of at most FULL_DIFF_LIMIT nodes."""
    from freezeview.engine.freeze import lazy_graph

    return [g for g in session._step_graphs.values() if g.node_count <= lazy_graph.FULL_DIFF_LIMIT]


def _settled_within(session: Session, seconds: float) -> None:
    """Wait until the last run's small graphs are all snapshots (the engine's idle work)."""
    end = time.monotonic() + seconds
    while not all(g.built for g in _small_steps(session)):
        assert time.monotonic() < end, "the last run's small graphs were never settled"
        time.sleep(0.05)


def test_once_the_user_stops_after_a_reload_the_last_runs_small_graphs_become_snapshots(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose counts came from an earlier run's (the same printouts) keeps its torch
    graph, on the C heap among what the old model lets go of at a reload. Once the user
    has stopped (IDLE_RELOAD seconds without a call) after a reload, the last run's small
    graphs become snapshots, the ones the screen would be sent. Graphs over
    FULL_DIFF_LIMIT nodes stay torch graphs; a call in that time puts it off; with no
    reload, nothing is done."""
    from freezeview.engine.freeze import lazy_graph

    monkeypatch.setattr(engine_process, "IDLE_RELOAD", 0.1)
    sent: list[tuple[Any, ...]] = []
    path = save_small(tmp_path / "small.pt")
    engine = engine_process._Engine(path, SessionOptions(), sent.append)
    engine._open_done.wait(60)
    monkeypatch.setattr(engine, "watch_memory", lambda run_from: None)  # no reload of its own
    session = engine.session
    passes = _passes()
    engine.handle(1, "run_steps", ([], passes))
    engine.handle(2, "run_steps", ([], passes))  # counts known from the first run
    time.sleep(0.3)
    small = _small_steps(session)
    assert small and not all(g.built for g in small)  # no reload
    # The largest of them counted as a large graph: left a torch graph.
    largest = max(g.node_count for g in small if not g.built)
    monkeypatch.setattr(lazy_graph, "FULL_DIFF_LIMIT", largest - 1)
    engine.handle(3, "run_steps", ([], passes))
    engine._load_again()
    engine._calls += 1  # a call came meanwhile
    time.sleep(0.3)
    assert not all(g.built for g in _small_steps(session))
    engine.handle(4, "run_steps", ([], passes))
    steps = [m[2] for m in sent if m[0] == "item" and m[1] == 4]
    engine._load_again()
    _settled_within(session, 30)
    assert not all(g.built for g in session._step_graphs.values())
    fresh = Session(path=path)
    fresh.open()
    expected = [demangle(fresh.step_graph(s.graph).text) for s in fresh.run_steps([], passes)]
    assert [demangle(session.step_graph(s.graph).text) for s in steps] == expected
    # After an idle reload, as after one at work.
    engine.handle(5, "run_steps", ([], passes))
    assert not all(g.built for g in _small_steps(session))
    engine._load_again(idle=True)
    _settled_within(session, 30)
