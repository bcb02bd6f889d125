"""The app's engine process (``RemoteSession``) against the in-process ``Session``.

The same calls on the same model must give the same answers whichever side of the
process boundary the torch work runs; on top of that the engine process must survive
what a thread could not: being told to stop mid-work, and torch crashing.
"""

from __future__ import annotations

import dataclasses
import os
import pickle
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freezeview.engine.plumbing.errors import BadInputError, PlanError
from freezeview.session.local import Session
from freezeview.session.remote import EngineError, RemoteSession


@pytest.fixture(scope="module")
def remote(small_pt: Path) -> Iterator[RemoteSession]:
    """One engine process for the tests that leave it working (each starts a torch
    import); the tests that stop, crash or break an engine start their own."""
    session = RemoteSession(small_pt)
    yield session
    session.close()


@pytest.fixture
def own_remote(small_pt: Path) -> Iterator[RemoteSession]:
    """An engine process for one test, which kills it."""
    session = RemoteSession(small_pt)
    yield session
    session.close()


def default_passes(session: RemoteSession | Session) -> list[str]:
    return [p.id for p in session.open().passes if p.default]


def test_open_explain_and_steps_match_the_in_process_session(
    remote: RemoteSession, small_pt: Path
) -> None:
    local = Session(path=small_pt)
    opened, expected = remote.open(), local.open()
    assert dataclasses.replace(opened, load_seconds=0) == dataclasses.replace(
        expected, load_seconds=0
    )
    assert remote.name == local.name == small_pt.name

    preserved = ["scale"]
    assert remote.explain(preserved) == local.explain(preserved)
    assert remote.inventory is not None and local.inventory is not None
    assert remote.inventory.attributes == local.inventory.attributes

    passes = default_passes(local)
    got = list(remote.run_steps(preserved, passes))
    want = list(local.run_steps(preserved, passes))
    assert [(s.index, s.name, s.changed, s.added, s.removed) for s in got] == [
        (s.index, s.name, s.changed, s.added, s.removed) for s in want
    ]
    assert [s.node_count for s in got] == [s.node_count for s in want]
    graphs = [remote.step_graph(s.graph) for s in got]
    assert graphs == [local.step_graph(s.graph) for s in want]
    assert [g.node_count for g in graphs] == [s.node_count for s in got]
    assert remote.read_final_code(timeout=60.0) == local.final_code and remote.final_code


@pytest.mark.slow
def test_read_final_code_gives_up_after_its_timeout(own_remote: RemoteSession) -> None:
    """An engine that does not answer (stopped here with SIGSTOP) makes
    ``read_final_code`` raise TimeoutError once ``timeout`` has passed, not hang; the
    engine, let go on, answers the next call."""
    list(own_remote.run_steps([], default_passes(own_remote)))
    pid = own_remote.pid
    assert pid is not None
    os.kill(pid, signal.SIGSTOP)
    try:
        start = time.monotonic()
        with pytest.raises(TimeoutError):
            own_remote.read_final_code(timeout=0.5)
        waited = time.monotonic() - start
    finally:
        os.kill(pid, signal.SIGCONT)
    assert 0.5 <= waited < 5, waited
    assert own_remote.final_code is None
    code = own_remote.read_final_code(timeout=60)
    assert code and own_remote.final_code == code


def test_explain_gives_torchs_statuses_then_the_reasons(
    remote: RemoteSession, small_pt: Path
) -> None:
    """Across the pipe as in-process: torch's statuses first (reasons pending), then the
    same statuses with freezeview's reasons; names explained before come whole."""
    from freezeview.session.explain_turns import reasons_pending

    remote.open()
    first: list[list[Any]] = []
    views = remote.explain(["head"], statuses=first.append)
    assert len(first) == 1 and all(reasons_pending(v) for v in first[0])
    assert [(v.path, v.status) for v in first[0]] == [(v.path, v.status) for v in views]
    assert not any(reasons_pending(v) for v in views)
    assert views == Session(path=small_pt).explain(["head"])
    again: list[list[Any]] = []
    assert remote.explain(["head"], statuses=again.append) == views and again == []


def test_a_cancelled_explain_stops_and_the_session_goes_on(remote: RemoteSession) -> None:
    remote.open()
    cancel = threading.Event()
    views = remote.explain(["head.weight"], statuses=lambda _: cancel.set(), cancel=cancel)
    assert views  # torch's statuses: the reasons are no longer waited for
    # The engine goes on: the next explain is answered (in two parts, or whole if the
    # cancelled replay had ended before the cancel reached it).
    again = remote.explain(["head.weight"])
    assert [v.status for v in again] == [v.status for v in views]
    assert not any(v.reasons and v.reasons[0].code == "pending" for v in again)


