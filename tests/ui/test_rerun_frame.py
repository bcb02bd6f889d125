"""The ``r`` key's frame: a re-run's start redraws what changed, not the whole screen.

Textual lays out and draws the whole screen again when a reactive of the screen changes
or a widget changes size. On ``r`` both happened: the screen's ``stepping`` flag was a
reactive, and the steps table was emptied (50-110 ms of the key at 48 layers). Now the
last run's rows wait, pending, for the new run's steps to take their places. Nor does
the key count the frozen objects (a walk of them all, 25 ms on a big model's screen):
the run's end does.
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest

from freezeview.session import collector
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.screens.main import MainScreen
from freezeview.ui.widgets.status_line import StatusLine

from .conftest import GatedSession, wait_ready
from .test_app import SIZE
from .test_collector import count_walks

pytestmark = pytest.mark.asyncio


async def test_a_reruns_start_keeps_the_timelines_size_and_the_screen_whole(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    session = GatedSession(small_pt)
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=session)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        bar = screen.steps_bar
        table = bar.timeline
        rows = table.row_count
        assert rows == len(screen.steps) > session.hold + 1
        size = table.virtual_size
        whole: list[int] = []
        refresh = MainScreen.refresh

        def counting(self: MainScreen, *regions: Any, **kwargs: Any) -> Any:
            if not regions:
                whole.append(1)
            return refresh(self, *regions, **kwargs)

        monkeypatch.setattr(MainScreen, "refresh", counting)
        walks = count_walks(monkeypatch)
        session.gate = threading.Event()
        try:
            await pilot.press("r")
            for _ in range(200):
                await pilot.pause(0.02)
                if bar.step_count == session.hold:
                    break
            await pilot.pause(0.1)
            assert bar.step_count == session.hold and screen.stepping
            assert table.row_count == rows and table.virtual_size == size
            pending = [table.get_row_at(i)[1].plain for i in range(rows)]
            assert "…" not in pending[: session.hold]
            assert pending[session.hold :] == ["…"] * (rows - session.hold)
            assert whole == []  # the screen was not redrawn whole
            assert walks == []  # nor the frozen objects counted
            # n goes as far as the steps that arrived, never onto a pending row.
            screen.ir.focus()
            for _ in range(session.hold + 2):
                await pilot.press("n")
            assert bar.current_step == session.hold or bar.current_step == session.hold - 1
            assert table.cursor_row == bar.current_step
        finally:
            session.gate.set()
        await wait_ready(pilot)
        assert table.row_count == rows and bar.step_count == rows
        assert [table.get_row_at(i)[1].plain for i in range(rows)] == [
            s.title + ("" if s.changed else " (no change)") for s in screen.steps
        ]
        # A run with fewer steps: the rows no step took go when it ends.
        session.gate, session.limit = None, 3
        await pilot.press("r")
        await wait_ready(pilot)
        assert table.row_count == bar.step_count == len(screen.steps) == 3
        assert [table.get_row_at(i)[0].plain for i in range(3)] == ["0", "1", "2"]
        monkeypatch.undo()
    # Counted once at each run's end, for the next run's start to decide from.
    assert len(walks) == 2 and all("note_run_end" in w for w in walks), walks


class LettingGoSession(Session):
    """An in-process session that, like the engine process's, has the last run's graphs
    let go of before a run starts: the run then starts from the let-go thread."""

    def forget_runs(self) -> list[Any]:
        return []


@pytest.mark.parametrize("kind", [Session, LettingGoSession], ids=["on-the-key", "let-go"])
async def test_a_run_that_cannot_start_says_so_and_the_next_r_runs(
    kind: type[Session], small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No worker started, so none says the run ended: the screen says it failed (not
    "running…" for good, nor the app gone), and the next ``r`` runs."""
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=kind(path=small_pt))
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        steps = len(screen.steps)

        def broken(*args: Any, **kwargs: Any) -> float:
            raise ValueError("the collector broke")

        monkeypatch.setattr(collector, "deep_sweep_if_due", broken)
        await pilot.press("r")
        for _ in range(200):
            await pilot.pause(0.02)
            if not screen.stepping:
                break
        assert not screen.stepping
        status = str(screen.query_one(StatusLine).render())
        assert "steps failed" in status and "the collector broke" in status, status
        monkeypatch.undo()
        await pilot.press("r")
        await wait_ready(pilot)
        assert len(screen.steps) == steps and not screen.stepping
        assert "steps failed" not in str(screen.query_one(StatusLine).render())
