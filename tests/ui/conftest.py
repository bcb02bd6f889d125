"""Fixtures for the app's tests: a small saved model and a stable terminal."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from textual.widgets import Input

from .models import save_small


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    """Wait for the threads a test started (the app's thread workers) before the next test.

    An app run in-process leaves its thread workers to finish after ``run_test`` returns;
    one still highlighting IR would call ``gc.freeze()`` in the middle of a later test on
    the same worker (tests of the collector count frozen objects).
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 30
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not left, f"threads still running after the test: {left}"


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop the search box's cursor blinking so snapshots are stable."""
    monkeypatch.setattr(Input, "cursor_blink", False)
    yield


@pytest.fixture(scope="session")
def small_pt() -> Iterator[Path]:
    """``Small`` scripted in eval mode and saved (built once per test session).

    Kept outside pytest's rotating temp root: parallel pytest runs prune each other's
    old base directories, which would delete the model under a running app.
    """
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="freezeview-ui-"))
    yield save_small(folder / "small.pt")
    shutil.rmtree(folder, ignore_errors=True)


async def wait_ready(pilot, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the model is loaded, explained and every step has arrived."""
    import time

    screen = pilot.app.main_screen
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        failed = screen.has_class("-failed")
        settled = (
            not screen.loading_model
            and screen.run_id > 0
            and not screen.stepping
            and not screen._explaining
        )
        if failed or settled:
            await pilot.pause()
            return
    raise AssertionError(
        "the app did not settle in time: "
        f"{screen.loading_model=} {screen.run_id=} {screen.stepping=} {screen._explaining=}"
    )