def test_steps_come_without_their_graphs_and_unchanged_ones_share_one(
    remote: RemoteSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run sends each step's facts only: its graph crosses when the screen asks for it
    (once: the screen keeps it for the run), and unchanged steps name the same graph."""
    from freezeview.session import remote as remote_module

    sizes: list[int] = []
    receive = remote_module._receive

    def measured(conn):  # type: ignore[no-untyped-def]
        message = receive(conn)
        sizes.append(len(pickle.dumps(message)))
        return message

    monkeypatch.setattr(remote_module, "_receive", measured)
    steps = list(remote.run_steps([], default_passes(remote)))
    remote.read_final_code(timeout=60.0)
    sent = sum(sizes)
    unchanged = [i for i, s in enumerate(steps) if i and not s.changed]
    assert unchanged, "the small model has passes that change nothing"
    for i in unchanged:
        assert steps[i].graph == steps[i - 1].graph
    first = remote.step_graph(steps[0].graph)
    # The whole run's messages weigh less than the one graph asked for.
    assert sent < len(pickle.dumps(first)), (sent, len(pickle.dumps(first)))
    sizes.clear()
    assert remote.step_graph(steps[0].graph) is first
    assert remote.known_graph(steps[0].graph) is first
    assert sizes == []  # asked again: not sent again


def test_render_names_the_steps_graphs_by_key(
    remote: RemoteSession, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    steps = list(remote.run_steps([], default_passes(remote)))
    before, after = steps[0].graph, steps[-1].graph
    asked: list[tuple[Any, ...]] = []
    request = remote._request

    def noting(method: str, *args: Any) -> Any:
        asked.append((method, *args))
        return request(method, *args)

    monkeypatch.setattr(remote, "_request", noting)
    paths = remote.render_step(before, after, tmp_path, "last").paths
    assert asked[-1][:3] == ("render_step", before, after)  # named by key, not pickled back
    assert {p.name for p in paths} == {"last.svg", "last-diff.svg", "last.diff"}
    assert all(p.is_file() and p.stat().st_size for p in paths)
    # A snapshot the engine does not have works too: it travels whole.
    snap = remote.step_graph(after)
    copy = type(snap)(snap.method, snap.block, snap.text, snap.node_count)
    assert remote.render_step(None, copy, tmp_path, "copy").paths[0].name == "copy.svg"
    assert asked[-1][2] is copy  # sent whole
    # A key of an earlier run is no longer kept: the engine says so.
    list(remote.run_steps([], default_passes(remote)))
    with pytest.raises(Exception, match="no longer kept"):
        remote.step_graph(before)


def test_engine_errors_arrive_as_the_same_sentences(
    remote: RemoteSession, tmp_path: Path, small_pt: Path
) -> None:
    text = tmp_path / "notes.pt"
    text.write_text("not a model\n")
    unreadable = RemoteSession(text)
    try:
        with pytest.raises(BadInputError) as remote_error:
            unreadable.open()
    finally:
        unreadable.close()
    with pytest.raises(BadInputError) as local_error:
        Session(path=text).open()
    assert remote_error.value.message == local_error.value.message

    with pytest.raises(PlanError) as remote_plan:
        remote.explain(["no_such_attribute"])
    assert remote.explain([]), "the engine goes on after a plan error"
    with pytest.raises(PlanError) as local_plan:
        Session(path=small_pt).explain(["no_such_attribute"])
    assert remote_plan.value.message == local_plan.value.message


def test_a_cancelled_run_stops_and_the_session_goes_on(remote: RemoteSession) -> None:
    passes = default_passes(remote)
    cancel = threading.Event()
    seen = []
    for step in remote.run_steps([], passes, cancel=cancel):
        seen.append(step)
        cancel.set()
    everything = list(remote.run_steps([], passes))
    assert 1 <= len(seen) < len(everything)
    # A consumer that simply stops iterating cancels the engine's run too.
    steps = remote.run_steps([], passes)
    next(steps)
    steps.close()
    assert not remote._calls
    assert len(list(remote.run_steps([], passes))) == len(everything)


@pytest.mark.parametrize(
    "noticed",
    [
        pytest.param(False, id="at-once"),
        pytest.param(True, marks=pytest.mark.slow, id="after-the-reader-saw-it"),
    ],
)
def test_a_crashed_engine_says_so_and_the_next_call_starts_a_new_one(
    own_remote: RemoteSession, noticed: bool
) -> None:
    """Whether the next call meets the dying process or comes after the reader saw it go
    (it died between calls), that call says why; the one after starts a new engine."""
    import time

    own_remote.open()
    first = own_remote.pid
    assert first is not None
    os.kill(first, signal.SIGKILL)
    for _ in range(200 if noticed else 0):
        if own_remote._conn is None:
            break
        time.sleep(0.01)
    assert own_remote._conn is None or not noticed
    with pytest.raises(EngineError, match="killed by SIGKILL"):
        own_remote.explain([])
    views = own_remote.explain([])
    assert views and own_remote.pid not in (None, first)


def test_close_returns_at_once_while_torch_is_busy(small_pt: Path) -> None:
    remote = RemoteSession(small_pt)
    errors: list[BaseException] = []

    def wait_for_open() -> None:
        try:
            remote.open()
        except BaseException as exc:  # the call must end, one way or the other
            errors.append(exc)

    waiter = threading.Thread(target=wait_for_open)
    waiter.start()
    time.sleep(0.05)  # the engine is importing torch now
    pid = remote.pid
    start = time.perf_counter()
    remote.close()
    took = time.perf_counter() - start
    waiter.join(timeout=5)
    assert took < 0.5
    assert not waiter.is_alive()
    assert pid is not None
    with pytest.raises(ProcessLookupError):
        for _ in range(100):  # reaped by close(): the pid is gone
            os.kill(pid, 0)
            time.sleep(0.01)
    with pytest.raises(EngineError, match="closing"):
        remote.open()


@pytest.mark.slow
def test_the_screen_process_never_imports_torch(small_pt: Path, tmp_path: Path) -> None:
    """Open, explain, step, diff, render and export in the app; torch stays out."""
    code = f"""
import asyncio, sys
from freezeview.ui import FreezeviewApp

async def wait_ready(pilot):  # tests/ui/conftest.py's, which would import torch
    screen = pilot.app.main_screen
    for _ in range(1200):
        await pilot.pause(0.05)
        if not screen.loading_model and screen.run_id and not screen.stepping:
            return

async def main():
    app = FreezeviewApp({str(small_pt)!r}, output_dir={str(tmp_path / "out")!r})
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        await pilot.press("n", "n", "d", "d", "space", "g", "e")
        for _ in range(400):
            await pilot.pause(0.05)
            if app.main_screen.query_one("#status").render().plain.startswith("exported"):
                break
        await pilot.press("q")
    print("torch" in sys.modules, sorted(p.name for p in ({str(tmp_path)!r} and
          __import__("pathlib").Path({str(tmp_path / "out" / "export")!r}).iterdir())))

asyncio.run(main())
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    last = out.stdout.strip().splitlines()[-1]
    assert last.startswith("False"), last
    assert "index.html" in last and "after.svg" in last


def test_the_engine_forwards_warnings_to_the_screen(monkeypatch: pytest.MonkeyPatch) -> None:
    import warnings

    from freezeview.session.engine_process import forward_warnings

    sent: list[tuple[object, ...]] = []
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    forward_warnings(sent.append)
    warnings.warn("torch.jit.freeze is deprecated", DeprecationWarning, stacklevel=1)
    assert sent == [("warning", "DeprecationWarning: torch.jit.freeze is deprecated")]


def test_a_graph_asked_for_twice_at_once_crosses_once(
    remote: RemoteSession, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The IR view and the diff view may ask for one step's graph at the same moment:
    one transfer, both get the same graph."""
    from freezeview.session import remote as remote_module

    steps = list(remote.run_steps([], default_passes(remote)))
    loads: list[int] = []
    load = remote_module.load_in_slices

    def counting(slices, **kwargs):  # type: ignore[no-untyped-def]
        loads.append(len(slices))
        time.sleep(0.2)  # the second asker arrives meanwhile
        return load(slices, **kwargs)

    monkeypatch.setattr(remote_module, "load_in_slices", counting)
    got: list[object] = []
    askers = [
        threading.Thread(target=lambda: got.append(remote.step_graph(steps[-1].graph)))
        for _ in range(2)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(30)
    assert len(loads) == 1 and len(got) == 2 and got[0] is got[1]
