"""The main screen's engine work: the thread workers that call the engine session.

:class:`EngineWork` is a widget with nothing to draw. It holds the engine session and
runs every engine call the main screen makes (load, explain, the stepwise run, render,
export) in a thread worker, and posts what each gives (:mod:`freezeview.ui.messages`).
Being a widget, its workers are Textual workers like any other (listed in
``app.workers``, cancelled with the screen) and its messages bubble to the screen,
which routes them to the widgets that show them. A worker that fails posts
:class:`~freezeview.ui.messages.EngineFailed`; the screen says so in one sentence.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, cast

from textual import work
from textual.widget import Widget
from textual.worker import Worker, WorkerState, get_current_worker

from ...session import AttrSummary, BadInputError, StepSummary
from ..messages import (
    EngineFailed,
    ExplanationReady,
    Exported,
    ModelLoaded,
    Rendered,
    StepReady,
    StepsFinished,
)
from ..tree_rows import lay_out

if TYPE_CHECKING:
    from ...session import EngineSession
    from ..host import ScreenHost

__all__ = ["EngineWork"]


class EngineWork(Widget):
    """The engine session and the thread workers that call it; nothing on screen."""

    DEFAULT_CSS = "EngineWork { display: none; }"

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        #: The engine session, once the model has loaded.
        self.session: EngineSession | None = None

    @property
    def fv_app(self) -> ScreenHost:
        """The app hosting the screen, as the screen uses it."""
        return cast("ScreenHost", self.app)

    @work(thread=True, exclusive=True, exit_on_error=False, group="load", description="loading")
    def load_model(self) -> None:
        """Load the model, take its inlined graph's IR and list the passes."""
        session = self.fv_app.session
        if session is None:
            raise BadInputError("no model given: freezeview MODEL.pt opens one.")
        self.session = session
        opened = session.open()
        self.post_message(
            ModelLoaded(
                name=opened.name,
                text=opened.text,
                node_count=opened.node_count,
                code=opened.code,
                load_seconds=opened.load_seconds,
                warnings=list(opened.warnings),
                passes=list(opened.passes),
            )
        )

    @work(
        thread=True, exclusive=True, exit_on_error=False, group="explain", description="explaining"
    )
    def explain(
        self,
        preserved: tuple[str, ...],
        request: int = 0,
        cancel: threading.Event | None = None,
        status_filter: str = "all",
    ) -> None:
        """Compute every attribute's verdict under ``preserved``: torch's statuses first
        (reasons pending) when the reasons take longer, then the whole explanation;
        ``cancel`` (set by the next explain) stops the replay of the reasons. Each comes
        with the model tree's rows under ``status_filter``, laid out here: a big model's
        took the event loop a quarter of a second."""
        session = self.session
        assert session is not None
        worker = get_current_worker()

        def wanted() -> bool:
            return not worker.is_cancelled and not (cancel is not None and cancel.is_set())

        def post(summaries: list[AttrSummary], complete: bool) -> None:
            if wanted():
                rows = lay_out(summaries, status_filter)
                self.post_message(
                    ExplanationReady(
                        summaries,
                        preserved,
                        session.inventory,
                        request,
                        complete=complete,
                        rows=rows,
                    )
                )

        summaries = session.explain(
            preserved, statuses=lambda summaries: post(summaries, False), cancel=cancel
        )
        post(summaries, True)

    @work(thread=True, exclusive=True, exit_on_error=False, group="steps", description="freezing")
    def run_steps(
        self,
        run_id: int,
        preserved: tuple[str, ...],
        passes: tuple[str, ...],
        cancel: threading.Event,
    ) -> None:
        """Freeze one step at a time, posting each step as it is ready."""
        self._post_steps(run_id, preserved, passes, cancel)

    def _post_steps(
        self,
        run_id: int,
        preserved: tuple[str, ...],
        passes: tuple[str, ...],
        cancel: threading.Event,
    ) -> int:
        """Post each step of the run as it arrives, then StepsFinished; the count posted."""
        assert self.session is not None
        start = time.perf_counter()
        count = 0
        try:
            for step in self.session.run_steps(preserved, passes, cancel=cancel):
                if cancel.is_set():
                    break
                self.post_message(StepReady(run_id, step))
                count += 1
        finally:
            self.post_message(StepsFinished(run_id, count, time.perf_counter() - start))
        return count

    @work(thread=True, exclusive=True, exit_on_error=False, group="render", description="rendering")
    def render_step(self, step: StepSummary, before: int | None, out_dir: Path) -> None:
        """Render the step's graph and its diff to SVG (``before``: the key of the graph
        before it; the graphs are the engine's, named by key)."""
        assert self.session is not None
        stem = f"{step.index:02d}-{step.name}"
        self.post_message(Rendered(self.session.render_step(before, step.graph, out_dir, stem)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="export", description="exporting")
    def export(self, out_dir: Path, preserved: tuple[str, ...], passes: tuple[str, ...]) -> None:
        """Export everything like ``freezeview export``."""
        assert self.session is not None
        self.post_message(Exported(out_dir, self.session.export(out_dir, preserved, passes)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker state messages do not bubble: a failure is said as EngineFailed, which does.
        if event.state == WorkerState.ERROR:
            self.post_message(EngineFailed.of(event.worker))
