"""An error of the app's own ends no session (freezeview/ui/failures.py).

The suite runs the app strict (tests/conftest.py: any such error fails the test); these
tests switch that off to see what a user gets: one sentence on screen naming a log file
that holds the traceback, and an app that goes on taking keys. The first test fails when
Textual changes the private methods the guard relies on.
"""

from __future__ import annotations

import inspect
from pathlib import Path

import pytest
from textual.app import App
from textual.message_pump import MessagePump
from textual.screen import Screen

from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.failures import STRICT_ENV, FailureLog, Guarded, log_dir
from freezeview.ui.screens.main import MainScreen
from freezeview.ui.widgets.graph_canvas_view import GraphCanvasView
from freezeview.ui.widgets.graph_view import GraphView
from freezeview.ui.widgets.status_line import StatusLine

from .conftest import wait_ready

SIZE = (160, 48)


class Defect(RuntimeError):
    """The error the tests inject."""


def test_textual_still_has_what_the_guard_overrides() -> None:
    # Guarded overrides MessagePump._dispatch_message: every message, event and key
    # action must still go through it, and the loop must still stop after
    # _handle_exception (why the guard catches one level down).
    assert inspect.iscoroutinefunction(MessagePump._dispatch_message)
    loop = inspect.getsource(MessagePump._process_messages_loop)
    assert "await self._dispatch_message(message)" in loop
    assert "self.app._handle_exception(error)" in loop
    # The app overrides App._handle_exception for the rest (renders, timers).
    assert "def _handle_exception(self, error: Exception)" in inspect.getsource(App)
    assert "self.app._handle_exception(error)" in inspect.getsource(Screen._refresh_layout)
    # The guard comes before Textual's own in the app, the main screen and the graph view.
    for guarded in (FreezeviewApp, MainScreen, GraphView, GraphCanvasView):
        assert guarded._dispatch_message is Guarded._dispatch_message, guarded


def test_the_log_goes_to_the_state_directory(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("FREEZEVIEW_LOG_DIR", raising=False)
    monkeypatch.setenv("XDG_STATE_HOME", "/somewhere/state")
    assert log_dir() == Path("/somewhere/state/freezeview/logs")


def test_one_file_per_session_and_a_repeat_written_once(tmp_path: Path) -> None:
    log = FailureLog(tmp_path)
    assert log.path is None  # nothing written, no file
    for _ in range(3):
        try:
            raise Defect("drawn wrong")
        except Defect as error:
            path = log.record(error, "drawing")
    assert path is not None and path.parent == tmp_path
    assert list(tmp_path.iterdir()) == [path]
    text = path.read_text()
    assert text.count("Traceback") == 1 and "Defect: drawn wrong" in text
    assert log.count == 3


def _app(path: Path, tmp_path: Path) -> FreezeviewApp:
    return FreezeviewApp(
        path, output_dir=tmp_path / "out", show_timings=False, session=Session(path=path)
    )


def _broken_panel(*args: object, **kwargs: object) -> object:
    raise Defect("the inspector could not describe this box")


@pytest.mark.asyncio
async def test_a_failing_description_is_said_and_the_session_goes_on(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STRICT_ENV, "0")
    monkeypatch.setenv("FREEZEVIEW_LOG_DIR", str(tmp_path / "logs"))
    monkeypatch.setattr("freezeview.ui.screens.main.selection_panel", _broken_panel)
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        view = app.main_screen.graph_view
        for _ in range(300):
            await pilot.pause(0.02)
            if view.ready:
                break
        await pilot.press("right_square_bracket")
        await pilot.pause(0.2)
        log = app.failure_log.path
        assert log is not None and log.parent == tmp_path / "logs"
        assert "Defect: the inspector could not describe this box" in log.read_text()
        status = str(app.main_screen.query_one(StatusLine).render())
        assert str(log) in status and "failed" in status
        assert "failed" in app.main_screen.inspector.plain_text()
        # Still running, still taking keys: the next step, the next box.
        before = app.main_screen.current_step
        await pilot.press("n")
        await pilot.pause(0.3)
        assert app.main_screen.current_step == before + 1
        assert app.is_running
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_a_failing_render_is_said_and_the_session_goes_on(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(STRICT_ENV, "0")
    monkeypatch.setenv("FREEZEVIEW_LOG_DIR", str(tmp_path / "logs"))

    def broken(self: GraphCanvasView, y: int) -> object:
        if self.canvas is not None:
            raise Defect("a row could not be drawn")
        return original(self, y)

    original = GraphCanvasView._render_row
    monkeypatch.setattr(GraphCanvasView, "_render_row", broken)
    app = _app(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        await pilot.press("v")
        for _ in range(100):
            await pilot.pause(0.02)
            if app.failure_log.path is not None:
                break
        await pilot.pause(0.1)
        log = app.failure_log.path
        assert log is not None and "Defect: a row could not be drawn" in log.read_text()
        assert str(log) in str(app.main_screen.query_one(StatusLine).render())
        await pilot.press("v")  # the graph view closes, the app goes on
        await pilot.pause(0.1)
        assert app.is_running
        await pilot.press("q")
    assert app.return_code == 0


@pytest.mark.asyncio
async def test_under_test_the_same_error_fails(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # tests/conftest.py sets FREEZEVIEW_STRICT_UI=1: the suite fails on any such error.
    monkeypatch.setenv(STRICT_ENV, "1")
    monkeypatch.setattr("freezeview.ui.screens.main.selection_panel", _broken_panel)
    app = _app(small_pt, tmp_path)
    with pytest.raises(Defect):
        async with app.run_test(size=SIZE) as pilot:
            await wait_ready(pilot)
            await pilot.press("v")
            view = app.main_screen.graph_view
            for _ in range(300):
                await pilot.pause(0.02)
                if view.ready:
                    break
            await pilot.press("right_square_bracket")
            await pilot.pause(0.2)
    assert app.failure_log.path is None
