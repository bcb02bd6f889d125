"""The graph view as it opens: the selected box whole in view and no box cut by the
window's left edge, no search of another step on the status line, and frame labels that
no edge runs through."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from freezeview.engine.draw.terminal.values import ClusterLayout, EdgeLayout, GraphLayout
from freezeview.session.canvas import Canvas
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.widgets.graph_view import GraphView
from freezeview.ui.widgets.status_line import StatusLine

from .conftest import wait_ready


def _layout(edge_x: tuple[int, ...], width: int = 30) -> GraphLayout:
    frame = ClusterLayout("block", "scope", "same", x=0, y=2, w=width, h=6, depth=1)
    edges = tuple(EdgeLayout("a", "b", tuple((x, y) for y in range(0, 9))) for x in edge_x)
    return GraphLayout(
        width=width + 2, height=10, boxes={}, edges=edges, clusters=(frame,), level=None,
        levels=(None,),
    )  # fmt: skip


def test_a_frame_label_moves_off_the_edges_that_cross_its_line() -> None:
    # An edge through the label's usual place: the label moves right, whole, and the
    # edge stays drawn through the frame's line.
    row = Canvas(_layout((4,))).row_text(2)
    assert " block " in row
    assert row[4] == "┼" or row[4] in "│┆"
    assert row.index(" block ") > 4


def test_a_frame_label_crossed_everywhere_is_drawn_whole() -> None:
    row = Canvas(_layout(tuple(range(2, 12)), width=12)).row_text(2)
    assert " block " in row


def _app(path: Path, tmp_path: Path) -> FreezeviewApp:
    return FreezeviewApp(
        path, output_dir=tmp_path / "out", show_timings=False, session=Session(path=path)
    )


async def _ready(pilot, view: GraphView) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline and not view.ready:
        await pilot.pause(0.02)
    await pilot.pause(0.1)


def _cut_at_left(view: GraphView) -> list[str]:
    canvas = view.canvas_view
    x, y = canvas.scroll_offset
    h = canvas.size.height
    layout = view.layout_shown
    assert layout is not None
    return [
        b.lines[0]
        for b in layout.boxes.values()
        if b.x < x < b.x + b.w and b.y < y + h and y < b.y + b.h
    ]


async def _until(pilot, done, what: str) -> None:  # type: ignore[no-untyped-def]
    """Let the app work until ``done()`` holds; fail saying ``what`` did not happen."""
    deadline = time.monotonic() + 30
    while not done():
        assert time.monotonic() < deadline, what
        await pilot.pause(0.02)
    await pilot.pause()  # what the drawing asked for after a refresh (the centring) runs


def _assert_whole(view: GraphView, key: str, size: tuple[int, int]) -> None:
    """The selected box whole in the window, and no box cut by the window's left edge."""
    box = view.selected
    canvas = view.canvas_view
    x = canvas.scroll_offset.x
    w = canvas.size.width
    if box is not None and box.w <= w:
        assert x <= box.x and box.x + box.w <= x + w, (size, key, box.lines, x, w)
    if box is not None and box.w <= w // 2:
        assert not _cut_at_left(view), (size, key, _cut_at_left(view))


@pytest.mark.asyncio
@pytest.mark.slow  # seconds of layouts: the fast set keeps its budget
async def test_it_opens_on_a_whole_box(small_pt: Path, tmp_path: Path) -> None:
    # One app, three terminal sizes: at each, a step ahead with the graph hidden, the
    # graph opened on it (the canvas has no size yet when it is asked to centre), the
    # next step, then the graph hidden again and the steps back where they began.
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        view = screen.graph_view
        start = screen.current_step
        for size in ((160, 48), (100, 30), (80, 24)):
            await pilot.resize_terminal(*size)
            await _until(pilot, lambda s=size: app.size == s, f"no resize to {size}")
            await pilot.press("n")
            await _until(pilot, lambda: screen.current_step == start + 1, "n moved no step")
            for key in ("v", "n"):
                await pilot.press(key)
                await _until(pilot, lambda: view.ready, f"{size}: no graph after {key}")
                _assert_whole(view, key, size)
            await pilot.press("v", "p", "p")
            await _until(
                pilot,
                lambda: not view.display and screen.current_step == start,
                f"{size}: the graph stayed open or the steps did not go back",
            )


@pytest.mark.asyncio
async def test_another_step_forgets_the_search(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        view = app.main_screen.graph_view
        await pilot.press("v")
        await _ready(pilot, view)
        await pilot.press("slash", "c", "o", "n", "v")
        await pilot.pause(0.1)
        status = app.main_screen.query_one(StatusLine)
        assert "matching boxes" in str(status.render())
        await pilot.press("escape", "n")
        await _ready(pilot, view)
        assert "matching boxes" not in str(status.render())
        assert view.query_one("#graph-search").value == ""  # type: ignore[attr-defined]
