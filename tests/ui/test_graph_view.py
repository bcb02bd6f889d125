"""The graph view (``v``): the step's graph or diff drawn in the terminal.

Pilot tests drive the real app on the small model (and a corpus case) and assert on
what the canvas holds: every box's label, the diff colours, the selection reaching the
inspector and the IR pane, an IR line centring its box, panning and zooming.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from freezeview.session.canvas import BOX_ADDED, BOX_CHANGED, BOX_REMOVED
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.widgets.graph_view import GraphView

from .conftest import step_graph, wait_ready

pytestmark = pytest.mark.asyncio

SIZE = (160, 48)


def app_for(path: Path, tmp_path: Path) -> FreezeviewApp:
    return FreezeviewApp(
        path, output_dir=tmp_path / "out", show_timings=False, session=Session(path=path)
    )


async def wait_graph(pilot, timeout: float = 30.0) -> GraphView:  # type: ignore[no-untyped-def]
    """Wait until the graph view shows a laid-out graph."""
    view = pilot.app.main_screen.graph_view
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if view.ready:
            await pilot.pause()
            return view
    raise AssertionError("the graph view did not show a layout in time")


def canvas_text(view: GraphView) -> str:
    assert view.drawn is not None and view.drawn.canvas is not None
    return view.drawn.canvas.text()


def window_text(view: GraphView) -> str:
    """What the graph view's canvas shows on screen now, as plain text."""
    canvas = view.canvas_view
    return "\n".join(canvas.render_line(y).text for y in range(canvas.size.height))


