"""The screen's memory stays put across re-runs (issue 23): what a run showed goes when a
re-run replaces it, however often the user presses ``r`` or toggles the plan."""

from __future__ import annotations

import gc
import sys
from pathlib import Path

import pytest

from freezeview.engine.diff import diff as diff_module
from freezeview.engine.draw import view_prepared

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio

RERUNS = 6


@pytest.mark.slow
async def test_reruns_free_the_earlier_runs(small_pt: Path, tmp_path: Path) -> None:
    """Each run's steps are seen in every view mode, then re-run: earlier runs' step
    graphs must be freed and the IR pane's documents must not pile up."""
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
            documents.append(len(pane._doc_cache))
            earlier.update((id(step.snapshot), step.snapshot) for step in screen.steps)
            await pilot.press("space" if run % 2 else "r")  # a toggled plan re-runs too
            if run % 2:
                await pilot.press("r")
            await wait_ready(pilot)
        await pilot.pause(0.2)
        current = {id(step.snapshot) for step in screen.steps}
        # The engine's diff and drawing caches keep the last few dozen snapshots they
        # saw, by design (bounded): this test is about what the app holds.
        diff_module._side_cache.clear()
        diff_module._diff_cache.clear()
        view_prepared._prepared_cache.clear()
        # What only garbage cycles hold goes at the next run's start (the app unfreezes
        # and collects there): here, now. Nothing live may still reach an earlier run.
        gc.unfreeze()
        gc.collect()
        # Held by ``earlier`` only, or by the app too? (An object nobody else holds,
        # counted the same way, says how many references the counting itself makes.)
        earlier[0] = object()
        counts = {i: sys.getrefcount(s) for i, s in earlier.items()}
        held = [i for i, n in counts.items() if i not in current and n > counts[0]]
        assert not held, f"{len(held)} step graphs of earlier runs are still held"
        assert max(documents) == documents[0], documents
