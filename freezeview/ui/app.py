"""The freezeview Textual app: ``freezeview MODEL.pt``.

The app holds the plan (preserved names, passes) and the options it was started with;
the main screen (:mod:`freezeview.ui.screens.main`) does the work. Importing this
module does not import torch, so the first screen, with its loading state, appears
while torch and the model are still loading in the engine process
(:mod:`freezeview.session.remote`).
"""

from __future__ import annotations

import sys
import threading
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO

from textual import events
from textual.app import App, SystemCommand
from textual.binding import Binding
from textual.screen import Screen

from ..session import EngineSession, Preserved, RemoteSession, SessionOptions, collector
from . import textual_caches
from .failures import FailureLog, Guarded, sentence, strict
from .screens.main import MainScreen

if TYPE_CHECKING:
    from ..session import LoadedModel

__all__ = ["FreezeviewApp"]


class FreezeviewApp(Guarded, App[int]):
    """See what ``torch.jit.freeze`` does to one model.

    Args:
        model_path: the TorchScript file to open.
        options: how the model is opened and run, and the plan to start with (the
            command line's options, :class:`~freezeview.session.SessionOptions`).
        output_dir: where ``g`` (render) and ``e`` (export) write.
        loaded: an already loaded model (Python API, tests); skips ``torch.jit.load``
            and keeps the torch work in this process (in thread workers).
        session: an engine process already started for ``model_path`` (the CLI starts
            it before importing Textual); by default the app starts one itself.
        show_timings: show wall times (off for screenshots that must not change).
        graphics: the terminal's picture protocol (``"kitty"``, ``"sixel"``; see
            :func:`freezeview.ui.graphics.detect_graphics`), None for none: the graph
            view's ``i`` shows real pictures only with one.
    """

    CSS_PATH = "app.tcss"
    TITLE = "freezeview"
    BINDINGS = [
        Binding("q", "quit", "Quit", tooltip="Leave freezeview (at once, even while loading)"),
    ]

    def __init__(
        self,
        model_path: str | Path | None = None,
        *,
        options: SessionOptions | None = None,
        output_dir: str | Path | None = None,
        loaded: LoadedModel | None = None,
        session: EngineSession | None = None,
        show_timings: bool = True,
        graphics: str | None = None,
    ) -> None:
        super().__init__()
        #: The terminal's picture protocol, or None (the graph view's characters only).
        self.graphics = graphics
        self.model_path = Path(model_path) if model_path is not None else None
        options = options if options is not None else SessionOptions()
        self.options = options
        self.passes = list(options.passes) if options.passes is not None else None
        self.show_timings = show_timings
        stem = self.model_path.stem if self.model_path else (loaded.name if loaded else "model")
        self.output_dir = Path(output_dir) if output_dir else Path.cwd() / f"freezeview-{stem}"
        self.captured_warnings: list[str] = []
        self._warnings_lock = threading.Lock()
        self.session: EngineSession | None = session
        if isinstance(session, RemoteSession):
            session.on_warning = self.record_warning
        elif session is None and loaded is not None:
            from ..session import Session  # imports torch: the Python API's own session

            self.session = Session(path=self.model_path, options=options, loaded=loaded)
        elif session is None and self.model_path is not None:
            # torch work in a child process: the screen never waits for the GIL.
            self.session = RemoteSession(self.model_path, options, on_warning=self.record_warning)
        self._old_showwarning: Any = None
        self._old_switch = sys.getswitchinterval()
        #: Names of the workers still running when the user quit (the CLI then leaves
        #: without waiting for torch to return).
        self.busy_at_exit: list[str] = []
        #: The session's log of its own errors (ui/failures.py): created at the first.
        self.failure_log = FailureLog()

    @property
    def preserved(self) -> Preserved:
        """The names in ``preserved_attrs`` now: the main screen's run state owns them
        (space toggles one); before that screen exists, the ones the app started with."""
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                return screen.run_state.preserved
        return self.options.preserved

    @property
    def model_label(self) -> str:
        """The model's file name for titles."""
        if self.model_path is not None:
            return self.model_path.name
        return self.session.name if self.session else "model"

    async def action_quit(self) -> None:
        """Quit at once, even while a worker is inside torch."""
        from textual.worker import WorkerState

        self.busy_at_exit = [
            w.group for w in self.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        ]
        for screen in self.screen_stack:
            if isinstance(screen, MainScreen):
                screen.cancel_run()
        # The engine process goes first: workers waiting on it return at once.
        self.close_engine()
        self.exit(0)

    def get_default_screen(self) -> Screen[Any]:
        return MainScreen(self.options.preserved)

    @property
    def main_screen(self) -> MainScreen:
        """The main screen (wherever the screen stack is)."""
        return next(s for s in self.screen_stack if isinstance(s, MainScreen))

    # -- warnings --------------------------------------------------------------------
    def on_load(self) -> None:
        # torch warns (DeprecationWarning on freeze, FutureWarning on jit.load in newer
        # releases) from worker threads; a warning printed there would land on top of the
        # app's screen. They are kept as information instead (help screen lists them).
        warnings.simplefilter("default")
        # Workers run in threads (highlighting, receiving steps; torch itself when the
        # app was given a loaded module); a shorter GIL switch interval lets the event
        # loop (keys, painting) get the GIL back sooner from a busy Python worker.
        self._old_switch = sys.getswitchinterval()
        sys.setswitchinterval(0.001)
        self._old_showwarning = warnings.showwarning
        warnings.showwarning = self._showwarning
        # No full garbage collection at a moment nobody chose (see session/collector.py);
        # Textual's caches kept from holding what the screen drops (ui/textual_caches.py).
        textual_caches.untie()
        collector.install(before_deep_sweep=textual_caches.forget_removed_widgets_lines)

    async def on_event(self, event: events.Event) -> None:
        """Every event, as Textual handles it; a key or the mouse is noted as the user's
        (the screen's quiet garbage collection waits for a pause, session/collector.py)."""
        if isinstance(event, (events.Key, events.MouseDown, events.MouseScrollDown,
                              events.MouseScrollUp)):  # fmt: skip
            collector.note_input()
        await super().on_event(event)

    def on_unmount(self) -> None:
        self.close_engine()
        collector.uninstall()
        if self._old_showwarning is not None:
            warnings.showwarning = self._old_showwarning
        sys.setswitchinterval(self._old_switch)

    def _showwarning(
        self,
        message: Warning | str,
        category: type[Warning],
        filename: str,
        lineno: int,
        file: TextIO | None = None,
        line: str | None = None,
    ) -> None:
        self.record_warning(f"{category.__name__}: {message}")

    def record_warning(self, text: str) -> None:
        """Keep a warning torch raised (thread-safe)."""
        with self._warnings_lock:
            if text not in self.captured_warnings:
                self.captured_warnings.append(text)

    def close_engine(self) -> None:
        """Stop the engine process, if the session has one (safe to call twice)."""
        close = getattr(self.session, "close", None)
        if close is not None:
            close()

    # -- errors of the app's own (ui/failures.py) ------------------------------------
    def report_failure(self, error: BaseException, where: str, source: object = None) -> None:
        """An error while drawing or describing something: the traceback to the log,
        one sentence on the status line (and in the pane that failed, when ``source``
        can show it); the app and the engine process go on."""
        path = self.failure_log.record(error, where)
        text = sentence(error, where, path)
        show = getattr(source, "show_failure", None)
        try:
            if show is not None:
                show(text)
            main = self.main_screen
            main.set_status(text, error=True)
            if self.failure_log.count == 1 or show is None:
                self.notify(text, title="freezeview hit a defect", severity="error", timeout=10)
        except Exception:  # saying it must not fail in turn
            pass

    def _handle_exception(self, error: Exception) -> None:
        # What the guarded handlers did not catch (a widget's render, a timer): Textual
        # would end the app; logged and said instead, unless the tests want it to end.
        if strict():
            super()._handle_exception(error)
            return
        self.report_failure(error, "drawing the screen")

    # -- commands --------------------------------------------------------------------
    def all_bindings(self) -> list[Binding]:
        """Every key of the main screen, the app's and the graph view's, for help."""
        from .widgets.graph_canvas_view import GraphCanvasView
        from .widgets.graph_view import GraphView

        out: list[Binding] = []
        # The graph view's own keys work while it has the focus (v shows it).
        graph = [*GraphView.BINDINGS, *GraphCanvasView.BINDINGS]
        for b in [*MainScreen.BINDINGS, *self.BINDINGS, *graph]:
            if isinstance(b, Binding):
                out.append(b)
        return out

    def get_system_commands(self, screen: Screen[Any]) -> Iterable[SystemCommand]:
        yield from super().get_system_commands(screen)
        main = self.main_screen
        for binding in MainScreen.BINDINGS:
            if not isinstance(binding, Binding):
                continue
            action = getattr(main, f"action_{binding.action}")
            yield SystemCommand(
                f"{binding.description} ({binding.key_display or binding.key})",
                binding.tooltip or binding.description,
                action,
            )
