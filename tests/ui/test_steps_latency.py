"""The steps bar's latency column and the run's verdict (ui/widgets/steps_bar.py,
ui/session.py), driven through the real app with Pilot.

With sample inputs every step that changed the graph is timed; the column appears, the
rows of changed steps carry a figure, unchanged ones ``-``, and the title ends with the
verdict once the run is over. Without inputs there is no column at all. Structure only,
never speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.ui import FreezeviewApp
from freezeview.ui.session import Session

from .conftest import wait_ready

pytestmark = pytest.mark.asyncio

SIZE = (200, 48)


def _app(path: Path, tmp_path: Path, shapes: list[str]) -> FreezeviewApp:
    session = Session(path=path, input_shapes=shapes, time_budget=0.01)
    return FreezeviewApp(path, output_dir=tmp_path / "out", session=session, input_shapes=shapes)


async def test_latency_column_and_verdict_with_inputs(small_pt: Path, tmp_path: Path) -> None:
    # tests/ui/models.py's Small: a 3-channel conv block (its buffer written in forward
    # is put back after every timed block).
    app = _app(small_pt, tmp_path, ["1,3,8,8"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        table = screen.steps_bar.timeline
        for run in range(2):  # the first run, then a re-run into the last run's rows
            if run:
                await pilot.press("r")
                await wait_ready(pilot, timeout=60)
            assert "latency" in table.columns and table.row_count == len(screen.steps)
            for index, step in enumerate(screen.steps):
                cell = str(table.get_cell(str(step.index), "latency"))
                assert cell == (step.latency or "-"), step.name
                # A re-run shows the last run's inline and fold steps again, their graphs
                # released: the timing they had stands.
                assert ("ms" in cell) == step.changed, (run, step.name)
            title = str(screen.query_one("#timeline-title").render())
            assert screen.steps[-1].verdict.startswith("frozen forward")
            assert screen.steps[-1].verdict in title


async def test_no_latency_column_without_inputs(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path, [])
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert "latency" not in screen.steps_bar.timeline.columns
        assert all(step.latency == "" and step.verdict == "" for step in screen.steps)
