"""The main screen's runs of the plan: explain, then the steps, as the model loads and
on each ``r``.

:class:`PlanRuns` works for :class:`~.main.MainScreen` (which holds the run's state: its
id, steps and verdicts): it starts the explain and the freezing workers
(:class:`~.engine_work.EngineWork`), takes what they give (the model loaded, the
verdicts, each step, the run's end, the final frozen module's ``.code``; the screen's
message handlers pass it on) to the widgets, and at a run's start lets the last run's
graphs go (:mod:`freezeview.session.collector`).
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual.widgets import Label

from ...session import collector
from ..messages import (
    EngineFailed,
    ExplanationReady,
    FinalCodeReady,
    ModelLoaded,
    StepReady,
    StepsFinished,
)

if TYPE_CHECKING:
    from ...session import PassSummary
    from .main import MainScreen

__all__ = ["PlanRuns"]


class PlanRuns:
    """The main screen's runs of the plan (see the module docstring)."""

    def __init__(self, screen: MainScreen) -> None:
        self.screen = screen
        #: The explain whose answers the screen takes (older ones' are stale).
        self.explain_request = 0
        self._explain_cancel = threading.Event()

    def model_loaded(self, message: ModelLoaded) -> None:
        """The model is open: its passes and IR shown, then explain, then the run."""
        screen = self.screen
        app = screen.fv_app
        screen.passes = _in_plan_order(message.passes, app.passes)
        enabled = (
            app.passes if app.passes is not None else [p.id for p in screen.passes if p.default]
        )
        unknown = [p for p in enabled if p not in {v.id for v in screen.passes}]
        if unknown:
            valid = ", ".join(v.id for v in screen.passes)
            screen.notify(
                f"unknown pass {', '.join(unknown)}; valid passes are: {valid}.",
                title="--passes",
                severity="error",
                timeout=10,
            )
        screen.steps_bar.set_passes(screen.passes, enabled)
        assert screen.session is not None
        screen.ir_pane.set_loaded(message.text, message.code, screen.session)
        screen.loading_model = False
        screen.sub_title = message.name
        took = f" in {message.load_seconds:.2f} s" if app.show_timings else ""
        screen.set_status(
            f"loaded {message.name}{took} — "
            f"{message.node_count} nodes after inlining; explaining and freezing…"
        )
        for warning in message.warnings:
            app.record_warning(warning)
        screen.show_step(screen.current_step)
        # Paint the IR first: the explain and freeze workers keep the GIL busy, and the
        # user should not wait for them to see the model.
        # Then explain, then freeze: one torch worker at a time leaves the event loop
        # a bigger share of the GIL than two competing ones.
        screen._run_after_explain = True
        screen.call_after_refresh(self.start_explain)

    def explanation_ready(self, message: ExplanationReady) -> None:
        """Verdicts for the current preserved names: the tree shows them."""
        screen = self.screen
        if message.request != self.explain_request:
            return  # an older request's (its reasons too): a newer one is on its way
        if tuple(screen.fv_app.preserved) != message.preserved:
            return
        screen.summaries = message.summaries
        toggled = screen._explaining and screen.run_id > 0
        if message.complete:
            # The first run waits for the reasons, as before: the verdicts come no later.
            screen._explaining = False
            self.start_pending_run()
        tree = screen.model_tree
        # The rebuilt tree puts its cursor back on this path after the next refresh: the
        # inspector shows the path's new view now (its reasons, pending or not).
        path = tree.selected_path
        tree.show(
            screen.session.name if screen.session else "model", screen.summaries, message.rows
        )
        screen.ir_pane.mark_attribute(path, refresh=False)
        screen._show_attribute(tree.view_of(path) if path else None)
        if message.complete and toggled:
            screen.set_status("verdicts and reasons updated (r re-runs the steps)")
        screen.query_one("#model-title", Label).update(
            layout=False,
            content=Text.assemble(
                "model  ", ("★ preserved: ", "magenta"), ", ".join(message.preserved) or "none"
            ),
        )

    def step_ready(self, message: StepReady) -> None:
        """A step of the current run arrived: the steps bar lists it."""
        screen = self.screen
        if message.run_id != screen.run_id:
            return
        # A step lives until a re-run: out of the collector's walks at once (its graph
        # comes when a view shows it, and is kept the same way then).
        collector.keep()
        screen.steps.append(message.step)
        # Shows the step if it is the first, or if n was pressed for it.
        screen.steps_bar.add_step(message.step, screen.fv_app.show_timings)
        screen.ir_pane.update_title()
        screen._update_tab_label()
        if message.step.error:
            screen.set_status(f"step {message.step.label} failed: {message.step.error}", error=True)

    def final_code_ready(self, message: FinalCodeReady) -> None:
        """The final frozen module's ``.code`` arrived (read when the view showed it)."""
        screen = self.screen
        # The .code view of a step from the clean-up on shows the final frozen module's.
        if message.run_id == screen.run_id and screen.ir_pane.view_mode == "code":
            screen.ir_pane.show_current()

    def steps_finished(self, message: StepsFinished) -> None:
        """The run is over: the status line says how it went."""
        screen = self.screen
        if message.run_id != screen.run_id:
            return
        # What the next run's start decides its deep collection from (not on its key).
        collector.note_run_end()
        screen.stepping = False
        screen.steps_bar.finish()
        # The .code view of a step from the clean-up on can read the final module's now.
        screen.ir_pane.run_finished = True
        if screen.ir_pane.view_mode == "code":
            screen.ir_pane.show_current()
        if not any(s.error for s in screen.steps):
            final = screen.steps[-1].node_count if screen.steps else 0
            took = f" in {message.seconds:.2f} s" if screen.fv_app.show_timings else ""
            screen.set_status(
                f"{message.count} steps{took}; final graph {final} nodes. "
                "n/p step, space preserve, t pass, r re-run, ? help"
            )
        screen.update_titles()

    # -- the plan's runs ---------------------------------------------------------------
    def start_explain(self) -> None:
        """Recompute verdicts for the current preserved names."""
        screen = self.screen
        screen._explaining = True
        # The last explain's replay of reasons stops: they would be stale on arrival.
        self._explain_cancel.set()
        self._explain_cancel = threading.Event()
        self.explain_request += 1
        screen.engine.explain(
            tuple(screen.fv_app.preserved),
            self.explain_request,
            self._explain_cancel,
            screen.model_tree.status_filter,
        )

    def start_run(self) -> None:
        """Run freezing from the start with the current plan."""
        screen = self.screen
        screen._cancel.set()
        screen._cancel = threading.Event()
        screen.run_id += 1
        screen.steps = []
        screen.steps_bar.clear_steps()
        screen.stepping = True
        screen._run_plan = (tuple(screen.fv_app.preserved), tuple(screen.enabled_passes()))
        screen.stale = False
        screen.show_step(-1)
        # The IR pane's diffs are computed here: the diff module's recent snapshots
        # (kept for reuse, up to a few dozen) are the last run's, never asked for again.
        from ...session import forget_recent

        forget_recent()
        # The engine session addresses the last run's graphs by key until the next run
        # asks: they go now, with everything else of that run. Once they are freed (off
        # the event loop: a big graph's objects take 0.15 s to free), the run starts.
        start = partial(
            self._collect_and_run,
            screen.run_id,
            tuple(screen.fv_app.preserved),
            tuple(screen.enabled_passes()),
            screen._cancel,
        )
        forget_runs = getattr(screen.session, "forget_runs", None)  # the engine process's
        if forget_runs is not None:
            collector.let_go(forget_runs(), then=partial(_on_loop, screen.app, start))
        else:
            start()

    def _collect_and_run(
        self,
        run_id: int,
        preserved: tuple[str, ...],
        passes: tuple[str, ...],
        cancel: threading.Event,
    ) -> None:
        """The run (unless another has started). The screen's deep collection waits for
        the quiet timer (screens/main.py), a key may come now: only when as many objects
        have joined the frozen ones as the last one left alive (a user who never
        paused), as counted at the last run's end, does it run here."""
        screen = self.screen
        try:
            collector.deep_sweep_if_due(collector.RUN_START_DUE, recount=False)
            if run_id == screen.run_id and not cancel.is_set():
                screen.engine.run_steps(run_id, preserved, passes, cancel)
        except Exception as exc:
            # No worker started, so none will say the run ended: said here as a failed
            # run is, or the screen reads "running…" for good (from the let-go thread,
            # the error would only end that thread).
            if run_id == screen.run_id:
                screen.post_message(EngineFailed.of_error("steps", exc))

    def start_pending_run(self) -> None:
        """Start the run that waited for the first explanation."""
        screen = self.screen
        if screen._run_after_explain:
            screen._run_after_explain = False
            self.start_run()

    def cancel_run(self) -> None:
        """Ask a running pipeline to stop before its next step."""
        screen = self.screen
        screen._cancel.set()


def _on_loop(app: Any, call: Callable[[], object]) -> None:
    """``call`` on the app's event loop (from another thread), unless the app closed."""
    with contextlib.suppress(RuntimeError):
        app.call_from_thread(call)


def _in_plan_order(passes: list[PassSummary], plan: list[str] | None) -> list[PassSummary]:
    """The pass list in the order the run takes them: with ``--passes``, the named ones
    first in the order given (as ``freezeview freeze --passes`` runs them, so the app's
    step numbers are the CLI's), then the rest in torch's order."""
    if not plan:
        return list(passes)
    rank = {pid: i for i, pid in enumerate(plan)}
    return sorted(passes, key=lambda p: rank.get(p.id, len(rank)))
