"""Snapshot tests of the graph view (``v``), at 160x48 and at 80x24.

Regenerate after an intended change with
``pytest tests/ui/test_graph_snapshots.py --snapshot-update`` and look at the report.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import wait_ready
from .test_graph_view import wait_graph
from .test_snapshots import make_app


@pytest.fixture
def small_here(small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small model opened by a relative path (no temporary path on screen)."""
    monkeypatch.chdir(tmp_path)
    target = Path("small.pt")
    target.write_bytes(small_pt.read_bytes())
    return target


def test_graph_view_diff_wide(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """160x48, step 2 (fold_attributes) as a diff: the graph view in the model pane's
    place, attribute reads as red dashed ghosts, the constants that replaced them green
    or amber, kept `calls` with a heavy purple frame; the first change is selected
    (accent frame) and the inspector shows it."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_ready(pilot)
        await pilot.press("v", "n")
        await wait_graph(pilot)
        await pilot.pause(0.1)

    assert snap_compare(make_app(small_here), terminal_size=(160, 48), run_before=run_before)


def test_graph_view_narrow(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """80x24: the graph view alone under the tabs, the top of the inlined graph
    (conv2d, batch_norm), one box per op; the footer shows the view's keys."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_ready(pilot)
        await pilot.press("v")
        await wait_graph(pilot)
        await pilot.pause(0.1)

    assert snap_compare(make_app(small_here), terminal_size=(80, 24), run_before=run_before)
