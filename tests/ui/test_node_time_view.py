"""Time per node and where the numbers move, in the app (issue #41's app side).

``%`` in the graph view runs the plan again with each node timed and fills every box by
its share of the forward's time (a module box adds up its ops); the inspector gives a
node's time against the unfrozen module's; enter on a step whose numerics cell names a
node puts the IR cursor and the graph view's selection on it. Driven through the real
app with Pilot.

torch is the oracle for the node named: it is the first node torch itself shows to
differ when each matched value is compared (tests/engine/measure/test_value_bisect.py's
``torch_first_difference``). The times themselves are checked against Static Runtime in
tests/engine/measure/test_node_time.py; here the app must paint and say the times the
session measured, box by box.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest
import torch
from engine.measure.test_value_bisect import _key_of, conv_bn_half, torch_first_difference

from freezeview.session import HEAT_SCALE, SessionOptions, heat_band
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

from .conftest import wait_ready
from .test_graph_view import wait_graph

pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

SIZE = (160, 48)


@pytest.fixture(scope="module")
def conv_bn(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The half-precision conv-bn whose fold moves the outputs past tolerance, saved
    with its sample input."""
    folder = tmp_path_factory.mktemp("node-time")
    model = conv_bn_half()
    model.save(str(folder / "m.pt"))
    torch.manual_seed(1)
    torch.save((torch.randn(1, 3, 16, 16).half(),), folder / "inputs.pt")
    return folder / "m.pt", folder / "inputs.pt"


def _app(path: Path, tmp_path: Path, inputs: Path | None) -> FreezeviewApp:
    options = SessionOptions(inputs_file=inputs, time_budget=0.01)
    session = Session(path=path, options=options)
    return FreezeviewApp(
        path, options=options, output_dir=tmp_path / "out", show_timings=False, session=session
    )


async def _until(pilot, done, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, "the app did not get there in time"
        await pilot.pause(0.02)


async def test_heat_fills_boxes_by_their_time(conv_bn: tuple[Path, Path], tmp_path: Path) -> None:
    path, inputs = conv_bn
    app = _app(path, tmp_path, inputs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        assert not any(s.timed_nodes for s in screen.steps)  # nothing timed unasked
        first_run = screen.run_id
        at = next(s for s in screen.steps if s.name == "fold_conv_bn" and s.changed).index
        screen.steps_bar.current_step = at
        await pilot.press("v")
        view = await wait_graph(pilot)
        layout = view.layout_shown
        assert layout is not None
        # The conv selected before: the same box of the next run must be told again.
        first = next(b for b in layout.boxes.values() if b.lines[0].startswith("conv2d"))
        view.select_box(first, follow=True)
        await pilot.pause()
        assert "% of the forward" not in screen.inspector.plain_text()  # nothing timed yet
        await pilot.press("percent_sign")  # runs the plan again, each node timed
        await _until(pilot, lambda: screen.run_id > first_run)
        await wait_ready(pilot, timeout=60)
        assert view.heat and screen.run_state.last_profiled
        # The step on show before comes back once the new run has it.
        await _until(pilot, lambda: screen.current_step == at)
        folded = screen.steps[at]
        assert folded.name == "fold_conv_bn" and folded.timed_nodes
        await _until(pilot, lambda: screen.node_times.get(folded.graph) is not None)
        await pilot.press("d")  # the graph alone: every box is this step's
        view = await wait_graph(pilot)
        times = screen.node_times.get(folded.graph)
        assert times is not None and times.step == folded.index
        ms = {n.id: n.ms for n in times.nodes}
        layout = view.layout_shown
        assert layout is not None
        painted = {
            (row, a): fill
            for row, spans in view.canvas_view._heat_rows.items()
            for a, _b, fill in spans
        }
        filled = 0
        for box in layout.boxes.values():
            found = [ms[i] for i in box.node_ids if i in ms]
            fill = painted.get((box.y + 1, box.x + 1))
            if not found:
                assert fill is None, box.lines
                continue
            band = heat_band(sum(found) / times.total_ms)
            assert fill is not None and fill.bgcolor is not None, box.lines
            assert fill.bgcolor.name == HEAT_SCALE[band][1], box.lines
            filled += 1
        assert filled >= 3  # conv, relu, sum at least
        # On screen: a cell inside a timed box has the band's background.
        conv = next(b for b in layout.boxes.values() if b.lines[0].startswith("conv2d"))
        screen.graph_view.select_box(conv, follow=True)
        await pilot.pause()
        canvas = view.canvas_view
        y = conv.y + 1 - canvas.scroll_offset.y
        strip = canvas.render_line(y)
        x = conv.x + 1 - canvas.scroll_offset.x
        cells = [s for s in strip for _ in range(len(s.text))]
        assert cells[x].style is not None and cells[x].style.bgcolor is not None
        # The inspector: the conv's time at this step against the unfrozen module's.
        conv_ms = sum(n.ms for n in times.nodes if n.id in conv.node_ids)
        share = f"{100 * conv_ms / times.total_ms:.1f} % of the forward"
        await _until(pilot, lambda: share in screen.inspector.plain_text(), timeout=10)
        assert "unfrozen" in screen.inspector.plain_text()
        assert all(n.unfrozen_ms is not None for n in times.nodes if n.id in conv.node_ids)
        # % again: the overlay goes, and runs stop timing nodes.
        await pilot.press("percent_sign")
        await pilot.pause()
        assert not view.heat and not view.canvas_view._heat_rows
        assert not screen.run_state.profile


async def test_enter_on_moved_numbers_goes_to_torchs_first_differing_node(
    conv_bn: tuple[Path, Path], tmp_path: Path
) -> None:
    path, inputs = conv_bn
    app = _app(path, tmp_path, inputs)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        moved = [s for s in screen.steps if s.moved_node is not None]
        assert [s.name for s in moved] == ["fold_conv_bn"]
        step = moved[0]
        # The oracle: torch's own graphs, each matched value compared by this test.
        x = torch.load(inputs)[0]
        key, diff, _b, _a = torch_first_difference(
            torch.jit.load(str(path)), "_jit_pass_fold_frozen_conv_bn", x
        )
        snapshot = screen.session.step_graph(step.graph)
        assert _key_of(snapshot, step.moved_node) == key
        assert str(screen.steps_bar.timeline.get_cell(str(step.index), "numerics")).endswith("→")
        await pilot.press("v")
        await wait_graph(pilot)
        # enter on the step's row in the timeline
        screen.steps_bar.timeline.focus()
        screen.steps_bar.timeline.move_cursor(row=step.index, animate=False)
        await pilot.press("enter")
        await _until(pilot, lambda: screen.current_step == step.index)
        await _until(pilot, lambda: screen.graph_view.ready)
        await pilot.pause()
        line = screen.ir.plain_lines()[screen.ir.cursor_line]
        assert key[0] in line
        from freezeview.session import line_index

        assert line_index(snapshot)[1][step.moved_node] == screen.ir.cursor_line
        selected = screen.graph_view.selected
        assert selected is not None and step.moved_node in selected.node_ids
        assert "first node to differ" in screen.inspector.plain_text()
        assert diff > 0


async def test_heat_without_sample_inputs_says_why_and_runs_nothing(
    small_pt: Path, tmp_path: Path
) -> None:
    app = _app(small_pt, tmp_path, None)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        run = screen.run_id
        await pilot.press("v")
        view = await wait_graph(pilot)
        await pilot.press("percent_sign")
        await pilot.pause()
        assert not view.heat and not screen.run_state.profile and screen.run_id == run
        status = str(screen.query_one("#status").render())
        assert "needs sample inputs" in status
