"""The app's engine process (``RemoteSession``) against the in-process ``Session``.

The same calls on the same model must give the same answers whichever side of the
process boundary the torch work runs; on top of that the engine process must survive
what a thread could not: being told to stop mid-work, and torch crashing.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from freezeview.engine.plumbing.errors import BadInputError, PlanError
from freezeview.ui.remote_session import EngineError, RemoteSession
from freezeview.ui.session import Session


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
    assert [s.snapshot.text for s in got] == [s.snapshot.text for s in want]
    assert [s.snapshot for s in got] == [s.snapshot for s in want]
    assert remote.wait_final_code() == local.final_code and remote.final_code


def test_unchanged_steps_share_one_snapshot_and_are_not_sent_twice(
    remote: RemoteSession,
) -> None:
    steps = list(remote.run_steps([], default_passes(remote)))
    unchanged = [i for i, s in enumerate(steps) if i and not s.changed]
    assert unchanged, "the small model has passes that change nothing"
    for i in unchanged:
        assert steps[i].snapshot is steps[i - 1].snapshot


def test_render_names_snapshots_the_engine_already_has(
    remote: RemoteSession, tmp_path: Path
) -> None:
    steps = list(remote.run_steps([], default_passes(remote)))
    before, after = steps[0].snapshot, steps[-1].snapshot
    assert remote._ref(after)[0] == "key"  # sent as a key, not pickled back
    paths = remote.render_step(before, after, tmp_path, "last")
    assert {p.name for p in paths} == {"last.svg", "last-diff.svg", "last.diff"}
    assert all(p.is_file() and p.stat().st_size for p in paths)
    # A snapshot the engine never sent still works: it travels whole.
    copy = type(after)(after.method, after.block, after.text, after.node_count)
    assert remote._ref(copy)[0] == "value"
    assert remote.render_step(None, copy, tmp_path, "copy")[0].name == "copy.svg"


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

    from freezeview.ui.engine_process import forward_warnings

    sent: list[tuple[object, ...]] = []
    monkeypatch.setattr(warnings, "showwarning", warnings.showwarning)
    monkeypatch.setattr(warnings, "filters", list(warnings.filters))
    forward_warnings(sent.append)
    warnings.warn("torch.jit.freeze is deprecated", DeprecationWarning, stacklevel=1)
    assert sent == [("warning", "DeprecationWarning: torch.jit.freeze is deprecated")]
