"""The main screen's engine work: thread workers, the messages they post, the plan's runs.

Every engine call happens in thread workers (``@work(thread=True, ...)``) that post
the typed messages of :mod:`freezeview.ui.messages`; handlers here draw them. The
calls go to the session, whose torch work runs in the engine process
(:mod:`freezeview.ui.remote_session`), so the event loop never waits on torch and keys
keep working while a model loads or freezes. See :mod:`.main_layout` for the layers.
"""

from __future__ import annotations

import gc
import textwrap
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING

from rich.style import Style
from rich.text import Text
from textual import work
from textual.widgets import Label
from textual.worker import Worker, WorkerState, get_current_worker

from ...engine.plumbing.errors import BadInputError, FreezeviewError
from ..messages import (
    EngineFailed,
    ExplanationReady,
    Exported,
    ModelLoaded,
    Rendered,
    StepReady,
    StepsFinished,
)
from ..views import StepView
from .main_ir_pane import MainIRPane

if TYPE_CHECKING:
    from ...engine.graph.snapshot_values import GraphSnapshot

__all__ = ["MainWorkers"]


class MainWorkers(MainIRPane):
    """The engine calls of the main screen and the handlers of their results."""

    # -- workers -------------------------------------------------------------------
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
    def explain(self, preserved: tuple[str, ...]) -> None:
        """Compute every attribute's verdict under ``preserved``."""
        assert self.session is not None
        views = self.session.explain(list(preserved))
        if not get_current_worker().is_cancelled:
            self.post_message(ExplanationReady(views, preserved, self.session.inventory))

    @work(thread=True, exclusive=True, exit_on_error=False, group="steps", description="freezing")
    def run_steps(
        self,
        run_id: int,
        preserved: tuple[str, ...],
        passes: tuple[str, ...],
        cancel: threading.Event,
    ) -> None:
        """Freeze one step at a time, posting each step as it is ready."""
        assert self.session is not None
        start = time.perf_counter()
        count = 0
        try:
            for step in self.session.run_steps(preserved, passes, cancel=cancel):
                if cancel.is_set():
                    return
                self.post_message(StepReady(run_id, step))
                count += 1
        finally:
            self.post_message(StepsFinished(run_id, count, time.perf_counter() - start))

    @work(thread=True, exclusive=True, exit_on_error=False, group="render", description="rendering")
    def render_step(self, step: StepView, before: GraphSnapshot | None, out_dir: Path) -> None:
        """Render the step's graph and its diff to SVG."""
        assert self.session is not None
        stem = f"{step.index:02d}-{step.name}"
        paths = self.session.render_step(before, step.snapshot, out_dir, stem)
        self.post_message(Rendered(paths))

    @work(thread=True, exclusive=True, exit_on_error=False, group="export", description="exporting")
    def export(self, out_dir: Path, preserved: tuple[str, ...], passes: tuple[str, ...]) -> None:
        """Export everything like ``freezeview export``."""
        assert self.session is not None
        paths = self.session.export(out_dir, preserved, passes)
        self.post_message(Exported(out_dir, paths))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        """Every worker failure ends here: one sentence on screen, the session goes on."""
        if event.state != WorkerState.ERROR:
            return
        error = event.worker.error
        if isinstance(error, FreezeviewError):
            message = error.message
        else:
            first = (str(error).strip().splitlines() or [type(error).__name__])[0]
            message = f"{type(error).__name__}: {first[:200]}"
        task = event.worker.group
        self.post_message(EngineFailed(task, message, fatal=task == "load"))

    # -- messages from workers -------------------------------------------------------
    def on_model_loaded(self, message: ModelLoaded) -> None:
        self.first_text = message.text
        self.loaded_code = message.code
        self.passes = message.passes
        app = self.fv_app
        enabled = app.passes if app.passes is not None else [p.id for p in self.passes if p.default]
        unknown = [p for p in enabled if p not in {v.id for v in self.passes}]
        if unknown:
            valid = ", ".join(v.id for v in self.passes)
            self.notify(
                f"unknown pass {', '.join(unknown)}; valid passes are: {valid}.",
                title="--passes",
                severity="error",
                timeout=10,
            )
        self.steps_bar.set_passes(self.passes, enabled)
        self.loading_model = False
        self.sub_title = message.name
        took = f" in {message.load_seconds:.2f} s" if self.fv_app.show_timings else ""
        self.set_status(
            f"loaded {message.name}{took} — "
            f"{message.node_count} nodes after inlining; explaining and freezing…"
        )
        for warning in message.warnings:
            self.fv_app.record_warning(warning)
        self.show_current()
        # Paint the IR first: the explain and freeze workers keep the GIL busy, and the
        # user should not wait for them to see the model.
        # Then explain, then freeze: one torch worker at a time leaves the event loop
        # a bigger share of the GIL than two competing ones.
        self._run_after_explain = True
        self.call_after_refresh(self.start_explain)

    def on_explanation_ready(self, message: ExplanationReady) -> None:
        if tuple(self.fv_app.preserved) != message.preserved:
            return  # an older request; a newer one is on its way
        self._explaining = False
        self.views = message.views
        self._start_pending_run()
        self.model_tree.show(
            self.session.name if self.session else "model", self.views, self.status_filter
        )
        self.refresh_inspector_for_attribute()
        self.query_one("#model-title", Label).update(
            layout=False,
            content=Text.assemble(
                "model  ", ("★ preserved: ", "magenta"), ", ".join(message.preserved) or "none"
            ),
        )

    def on_step_ready(self, message: StepReady) -> None:
        if message.run_id != self.run_id:
            return
        self.steps.append(message.step)
        self.steps_bar.add_step(message.step, self.fv_app.show_timings)
        if self.current_step < 0:
            self.current_step = 0
        elif self._pending_next and self.current_step == len(self.steps) - 2:
            self._pending_next -= 1
            self.current_step += 1
        else:
            self.update_titles()
        if message.step.error:
            self.set_status(f"step {message.step.name} failed: {message.step.error}", error=True)

    def on_steps_finished(self, message: StepsFinished) -> None:
        if message.run_id != self.run_id:
            return
        self.stepping = False
        # A full garbage collection walks every object; with a big model's snapshots
        # and highlighted lines that is ~200 ms of frozen event loop at a random key
        # press. Objects alive now are long-lived: move them out of the collector's
        # reach (refcounting still frees them when a re-run drops them).
        gc.freeze()
        self.prefetch(self.run_id, list(self.steps))
        self._pending_next = 0
        if not any(s.error for s in self.steps):
            final = self.steps[-1].snapshot.node_count if self.steps else 0
            took = f" in {message.seconds:.2f} s" if self.fv_app.show_timings else ""
            self.set_status(
                f"{message.count} steps{took}; final graph {final} nodes. "
                "n/p step, space preserve, t pass, r re-run, ? help"
            )
        self.update_titles()

    def on_rendered(self, message: Rendered) -> None:
        where = message.paths[0].parent if message.paths else "?"
        names = ", ".join(p.name for p in message.paths)
        self.notify(f"wrote {names} in {where}", title="rendered")
        for note in self.session.last_notes if self.session else []:
            self.notify(note, severity="warning")
        pictures = [p for p in message.paths if p.suffix in (".svg", ".png")]
        self.last_output = (pictures or message.paths or [None])[-1]
        self._status_with_link("rendered", self.last_output)

    def on_exported(self, message: Exported) -> None:
        self.notify(f"{len(message.paths)} files in {message.directory}", title="exported")
        for note in self.session.last_notes if self.session else []:
            self.notify(note, severity="warning")
        page = message.directory / "index.html"
        self.last_output = page if page.exists() else message.directory
        self._status_with_link(f"exported {len(message.paths)} files:", self.last_output)

    def _status_with_link(self, what: str, path: Path | None) -> None:
        """The status line names the written file as a link (OSC 8 where it is supported).

        A terminal that shows links opens it on a click; ``o`` opens it in the local
        browser; over SSH the path is there to copy.
        """
        if path is None:
            self.set_status(what)
            return
        uri = path.resolve().as_uri()
        text = Text(f"{what} ")
        text.append(str(path), Style(link=uri, underline=True))
        text.append("  (o opens it)", "dim")
        self.set_status(text)

    def on_engine_failed(self, message: EngineFailed) -> None:
        self.set_status(f"{message.task} failed: {message.message}", error=True)
        self.notify(message.message, title=f"{message.task} failed", severity="error", timeout=8)
        if message.task == "load":
            self.loading_model = False
            self.add_class("-failed")
            wrapped = textwrap.fill(message.message, width=max(40, self.ir.size.width - 2))
            self.ir.set_document(f"could not open the model:\n\n{wrapped}\n", "text")
            self.update_titles()
        elif message.task == "explain":
            self._explaining = False
            self._start_pending_run()
        elif message.task == "steps":
            self.stepping = False

    # -- plan ----------------------------------------------------------------------
    def start_explain(self) -> None:
        """Recompute verdicts for the current preserved names."""
        self._explaining = True
        self.explain(tuple(self.fv_app.preserved))

    def start_run(self) -> None:
        """Run freezing from the start with the current plan."""
        self._cancel.set()
        self._cancel = threading.Event()
        self.run_id += 1
        self.steps = []
        self._pending_next = 0
        self.steps_bar.clear_steps()
        self.stepping = True
        self._run_plan = (tuple(self.fv_app.preserved), tuple(self.enabled_passes()))
        self.stale = False
        self.current_step = -1
        self.show_current()
        self.run_steps(
            self.run_id, tuple(self.fv_app.preserved), tuple(self.enabled_passes()), self._cancel
        )

    def _start_pending_run(self) -> None:
        if self._run_after_explain:
            self._run_after_explain = False
            self.start_run()

    def cancel_run(self) -> None:
        """Ask a running pipeline to stop before its next step."""
        self._cancel.set()
