"""Pilot tests: every key of the app, checked against what torch does in the same run."""

from __future__ import annotations

import dataclasses
import xml.etree.ElementTree as ET
from collections import Counter
from pathlib import Path

import pytest
import torch

from freezeview.session import SessionOptions
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.screens.help import HelpScreen
from freezeview.ui.screens.main import MainScreen
from freezeview.ui.widgets.ir_view import display_text

from .conftest import step_graph, wait_ready

pytestmark = pytest.mark.asyncio

SIZE = (160, 48)


def torch_inlined_text(path: Path) -> str:
    """What torch prints for the inlined forward graph of the saved model."""
    module = torch.jit.load(str(path))
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    # The app shows it without per-clone type mangling and with short source comments.
    return display_text(str(graph))


def torch_frozen_kinds(path: Path, **kwargs: object) -> Counter[str]:
    """Node kinds of ``torch.jit.freeze`` on the saved model."""
    frozen = torch.jit.freeze(torch.jit.load(str(path)), **kwargs)  # type: ignore[arg-type]
    return Counter(n.kind() for n in _walk(frozen.graph.block()))


def _walk(block):  # type: ignore[no-untyped-def]
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _walk(sub)


async def wait_worker(pilot, group: str, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the app's workers of ``group`` are done (errors show in the app)."""
    import time

    from textual.worker import WorkerState

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        busy = [
            w
            for w in pilot.app.workers
            if w.group == group and w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        ]
        if not busy:
            await pilot.pause()
            return
    raise AssertionError(f"{group} did not finish")


def ir_text(screen: MainScreen) -> str:
    return "\n".join(screen.ir.plain_lines())


def app_for(
    path: Path, tmp_path: Path, *, engine_process: bool = False, **kwargs: object
) -> FreezeviewApp:
    """The app on ``path``, writing under ``tmp_path / "out"``.

    ``freezeview MODEL.pt`` does the torch work in an engine process; a test of the
    screen gets the same answers from the in-process :class:`Session` the engine process
    itself runs, without starting a process that imports torch (about 2 s a test). Tests
    of the engine process's own behaviour (crashes, errors across the pipe, quitting
    while it loads) and a few of the everyday keys ask for it with ``engine_process``;
    ``tests/session/test_remote.py`` checks it answers as the in-process session does.
    """
    fields = {f.name for f in dataclasses.fields(SessionOptions)}
    options = SessionOptions(**{k: v for k, v in kwargs.items() if k in fields})  # type: ignore[arg-type]
    rest = {k: v for k, v in kwargs.items() if k not in fields}
    session = None if engine_process else Session(path=path, options=options)
    return FreezeviewApp(
        path,
        options=options,
        output_dir=tmp_path / "out",
        session=session,
        **rest,  # type: ignore[arg-type]
    )


# In-process in the fast set; the slow set also runs it on the real engine process
# (tests/session/test_remote.py checks in the fast set that it answers the same).
ENGINE_PATHS = pytest.mark.parametrize(
    "engine_process", [False, pytest.param(True, marks=pytest.mark.slow, id="engine-process")]
)


@ENGINE_PATHS
async def test_opens_on_the_inlined_graph(
    small_pt: Path, tmp_path: Path, engine_process: bool
) -> None:
    app = app_for(small_pt, tmp_path, engine_process=engine_process)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert screen.current_step == 0
        assert ir_text(screen) == torch_inlined_text(small_pt).rstrip("\n")


@pytest.mark.slow
async def test_n_and_p_step_through_the_graphs(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        texts = [ir_text(screen)]
        for i in range(1, len(screen.steps)):
            await pilot.press("n")
            await wait_ready(pilot)
            assert screen.current_step == i
            assert screen.steps_bar.timeline.cursor_row == i
            assert ir_text(screen) == display_text(step_graph(screen, i).text).rstrip("\n")
            texts.append(ir_text(screen))
        # The last step is torch.jit.freeze's graph.
        final = Counter(node.kind for node in step_graph(screen, -1).walk())
        assert final == torch_frozen_kinds(small_pt)
        assert texts[0] != texts[-1]
        await pilot.press("n")  # past the end: stays
        assert screen.current_step == len(screen.steps) - 1
        await pilot.press("p", "p")
        await pilot.pause()
        assert screen.current_step == len(screen.steps) - 3
        assert ir_text(screen) == texts[-3]


async def test_space_toggles_preserve_and_the_verdict(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert screen.model_tree.view_of("scale").status == "inlined"  # type: ignore[union-attr]
        screen.model_tree.focus()
        assert screen.model_tree.select_path("scale")
        await pilot.pause()
        await pilot.press("space")
        await wait_ready(pilot)
        view = screen.model_tree.view_of("scale")
        assert view is not None
        # torch agrees: preserving `scale` keeps it on the frozen module.
        frozen = torch.jit.freeze(torch.jit.load(str(small_pt)), preserved_attrs=["scale"])
        assert hasattr(frozen, "scale")
        assert view.status == "kept" and view.preserved
        assert view.reasons[0].code == "preserved"
        assert "preserved" in str(screen.model_tree.cursor_node.label)  # type: ignore[union-attr]
        assert screen.stale
        await pilot.press("space")
        await wait_ready(pilot)
        assert screen.model_tree.view_of("scale").status == "inlined"  # type: ignore[union-attr]
        assert not screen.stale


async def test_t_and_r_change_the_steps(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        before = [s.name for s in screen.steps]
        assert "fold_conv_bn" in before
        assert "aten::batch_norm" not in step_graph(screen, -1).kinds()
        passes = screen.steps_bar.passes
        passes.focus()
        index = next(
            i
            for i in range(passes.option_count)
            if passes.get_option_at_index(i).id == "fold_conv_bn"
        )
        passes.highlighted = index
        await pilot.press("t")
        assert "fold_conv_bn" not in screen.enabled_passes()
        assert screen.stale
        await pilot.press("r")
        await wait_ready(pilot)
        after = [s.name for s in screen.steps]
        assert "fold_conv_bn" not in after and after != before
        # Without conv-bn folding torch leaves the batch_norm in place too.
        assert step_graph(screen, -1).kinds()["aten::batch_norm"] == 1
        assert not screen.stale


async def test_d_cycles_ir_code_and_diff(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("n")
        await pilot.press("d")
        await wait_ready(pilot)
        assert screen.view_mode == "code"
        assert "def forward" in ir_text(screen)
        await pilot.press("d")
        await wait_ready(pilot)
        assert screen.view_mode == "diff"
        text = ir_text(screen)
        assert text.startswith("---") and "\n+++" in text
        removed = {
            line[1:]
            for line in text.splitlines()
            if line.startswith("-") and not line.startswith("---")
        }
        assert removed <= set(display_text(step_graph(screen, 0).text).splitlines())
        await pilot.press("d")
        assert screen.view_mode == "ir"


async def test_selecting_an_attribute_marks_its_lines(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        screen.model_tree.focus()
        assert screen.model_tree.select_path("calls")
        await pilot.pause()
        await pilot.pause()
        lines = screen.ir.plain_lines()
        marked = [lines[i] for i in sorted(screen.ir.marked_lines)]
        assert any('prim::GetAttr[name="calls"]' in line for line in marked)
        assert any("aten::add_" in line for line in marked)  # the in-place write
        body = screen.inspector.plain_text()
        assert "calls" in body and "kept" in body
        assert "in-place-write" in body  # the reason the engine gave
        # The writing line's own text, read from the saved model's debug information.
        assert "self.calls.add_(1)" in body
        assert f"{len(screen.ir.marked_lines)} line(s)" in body


async def test_ir_line_shows_node_facts(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        screen.ir.focus()  # (the focus starts in the model tree)
        await pilot.pause()
        line = next(i for i, t in enumerate(screen.ir.plain_lines()) if "aten::add_" in t)
        screen.ir.cursor_line = line
        await pilot.pause()
        text = screen.inspector.plain_text()
        assert "aten::add_" in text and "writes" in text and "%calls" in text


async def test_g_renders_svg(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("n", "g")
        await wait_worker(pilot, "render")
        svgs = sorted((tmp_path / "out" / "steps").glob("*.svg"))
        assert svgs, "no SVG written"
        for svg in svgs:
            assert ET.parse(svg).getroot().tag.endswith("svg")
        assert "rendered" in str(app.main_screen.query_one("#status").render())


@ENGINE_PATHS
async def test_e_exports(small_pt: Path, tmp_path: Path, engine_process: bool) -> None:
    app = app_for(small_pt, tmp_path, engine_process=engine_process)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("e")
        await wait_worker(pilot, "export")
        out = tmp_path / "out" / "export"
        files = {p.name for p in out.rglob("*") if p.is_file()}
        assert {"before.svg", "after.svg", "ir.diff"} <= files
        assert "exported" in str(app.main_screen.query_one("#status").render())


async def test_slash_searches(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("slash")
        await pilot.press(*"conv2d")
        await pilot.pause()
        expected = [i for i, t in enumerate(screen.ir.plain_lines()) if "conv2d" in t.lower()]
        assert expected and screen.ir.matches == expected
        assert screen.ir.cursor_line == expected[0]
        await pilot.press("escape")
        assert screen.ir.has_focus


async def test_f_filters_the_tree(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("f", "f")  # all -> inlined -> kept
        assert screen.status_filter == "kept"
        leaves = []

        def visit(node) -> None:  # type: ignore[no-untyped-def]
            for child in node.children:
                if (
                    child.data is not None
                    and not isinstance(child.data, str)
                    and not child.children
                ):
                    leaves.append(child.data)
                visit(child)

        visit(screen.model_tree.root)
        assert leaves and all(v.status == "kept" for v in leaves)


async def test_help_lists_every_binding(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("question_mark")
        await pilot.pause()
        assert isinstance(app.screen, HelpScreen)
        import io

        from rich.console import Console

        console = Console(width=150, file=io.StringIO(), color_system=None)
        console.print(app.screen.table)
        text = console.file.getvalue()  # type: ignore[attr-defined]
        for binding in app.all_bindings():
            assert binding.description in text
            assert (binding.key_display or binding.key) in text
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen)


async def test_every_binding_is_in_the_command_palette(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        titles = [c.title for c in app.get_system_commands(app.screen)]
        for binding in MainScreen.BINDINGS:
            assert any(t.startswith(binding.description) for t in titles), binding.description  # type: ignore[union-attr]
        footer_keys = {b.key for b in MainScreen.BINDINGS}  # type: ignore[union-attr]
        assert {"n", "p", "r", "space", "t", "d", "g", "e", "slash", "question_mark"} <= footer_keys


# The fast set quits while loading with keys pressed before: test_pressure.py.
@pytest.mark.slow
async def test_q_quits(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("q")  # at once, even while loading
        await pilot.pause()
    assert app.return_code == 0


@ENGINE_PATHS
async def test_bad_file_shows_an_error_and_goes_on(tmp_path: Path, engine_process: bool) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"\x00not a model at all")
    app = app_for(bad, tmp_path, engine_process=engine_process)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        status = str(screen.query_one("#status").render())
        assert "load failed" in status and "bad.pt" in status
        assert "Traceback" not in ir_text(screen)
        await pilot.press("n", "r", "d")  # keys still work
        assert screen.view_mode == "code"


@pytest.mark.slow
async def test_engine_error_during_steps_keeps_the_session(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from freezeview.engine.plumbing.errors import PlanError
    from freezeview.session.remote import RemoteSession

    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        good = list(screen.steps)

        def broken(*args: object, **kwargs: object):  # type: ignore[no-untyped-def]
            raise PlanError("the pass blew up on purpose.")
            yield  # pragma: no cover

        monkeypatch.setattr(RemoteSession, "run_steps", broken)
        await pilot.press("r")
        await wait_ready(pilot)
        assert "the pass blew up on purpose" in str(screen.query_one("#status").render())
        assert screen.stepping is False
        assert good  # what it had before is still in the earlier objects
        await pilot.press("q")


@pytest.mark.slow
async def test_engine_process_crash_keeps_the_screen_and_restarts(
    small_pt: Path, tmp_path: Path
) -> None:
    """torch crashing (here: the engine process killed) costs the user no shown step."""
    import os
    import signal

    app = app_for(small_pt, tmp_path, engine_process=True)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        shown = ir_text(screen)
        count = len(screen.steps)
        session = app.session
        first_pid = session.pid  # type: ignore[union-attr]
        assert first_pid is not None and first_pid != os.getpid()
        os.kill(first_pid, signal.SIGKILL)
        await pilot.press("e")  # export needs the engine: it says what happened
        for _ in range(200):
            await pilot.pause(0.05)
            if "export failed" in str(screen.query_one("#status").render()):
                break
        status = str(screen.query_one("#status").render())
        assert "engine process was killed by SIGKILL" in status
        assert ir_text(screen) == shown and len(screen.steps) == count
        await pilot.press("r")  # the next action starts a new engine process
        await wait_ready(pilot)
        assert session.pid not in (None, first_pid)  # type: ignore[union-attr]
        assert len(screen.steps) == count and ir_text(screen) == shown
        await pilot.press("q")


@pytest.mark.slow
async def test_narrow_terminal_uses_tabs(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert screen.has_class("-narrow")
        assert screen.query_one("#narrow-tabs").display
        assert screen.ir.display and not screen.query_one("#model-pane").display
        screen.query_one("#narrow-tabs").active = "tab-model"  # type: ignore[attr-defined]
        await pilot.pause()
        assert screen.query_one("#model-pane").display and not screen.query_one("#ir-pane").display
        assert screen.model_tree.has_focus
        await pilot.press("w", "w", "w")  # model -> IR -> inspector -> steps
        await pilot.pause()
        assert screen.narrow_pane == "steps" and screen.steps_bar.passes.has_focus
        assert screen.query_one("#steps-bar").display and not screen.query_one("#main").display


async def test_command_line_plan_is_applied(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path, preserved=["scale"], passes=["remove_dropout", "nope"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert screen.enabled_passes() == ["remove_dropout"]
        names = [s.name for s in screen.steps]
        assert "remove_dropout" in names and "fold_conv_bn" not in names
        assert screen.model_tree.view_of("scale").status == "kept"  # type: ignore[union-attr]
        assert any("unknown pass nope" in str(n.message) for n in app._notifications)


async def test_a_loaded_module_keeps_the_torch_work_in_this_process(
    small_pt: Path, tmp_path: Path
) -> None:
    """The Python API's FreezeviewApp(loaded=...) uses thread workers, no engine process."""
    from freezeview.engine.load.loading import LoadedModel
    from freezeview.session.local import Session

    loaded = LoadedModel.from_module(torch.jit.load(str(small_pt)), name="small.pt")
    app = FreezeviewApp(loaded=loaded, output_dir=tmp_path / "out")
    assert isinstance(app.session, Session)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert ir_text(screen) == torch_inlined_text(small_pt).rstrip("\n")
        assert len(screen.steps) > 3 and screen.summaries
        await pilot.press("n")
        assert screen.current_step == 1
        await pilot.press("q")


async def test_the_status_line_links_the_export_and_o_opens_it(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After e, the status line carries a link to index.html; o opens it in a browser."""
    app = app_for(small_pt, tmp_path)
    opened: list[str] = []
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("o")  # nothing written yet: says so, opens nothing
        await pilot.press("e")
        await wait_worker(pilot, "export")
        screen = app.main_screen
        page = tmp_path / "out" / "export" / "index.html"
        assert screen.delivery.last == page
        status = screen.query_one("#status").render()
        links = {span.style.link for span in status.spans if hasattr(span.style, "link")}  # type: ignore[attr-defined]
        assert page.resolve().as_uri() in links
        monkeypatch.setattr(app, "open_url", lambda url, **_: opened.append(url))
        monkeypatch.setenv("DISPLAY", ":0")
        await pilot.press("o")
        assert opened == [page.resolve().as_uri()]
        # Over SSH, with no display: the path is shown, nothing is opened.
        monkeypatch.delenv("DISPLAY")
        monkeypatch.delenv("WAYLAND_DISPLAY", raising=False)
        monkeypatch.setenv("SSH_CONNECTION", "10.0.0.1 22 10.0.0.2 22")
        await pilot.press("o")
        assert opened == [page.resolve().as_uri()]
        assert str(page) in str(screen.query_one("#status").render())


async def test_a_pass_switched_off_and_on_keeps_its_place(small_pt: Path, tmp_path: Path) -> None:
    """Passes run in the list's order: t twice gives back the plan that ran."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        before = screen.enabled_passes()
        screen.steps_bar.passes.focus()
        screen.steps_bar.passes.highlighted = 0
        await pilot.press("t")
        assert screen.enabled_passes() == before[1:] and screen.stale
        await pilot.press("t")
        assert screen.enabled_passes() == before
        assert not screen.stale