async def test_v_opens_the_graph_with_every_box_label(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("v")
        view = await wait_graph(pilot)
        assert screen.graph_shown and view.display
        assert view.canvas_view.has_focus
        layout = view.drawn.layout  # type: ignore[union-attr]
        text = canvas_text(view)
        for box in layout.boxes.values():
            for line in box.lines:
                assert line in text, f"{line!r} is not drawn"
        assert "step 0 · inline calls" in str(view.query_one("#graph-title").render())
        # v again hides it; the IR pane has the keys.
        await pilot.press("v")
        assert not screen.graph_shown and not view.display


async def test_diff_colours_and_following_n(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("v", "n")  # step 2: attributes folded into constants
        view = await wait_graph(pilot)
        assert view.index == 1 and screen.current_step == 1
        layout = view.drawn.layout  # type: ignore[union-attr]
        assert layout.diff
        canvas = view.drawn.canvas  # type: ignore[union-attr]
        assert canvas is not None
        codes = {c for row in canvas.styles for c in row}
        assert BOX_REMOVED in codes  # ghosts of the attribute reads
        assert codes & {BOX_ADDED, BOX_CHANGED}
        ghosts = [b for b in layout.boxes.values() if b.role == "ghost"]
        assert ghosts and all(b.status == "removed" for b in ghosts)
        # The title is one line that fits its pane: the box count and the colour legend.
        title = view.query_one("#graph-title")
        shown = str(title.render())
        assert len(shown) <= title.content_size.width, shown
        assert "boxes" in shown and shown.rstrip().endswith(("-removed", "-rem", "+~-")), shown
        # d: the step's graph alone, no ghosts.
        await pilot.press("d")
        view = await wait_graph(pilot)
        assert not view.drawn.layout.diff  # type: ignore[union-attr]
        assert not any(b.role == "ghost" for b in view.drawn.layout.boxes.values())  # type: ignore[union-attr]


@pytest.mark.slow
async def test_selecting_a_box_updates_inspector_and_ir(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("d")  # the graph alone
        view = await wait_graph(pilot)
        await pilot.press("slash")
        await pilot.press(*"add_")
        await pilot.press("enter", "escape")
        await pilot.pause()
        box = view.selected
        assert box is not None and box.lines[0] == "add_"
        inspector = screen.inspector.plain_text()
        assert "aten::add_" in inspector
        # The IR pane's cursor is on that node's line.
        line = screen.ir.plain_lines()[screen.ir.cursor_line]
        assert "aten::add_" in line
        # ] selects the next box in reading order, and the inspector follows.
        await pilot.press("right_square_bracket")
        await pilot.pause()
        assert view.selected is not None and view.selected != box


async def test_an_ir_line_centres_its_box(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("d")
        view = await wait_graph(pilot)
        screen.ir.focus()
        await pilot.pause()
        lines = screen.ir.plain_lines()
        target = next(i for i, x in enumerate(lines) if "aten::linear" in x)
        screen.ir.cursor_line = target
        await pilot.pause()
        assert view.selected is not None and view.selected.lines[0] == "linear"


@pytest.mark.slow
async def test_panning_moves_the_canvas_and_zoom_changes_level(
    small_pt: Path, tmp_path: Path
) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = await wait_graph(pilot)
        canvas = view.canvas_view
        canvas.scroll_to(x=0, y=0, animate=False)
        await pilot.pause()
        before = window_text(view)
        await pilot.press("j", "j", "l")
        await pilot.pause()
        assert (canvas.scroll_x, canvas.scroll_y) == (4, 4)
        assert window_text(view) != before
        await pilot.press("h", "k", "k")
        await pilot.pause()
        assert (canvas.scroll_x, canvas.scroll_y) == (0, 0)
        layout = view.drawn.layout  # type: ignore[union-attr]
        assert layout.level is None  # the small model fits at every op
        await pilot.press("minus")
        view = await wait_graph(pilot)
        coarser = view.drawn.layout  # type: ignore[union-attr]
        assert coarser.level is not None
        assert any(b.role == "scope" for b in coarser.boxes.values())
        # Enter on a module box opens it.
        scope = next(b for b in coarser.boxes.values() if b.role == "scope")
        view.select_box(scope)
        await pilot.press("enter")
        view = await wait_graph(pilot)
        assert scope.scope in view.opened
        assert not any(
            b.role == "scope" and b.scope == scope.scope
            for b in view.drawn.layout.boxes.values()  # type: ignore[union-attr]
        )


@pytest.mark.parametrize("case", ["tiny_resnet", "control_flow", "dynamic_quantized_linear"])
@pytest.mark.slow
async def test_corpus_model_graph(case: str, tmp_path: Path) -> None:
    from corpus import CASES

    cases = {c.name: c for c in CASES}
    if case not in cases:
        pytest.skip(f"no corpus case {case}")
    import torch

    module = cases[case].build()
    path = tmp_path / f"{case}.pt"
    torch.jit.save(module, str(path))
    app = app_for(path, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = await wait_graph(pilot)
        for box in view.drawn.layout.boxes.values():  # type: ignore[union-attr]
            assert box.lines[0] in canvas_text(view)


@pytest.mark.slow
async def test_pictures_only_where_the_terminal_shows_them(small_pt: Path, tmp_path: Path) -> None:
    """No protocol (tmux, xterm, tests): i says so and the characters stay; with one,
    i shows Graphviz's PNG of the same view in a textual-image widget."""
    pytest.importorskip("textual_image")
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("i")
        await pilot.pause()
        assert not view.has_class("-picture")
        assert "shows no pictures" in str(app.main_screen.query_one("#status").render())
    app = app_for(small_pt, tmp_path)
    app.graphics = "kitty"
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("i")
        deadline = time.monotonic() + 30
        while not view.query("#graph-image") and time.monotonic() < deadline:
            await pilot.pause(0.05)
        images = view.query("#graph-image")
        assert images and view.has_class("-picture")
        assert str(images.first().image).endswith(".png")  # type: ignore[attr-defined]
        assert not view.canvas_view.display
        await pilot.press("i")
        assert not view.has_class("-picture")


async def test_detect_graphics_asks_no_terminal_in_tmux_or_pipes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from freezeview.ui.graphics import detect_graphics

    monkeypatch.setenv("FREEZEVIEW_GRAPHICS", "sixel")
    assert detect_graphics() == "sixel"
    monkeypatch.setenv("FREEZEVIEW_GRAPHICS", "off")
    assert detect_graphics() is None
    monkeypatch.delenv("FREEZEVIEW_GRAPHICS")
    assert detect_graphics() is None  # pytest's standard streams are not a terminal


@pytest.mark.parametrize("size", [(30, 12), SIZE])
@pytest.mark.slow
async def test_zoom_to_a_kept_level_lays_no_pane_out_again(
    size: tuple[int, int], small_pt: Path, tmp_path: Path
) -> None:
    """Zooming back to a level already drawn changes the canvas's scroll range and its
    rows only: the screen is not laid out again and no widget is mounted (a layout of
    the whole screen cost 0.1-0.2 s a zoom with a big model's IR beside the graph)."""
    app = app_for(small_pt, tmp_path)
    # The scrollbars are always there (one appearing would lay the screen out).
    async with app.run_test(size=size) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("minus")
        view = await wait_graph(pilot)
        coarse = view.drawn.layout  # type: ignore[union-attr]
        await pilot.press("plus")
        view = await wait_graph(pilot)
        assert view.drawn.layout is not coarse  # type: ignore[union-attr]
        screen = app.main_screen
        layouts: list[object] = []
        reflow = screen._refresh_layout

        def counted(*args: object, **kwargs: object) -> None:
            layouts.append(args)
            reflow(*args, **kwargs)  # type: ignore[arg-type]

        screen._refresh_layout = counted  # type: ignore[method-assign]
        widgets = len(list(screen.walk_children()))
        await pilot.press("minus")  # back to the coarser level: kept, no dot
        assert view.drawn.layout is coarse  # type: ignore[union-attr]
        await pilot.pause(0.1)
        assert view.canvas_view.virtual_size == (coarse.width, coarse.height)
        assert window_text(view).strip()  # its rows are drawn
        assert layouts == []
        # Nothing to scroll, then a canvas bigger than the pane: the scrollbars stay.
        drawn = view.drawn.canvas  # type: ignore[union-attr]
        view.canvas_view.show_canvas(None, "laying out")
        await pilot.pause()
        view.canvas_view.show_canvas(drawn)
        await pilot.pause()
        assert layouts == []
        assert len(list(screen.walk_children())) == widgets


class _HeldSession(Session):
    """A session whose graph layouts wait until the test lets them go, and are counted."""

    def __init__(self, path: Path) -> None:
        super().__init__(path=path)
        self.asked: list[object] = []
        self.go = threading.Event()

    def graph_canvas(self, before, after, *args, **kwargs):  # type: ignore[no-untyped-def]
        self.asked.append(after)
        self.go.wait(30)
        return super().graph_canvas(before, after, *args, **kwargs)


async def test_hidden_it_lays_nothing_out(small_pt: Path, tmp_path: Path) -> None:
    """While the graph view is hidden, stepping asks the engine for no layout (seconds
    of its time per step on a big graph); v asks for the step shown, once."""
    session = _HeldSession(small_pt)
    session.go.set()
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", show_timings=False, session=session)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("n", "n", "p")
        await pilot.pause(0.2)
        assert session.asked == []
        await pilot.press("v")
        await wait_graph(pilot)
        # By key: the engine has the step's graph, the screen need not.
        assert session.asked == [screen.steps[screen.current_step].graph]


@pytest.mark.slow
async def test_resnet50_module_level_fits_the_pane(tmp_path: Path) -> None:
    """At 160x48 the frozen ResNet-50's top module level is one screen: the canvas is
    no bigger than the graph pane, and every box's label is drawn."""
    import torch
    from render_models import resnet50_scripted

    path = tmp_path / "resnet50.pt"
    torch.jit.save(resnet50_scripted(), str(path))
    app = app_for(path, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=120)
        screen = app.main_screen
        while screen.current_step < len(screen.steps) - 1:
            await pilot.press("n")
        await pilot.press("v")
        view = await wait_graph(pilot, timeout=60)
        while view.drawn.layout.level != 1:  # type: ignore[union-attr]
            await pilot.press("minus")
            view = await wait_graph(pilot, timeout=60)
        layout = view.drawn.layout  # type: ignore[union-attr]
        pane = view.canvas_view.size
        fits = layout.width <= pane.width and layout.height <= pane.height
        assert fits, f"canvas {layout.width}x{layout.height}, pane {pane.width}x{pane.height}"
        text = window_text(view)
        for box in layout.boxes.values():
            assert box.lines[0] in text


async def test_v_lays_the_screen_out_before_moving_the_focus(
    small_pt: Path, tmp_path: Path
) -> None:
    """``v``'s first frame is the screen laid out with the graph pane alone: the focus
    moves to the canvas after it, since the focus restyles the panes and rebuilds the
    footer (the graph's keys), each a frame's worth of work of its own (together, on a
    big model's screen, one stall of 0.14 s)."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        events: list[str] = []
        reflow, restyle = screen._refresh_layout, screen._update_focus_styles

        def laid_out(*args: object, **kwargs: object) -> None:
            events.append("layout")
            reflow(*args, **kwargs)  # type: ignore[arg-type]

        def focused(*args: object, **kwargs: object) -> None:
            events.append("focus")
            restyle(*args, **kwargs)  # type: ignore[arg-type]

        screen._refresh_layout = laid_out  # type: ignore[method-assign]
        screen._update_focus_styles = focused  # type: ignore[method-assign]
        await pilot.press("v")
        await wait_graph(pilot)
        assert screen.focused is screen.graph_view.canvas_view
        assert "focus" in events and events[0] == "layout", events
        # The view on screen from the first frame, and its keys work once focused.
        await pilot.press("v")
        await pilot.pause()
        assert not screen.graph_view.display and screen.focused is screen.ir


async def test_a_removed_op_is_described_from_the_step_before(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A ghost's ids are the step before's: looked up in the step's own graph they name
    # another node, or none (a KeyError ended the app).
    from freezeview.ui.screens import main

    seen: list[tuple[object, object, int | None]] = []
    panel = main.selection_panel

    def recording(box, snapshot, node_id, views, inventory):  # type: ignore[no-untyped-def]
        seen.append((box, snapshot, node_id))
        return panel(box, snapshot, node_id, views, inventory)

    monkeypatch.setattr(main, "selection_panel", recording)
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("n", "v")
        view = await wait_graph(pilot)
        await pilot.press("plus", "plus", "plus")
        view = await wait_graph(pilot)
        layout = view.layout_shown
        assert layout is not None
        ghosts = [b for b in layout.boxes.values() if b.role == "ghost"]
        assert ghosts, "the fold step's diff draws the attributes it removed"
        before = step_graph(screen, screen.current_step - 1)
        after = step_graph(screen, screen.current_step)
        for ghost in ghosts:
            seen.clear()
            view.select_box(ghost)
            for _ in range(100):
                await pilot.pause(0.02)
                if seen:
                    break
            _, snapshot, node_id = seen[-1]
            assert snapshot is not None and node_id is not None
            assert snapshot.node(node_id).kind == before.node(node_id).kind
            assert len(snapshot.nodes_in_order()) == len(before.nodes_in_order())
            # Nor does the drawn graph's node of the same id find the ghost's box.
            mine = layout.box_of(node_id)
            if node_id < len(after.nodes_in_order()):
                assert mine is None or mine.role != "ghost"
        # Enter on a ghost: nothing to open, said as what it is.
        view.canvas_view.focus()
        await pilot.press("enter")
        await pilot.pause(0.1)
        status = str(screen.query_one("#status").render())
        assert "is a removed op: nothing to open" in status, status
