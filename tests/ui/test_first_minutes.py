"""A new user's first minutes in the app (issue 38): every question answered on the
screen where it is asked, and every key reachable from where the user starts.

Driven through the real app with Pilot, on the tests' small model in-process.
"""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from rich.console import Console

from freezeview.session import SessionOptions
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.screens.help import HelpScreen
from freezeview.ui.widgets.model_tree import ModelTree, TreeFind

from .conftest import wait_ready

pytestmark = pytest.mark.asyncio


def _app(path: Path, tmp_path: Path, shapes: tuple[str, ...] = ()) -> FreezeviewApp:
    options = SessionOptions(input_shapes=shapes, time_budget=0.01)
    session = Session(path=path, options=options)
    return FreezeviewApp(path, options=options, output_dir=tmp_path / "out", session=session)


def _plain(renderable: object, width: int = 120) -> str:
    out = io.StringIO()
    Console(width=width, file=out, color_system=None).print(renderable)
    return out.getvalue()


async def test_each_step_says_what_it_did_or_why_not(small_pt: Path, tmp_path: Path) -> None:
    """The timeline's notes column and the inspector of a selected row carry the note
    ``freezeview freeze`` prints: a step that changed nothing says why it did not fire."""
    from freezeview.engine.freeze.pipeline import Pipeline, Plan
    from freezeview.engine.load.loading import load_model

    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(200, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        steps = screen.steps
        # The CLI's notes column: the same pipeline's first notes (or the error).
        engine = list(Pipeline(load_model(small_pt), Plan.default()).run())
        assert [s.notes for s in steps] == [s.error or s.first_note for s in engine]
        table = screen.steps_bar.timeline
        assert list(table.columns)[-1] == "notes"
        unchanged = [s for s in steps if not s.changed and not s.error]
        assert unchanged and all(s.notes.startswith("did not fire") for s in unchanged)
        for step in steps:
            assert str(table.get_cell(str(step.index), "notes")).rstrip("…") in step.notes
        # Selecting a "(no change)" row: the inspector says why.
        row = steps.index(unchanged[0])
        table.focus()
        await pilot.pause()
        table.move_cursor(row=row)
        await pilot.press("enter")
        await pilot.pause()
        shown = " ".join(screen.inspector.plain_text().split())
        assert "why not" in shown and " ".join(unchanged[0].notes.split()) in shown
        # n moves on: the inspector follows the step.
        await pilot.press("n")
        await pilot.pause()
        assert steps[row + 1].name in screen.inspector.plain_text()


@pytest.mark.slow
@pytest.mark.parametrize("width", [80, 160])
async def test_the_verdict_wraps_instead_of_being_cut(
    small_pt: Path, tmp_path: Path, width: int
) -> None:
    app = _app(small_pt, tmp_path, ("1,3,8,8",))
    async with app.run_test(size=(width, 40)) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        if width < 120:  # narrow: the steps pane is a tab of its own
            screen.narrow_pane = "steps"
            await pilot.pause()
        await pilot.pause()
        verdict = screen.steps[-1].verdict
        title = screen.query_one("#timeline-title")
        assert verdict and title.size.width > 0
        lines = [line.text for line in title.render_lines(title.region.reset_offset)]
        drawn = " ".join(" ".join(lines).split())
        assert " ".join(verdict.split()) in drawn
        assert title.size.height >= -(-len("steps 99  " + verdict) // title.size.width)


async def test_the_focus_starts_in_the_model_tree(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert isinstance(screen.focused, ModelTree)
        # The first space preserves what the cursor is on (the root: nothing to preserve
        # says how to get to an attribute).
        await pilot.press("down", "space")
        await pilot.pause()
        assert app.preserved, "the first space preserves the attribute under the cursor"
        await pilot.press("space")
        await pilot.pause()
        screen.ir.focus()
        screen.model_tree.move_cursor(screen.model_tree.root)
        await pilot.pause()
        await pilot.press("space")
        await pilot.pause()
        said = [n.message for n in app._notifications]
        assert any("tab moves between panes" in m for m in said), said


async def test_help_says_how_to_move_and_sets_the_graph_keys_apart(
    small_pt: Path, tmp_path: Path
) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        help_screen = app.screen
        assert isinstance(help_screen, HelpScreen)
        panes = str(help_screen.query_one("#help-panes").render())
        assert "tab" in panes and "shift+tab" in panes and "click" in panes
        text = _plain(help_screen.table, 150)
        everywhere, graph = text.split("In the graph view", 1)
        # d means IR/code/diff everywhere, and graph/diff in the graph view: apart.
        assert "IR/code/diff" in everywhere and "Graph/diff" not in everywhere
        assert "Graph/diff" in graph and "IR/code/diff" not in graph
        assert "Find attr" in everywhere


async def test_pass_boxes_differ_by_more_than_colour(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        passes = app.main_screen.steps_bar.passes
        first = passes.get_option_at_index(0).value
        marks = []
        for _ in range(2):
            boxes = "".join(seg.text for seg in list(passes.render_line(0))[:3])
            marks.append((first in passes.selected, boxes))
            passes.toggle(first)
            await pilot.pause()
        (on, box_on), (off, box_off) = marks
        assert on and not off
        assert "X" in box_on and "X" not in box_off


async def test_ctrl_f_finds_an_attribute_by_part_of_its_path(
    small_pt: Path, tmp_path: Path
) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        tree = screen.model_tree
        wanted = [v.path for v in tree.summaries if "running_var" in v.path]
        assert wanted
        screen.ir.focus()
        await pilot.press("ctrl+f")
        await pilot.pause()
        assert isinstance(app.focused, TreeFind)
        await pilot.press(*"running_v")
        await pilot.pause()
        await pilot.pause()
        assert tree.selected_path == wanted[0]
        assert wanted[0] in screen.inspector.plain_text()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()
        assert tree.selected_path == wanted[1 % len(wanted)]
        await pilot.press("escape")
        await pilot.pause()
        assert app.focused is tree and not screen.query_one(TreeFind).display
        await pilot.press("ctrl+f", *"no-such-name")
        await pilot.pause()
        assert "no attribute path holds" in str(screen.query_one("#status").render())


@pytest.mark.slow
async def test_the_code_view_says_whose_code_it_shows(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        steps = screen.steps
        middle = next(i for i, s in enumerate(steps) if i > 2 and i < len(steps) - 1)
        for _ in range(middle):
            await pilot.press("n")
        await pilot.press("d")
        await wait_ready(pilot)
        assert screen.view_mode == "code"
        text = "\n".join(screen.ir.plain_lines())
        head = " ".join(line.lstrip("# ") for line in text.splitlines() if line.startswith("#"))
        assert "final frozen module" in head and f"not step {steps[middle].index}" in head
        assert ".code of the frozen module" in str(screen.query_one("#ir-title").render())
        for _ in range(len(steps)):
            await pilot.press("n")
        await wait_ready(pilot)
        text = "\n".join(screen.ir.plain_lines())
        assert "is the run's last" in text and "def forward" in text
