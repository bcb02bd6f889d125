"""Keys pressed while workers run leave the app consistent: the step shown is the step
highlighted in the timeline, and its IR is that step's graph (issue 6, "state under
pressure")."""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.ui.widgets.ir_view import display_text

from .conftest import step_graph, wait_ready
from .test_app import SIZE, app_for, ir_text

pytestmark = pytest.mark.asyncio


def _assert_consistent(screen) -> None:  # type: ignore[no-untyped-def]
    assert screen.steps, "the run produced steps"
    current = screen.current_step
    assert 0 <= current < len(screen.steps)
    assert screen.steps_bar.timeline.cursor_row == current
    if screen.view_mode == "ir":
        assert ir_text(screen) == display_text(step_graph(screen, current).text).rstrip("\n")


@pytest.mark.slow
async def test_n_n_n_while_loading_lands_on_a_real_step(small_pt: Path, tmp_path: Path) -> None:
    # Through the engine process: loading there takes a torch import, a wide window.
    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        # Before the model has even loaded: the presses must neither crash nor leave the
        # timeline and the IR pane disagreeing.
        await pilot.press("n", "n", "n", "p", "n")
        await wait_ready(pilot)
        await pilot.pause(0.2)
        _assert_consistent(app.main_screen)
        await pilot.press("n", "n")
        await pilot.pause(0.2)
        _assert_consistent(app.main_screen)


@pytest.mark.slow
async def test_toggles_and_reruns_during_a_run(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        passes = screen.steps_bar.passes
        passes.focus()
        passes.highlighted = 2
        # Re-run, then toggle a pass, re-run again and step, all while the first re-run
        # is still computing.
        await pilot.press("r", "t", "r", "n", "n", "t", "r", "n")
        await wait_ready(pilot)
        await pilot.pause(0.2)
        _assert_consistent(screen)
        # The steps shown are the plan's: the twice-toggled pass is back on.
        assert not screen.stale
        enabled = set(screen.enabled_passes())
        ran = {s.name for s in screen.steps}
        freeze_phase = {"inline", "fold_attributes", "cleanup"}
        assert {p for p in ran if p in enabled or p in freeze_phase} == ran


async def test_q_during_load_quits(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("n", "space", "q")
        await pilot.pause()
    assert app.return_code == 0
