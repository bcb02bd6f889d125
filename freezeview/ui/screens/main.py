"""The main screen: model tree, IR pane, inspector and steps bar, with every key.

Every engine call happens in thread workers (``@work(thread=True, ...)``) that post
the typed messages of :mod:`freezeview.ui.messages`; handlers here draw them. The
calls go to the session, whose torch work runs in the engine process
(:mod:`freezeview.ui.remote_session`), so the event loop never waits on torch and keys
keep working while a model loads or freezes.
"""

from __future__ import annotations

import gc
import os
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import DataTable, Footer, Header, Input, Label, SelectionList, Tab, Tabs, Tree
from textual.worker import Worker, WorkerState, get_current_worker

from ...engine.errors import BadInputError, FreezeviewError
from ..messages import (
    EngineFailed,
    ExplanationReady,
    Exported,
    Highlighted,
    ModelLoaded,
    Rendered,
    StepReady,
    StepsFinished,
)
from ..views import AttrView, PassView, StepView
from ..widgets.inspector import Inspector, attribute_panel, node_panel
from ..widgets.ir_view import IRView, highlight_lines
from ..widgets.model_tree import FILTERS, ModelTree
from ..widgets.steps_bar import StepsBar

if TYPE_CHECKING:
    from ...engine.snapshot_values import GraphSnapshot
    from ..host import ScreenHost
    from ..remote_session import RemoteSession
    from ..session import Session

__all__ = ["MainScreen"]

VIEW_MODES = ("ir", "code", "diff")
# Documents up to this many lines are highlighted on the spot; longer ones in a worker
# so that stepping through a big graph never holds the event loop.
_SYNC_HIGHLIGHT_LINES = 120


class MainScreen(Screen[None]):
    """The one screen users work in."""

    BINDINGS = [
        # First, so a narrow footer still shows it (it only appears when narrow).
        Binding("w", "next_pane", "Pane", tooltip="Narrow terminals: show the next pane (tabs)"),
        Binding("n", "next_step", "Next", tooltip="Show the next freezing step"),
        Binding("p", "previous_step", "Prev", tooltip="Show the previous freezing step"),
        Binding("r", "rerun", "Re-run", tooltip="Run freezing again from the start with the plan"),
        Binding(
            "space",
            "toggle_preserve",
            "Preserve",
            tooltip="Add/remove the selected attribute to preserved_attrs (explanation updates)",
        ),
        Binding("t", "toggle_pass", "Pass", tooltip="Switch the highlighted pass on or off"),
        Binding(
            "d", "cycle_view", "IR/code/diff", tooltip="Show the IR, the .code or the step's diff"
        ),
        Binding(
            "f", "cycle_filter", "Filter", tooltip="Show all / inlined / kept / dropped attributes"
        ),
        Binding("g", "render", "SVG", tooltip="Render the current step's graph and diff to SVG"),
        Binding("e", "export", "Export", tooltip="Write everything `freezeview export` writes"),
        Binding(
            "o",
            "open_output",
            "Open",
            tooltip="Open the last picture (g) or review page (e) in the local browser",
        ),
        Binding("slash", "search", "Search", key_display="/", tooltip="Search the IR pane"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
    ]

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    #: Position in the step timeline shown in the IR pane (-1: the loaded model).
    current_step: reactive[int] = reactive(-1, init=False)
    #: What the IR pane shows: ``ir``, ``code`` or ``diff``.
    view_mode: reactive[str] = reactive("ir", init=False)
    #: Which attributes the model tree lists: ``all``, ``inlined``, ``kept``, ``dropped``.
    status_filter: reactive[str] = reactive("all", init=False)
    #: True while the model loads (panes show a loading state).
    loading_model: reactive[bool] = reactive(True)
    #: True while freezing steps are being computed.
    stepping: reactive[bool] = reactive(False)
    #: True when the plan changed since the steps were computed (press r).
    stale: reactive[bool] = reactive(False)
    #: Which pane a narrow terminal shows (``model``, ``ir``, ``inspector``, ``steps``).
    narrow_pane: reactive[str] = reactive("ir")

    def __init__(self) -> None:
        super().__init__()
        self.session: Session | RemoteSession | None = None
        self.steps: list[StepView] = []
        #: The last picture rendered (g) or review page exported (e): what ``o`` opens.
        self.last_output: Path | None = None
        self.views: list[AttrView] = []
        self.passes: list[PassView] = []
        #: IR text of the loaded model, shown until the first step arrives.
        self.first_text = ""
        self.loaded_code = ""
        self.run_id = 0
        self._cancel = threading.Event()
        self._pending_next = 0
        self._doc_cache: dict[tuple[Any, ...], tuple[str, list[Text]]] = {}
        self._line_index: dict[int, tuple[dict[int, int], dict[int, int]]] = {}
        self._explaining = False
        self._search_anchor = 0
        self._run_after_explain = False
        self._run_plan: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())

    @property
    def fv_app(self) -> ScreenHost:
        """The app that hosts this screen, as the screen uses it (no import of ui/app)."""
        return self.app  # type: ignore[return-value]

    # -- layout --------------------------------------------------------------------
    def compose(self) -> ComposeResult:
        yield Header()
        yield Tabs(
            Tab("Model", id="tab-model"),
            Tab("IR", id="tab-ir"),
            Tab("Inspector", id="tab-inspector"),
            Tab("Steps", id="tab-steps"),
            active="tab-ir",
            id="narrow-tabs",
        )
        with Horizontal(id="main"):
            with Vertical(id="model-pane", classes="pane"):
                yield Label("model", id="model-title", classes="pane-title")
                yield ModelTree(id="tree")
            with Vertical(id="ir-pane", classes="pane"):
                yield Label("IR", id="ir-title", classes="pane-title")
                yield IRView(id="ir")
                yield Input(
                    placeholder="search the IR (enter: next match, esc: close)", id="search"
                )
            with Vertical(id="inspector-pane", classes="pane"):
                yield Label("inspector", classes="pane-title")
                yield Inspector(id="inspector")
        yield StepsBar(id="steps-bar")
        yield Label("", id="status")
        yield Footer()

    def on_mount(self) -> None:
        self.title = "freezeview"
        self.sub_title = self.fv_app.model_label
        self.watch_narrow_pane(self.narrow_pane)
        self.watch_loading_model(True)
        self.set_status(f"loading {self.fv_app.model_label} (torch.jit.load)…")
        self.query_one(IRView).focus()
        self.load_model()

    # -- widgets -------------------------------------------------------------------
    @property
    def model_tree(self) -> ModelTree:
        """The model tree."""
        return self.query_one(ModelTree)

    @property
    def ir(self) -> IRView:
        """The IR pane's text view."""
        return self.query_one(IRView)

    @property
    def inspector(self) -> Inspector:
        """The inspector."""
        return self.query_one(Inspector)

    @property
    def steps_bar(self) -> StepsBar:
        """The steps bar."""
        return self.query_one(StepsBar)

    def set_status(self, text: str | Text, error: bool = False) -> None:
        """One line above the footer: what the app is doing, or the last error."""
        label = self.query_one("#status", Label)
        # Fixed-size labels: no layout pass (a full-screen layout costs tens of ms).
        label.update(text, layout=False)
        label.set_class(error, "-error")

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

    @work(
        thread=True,
        exclusive=True,
        exit_on_error=False,
        group="highlight",
        description="highlighting",
    )
    def highlight(self, key: tuple[Any, ...], text_fn: Any, mode: str) -> None:
        """Build (and lex) a document off the event loop."""
        text = text_fn()
        lines = highlight_lines(text, mode)
        if not get_current_worker().is_cancelled:
            self.post_message(Highlighted(key, lines, text))

    @work(
        thread=True, exclusive=True, exit_on_error=False, group="prefetch", description="prefetch"
    )
    def prefetch(self, run_id: int, steps: list[StepView]) -> None:
        """Highlight every step's IR ahead of time, so stepping only swaps lines."""
        worker = get_current_worker()
        for i, step in enumerate(steps):
            if worker.is_cancelled or run_id != self.run_id:
                return
            key = (run_id, i, "ir")
            if key in self._doc_cache:
                continue
            text = step.snapshot.text
            self.post_message(Highlighted(key, highlight_lines(text, "ir"), text, prefetch=True))
        # Every step's highlighted IR exists now: long-lived, and big. Left in the
        # collector's reach, each full collection walks it (~30 ms of frozen event loop at
        # a random key press), so it joins the objects frozen when the steps arrived.
        gc.freeze()

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

    def on_highlighted(self, message: Highlighted) -> None:
        text = message.text
        self._doc_cache[message.key] = (text, message.lines)
        if message.key == self.document_key() and not (
            message.prefetch and self.ir.document == text and self.ir.highlighted
        ):
            self.ir.set_document(text, self.view_mode, message.lines)
            self.refresh_marks()

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

    def action_open_output(self) -> None:
        """Open the last rendered picture or exported page in the local browser."""
        path = self.last_output
        if path is None:
            self.notify("nothing written yet: g renders the step, e exports", timeout=3)
            return
        if not _has_local_browser():
            self.set_status(f"no browser on this machine (SSH?): open {path} where you are")
            return
        self.app.open_url(path.resolve().as_uri())
        self.set_status(f"opened {path} in the browser")

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

    def enabled_passes(self) -> list[str]:
        """Pass ids checked in the steps bar."""
        return [str(v) for v in self.steps_bar.passes.selected]

    # -- reactives -----------------------------------------------------------------
    def watch_current_step(self, old: int, new: int) -> None:
        self.show_current()
        if 0 <= new < self.steps_bar.timeline.row_count:
            self.steps_bar.timeline.move_cursor(row=new, animate=False)

    def watch_view_mode(self, mode: str) -> None:
        self.show_current()

    def watch_status_filter(self, value: str) -> None:
        if self.views:
            self.model_tree.show(self.session.name if self.session else "model", self.views, value)

    def watch_loading_model(self, value: bool) -> None:
        # A static loading state rather than Textual's animated LoadingIndicator: the
        # animation would compete for the GIL with the worker importing torch.
        self.set_class(value, "-loading")
        if value:
            self.ir.set_document(f"loading {self.fv_app.model_label} …\n", "text")

    def watch_stepping(self, value: bool) -> None:
        self.set_class(value, "-stepping")
        self.update_titles()

    def watch_stale(self, value: bool) -> None:
        self.set_class(value, "-stale")
        self.update_titles()

    def watch_narrow_pane(self, pane: str) -> None:
        for name in ("model", "ir", "inspector", "steps"):
            self.set_class(name == pane, f"-show-{name}")
        if self.has_class("-narrow"):
            # The pane's own widget takes the keys (space on the tree, t on the passes).
            target = {"model": "#tree", "ir": "#ir", "inspector": "#inspector", "steps": "#passes"}
            self.call_after_refresh(self.query_one(target[pane]).focus)

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The pane switcher only matters (and only shows in the footer) when narrow.
        if action == "next_pane":
            return self.has_class("-narrow")
        return True

    def on_resize(self) -> None:
        # Crossing the 120-column breakpoint shows or hides the pane switcher.
        self.call_after_refresh(self.refresh_bindings)

    def action_next_pane(self) -> None:
        """Show the next pane on a narrow terminal."""
        order = ("model", "ir", "inspector", "steps")
        nxt = order[(order.index(self.narrow_pane) + 1) % len(order)]
        self.query_one(Tabs).active = f"tab-{nxt}"

    # -- the IR pane ---------------------------------------------------------------
    def current(self) -> StepView | None:
        """The step shown (None before the first step arrives)."""
        if 0 <= self.current_step < len(self.steps):
            return self.steps[self.current_step]
        return None

    def current_snapshot(self) -> GraphSnapshot | None:
        """The graph shown in the IR pane."""
        step = self.current()
        return step.snapshot if step is not None else None

    def document_key(self) -> tuple[Any, ...]:
        """Identifies what the IR pane should show now."""
        return (self.run_id, self.current_step, self.view_mode)

    def _document_text(self) -> Any:
        """A function building the current document's text (may be slow for diffs)."""
        step = self.current()
        mode = self.view_mode
        snap = self.current_snapshot()
        if snap is None:
            preview = self.first_text if mode != "code" else self.loaded_code
            return lambda: preview
        if mode == "ir":
            return lambda: snap.text
        if mode == "code":
            code = self._code_for(self.current_step)
            return lambda: code
        previous = self.steps[self.current_step - 1].snapshot if self.current_step > 0 else None
        if step is None or previous is None:
            return lambda: "(the first step has nothing before it to compare with)\n"
        session = self.session
        assert session is not None
        a = f"{self.current_step - 1:02d}-{self.steps[self.current_step - 1].name}"
        b = f"{step.index:02d}-{step.name}"

        def build() -> str:
            text = session.diff_text(previous, snap, a, b)
            return text or f"(step {step.name} did not change the graph)\n"

        return build

    def _code_for(self, index: int) -> str:
        # The pipeline keeps graphs, not modules, per step: a step's own code is shown
        # when the engine gives it; otherwise the loaded module's code up to the
        # attribute folding, and the final frozen module's from the clean-up on.
        for i in range(min(index, len(self.steps) - 1), -1, -1):
            code = self.steps[i].code
            if code:
                return code
        step = self.current()
        final = self.session.final_code if self.session else None
        if step is not None and step.name not in ("inline", "fold_attributes") and final:
            return "# .code of the final frozen module\n" + final
        return self.loaded_code

    def show_current(self) -> None:
        """Put the current step's document in the IR pane (highlighting off the loop)."""
        key = self.document_key()
        cached = self._doc_cache.get(key)
        if cached is not None:
            self.ir.set_document(cached[0], self.view_mode, cached[1])
        else:
            build = self._document_text()
            snap = self.current_snapshot()
            cheap = self.view_mode != "diff" or (snap is not None and snap.node_count < 200)
            text = build() if cheap else ""
            if cheap and text.count("\n") < _SYNC_HIGHLIGHT_LINES:
                lines = highlight_lines(text, self.view_mode)
                self._doc_cache[key] = (text, lines)
                self.ir.set_document(text, self.view_mode, lines)
            else:
                # Plain text now (cheap), colours when the worker is done.
                self.ir.set_document(text or "computing…", self.view_mode)
                self.highlight(key, (lambda: text) if cheap else build, self.view_mode)
        self.refresh_marks()
        self.update_titles()

    def update_titles(self) -> None:
        """IR pane title and timeline title."""
        step = self.current()
        mode = {"ir": "IR", "code": ".code", "diff": "diff"}[self.view_mode]
        title = Text()
        if self.has_class("-failed"):
            title.append("no model", "bold red")
        elif step is None:
            title.append("loaded model (inlined forward)", "bold")
        else:
            title.append(f"step {self.current_step + 1}/{len(self.steps)}", "bold")
            title.append(f" · {step.name} · ")
            title.append(f"+{step.added} ", "green")
            title.append(f"-{step.removed} ", "red")
            title.append(f"~{step.changed_nodes}", "yellow")
            if step.numerics:
                title.append(f" · Δ {step.numerics}")
        title.append(f"  [{mode}]", "bold cyan")
        snap = self.current_snapshot()
        if snap is not None:
            title.append(f"  {snap.node_count} nodes", "dim")
        self.query_one("#ir-title", Label).update(title, layout=False)
        status = Text("steps ")
        if self.stepping:
            status.append("running…", "bold yellow")
        else:
            status.append(f"{len(self.steps)}", "bold")
        if self.stale:
            status.append("  plan changed: press r to re-run", "bold black on yellow")
        self.steps_bar.set_title(status)
        if self.has_class("-narrow"):
            tab = self.query_one("#tab-ir", Tab)
            label = f"IR {self.current_step + 1}/{len(self.steps)}"
            if tab.label_text != label:
                tab.label = label

    def line_index(self, snap: GraphSnapshot) -> tuple[dict[int, int], dict[int, int]]:
        """Cached IR line <-> node map for a snapshot."""
        from ...engine.facts import line_index

        key = id(snap)
        if key not in self._line_index:
            if len(self._line_index) > 64:
                self._line_index.clear()
            self._line_index[key] = line_index(snap)
        return self._line_index[key]

    def refresh_marks(self) -> None:
        """Mark the IR lines that read or write the selected attribute."""
        snap = self.current_snapshot()
        path = self.model_tree.selected_path if self.views else None
        if snap is None or path is None or self.view_mode != "ir":
            self.ir.mark_lines(())
            return
        from ...engine.facts import attribute_node_ids

        _by_line, by_node = self.line_index(snap)
        ids = attribute_node_ids(snap, path)
        self.ir.mark_lines(by_node[i] for i in ids if i in by_node)

    def refresh_inspector_for_attribute(self) -> None:
        """Show the selected attribute in the inspector."""
        view = self.model_tree.selected_view
        if view is None:
            return
        info = (
            self.session.inventory.by_path(view.path)
            if self.session and self.session.inventory
            else None
        )
        self.inspector.show(attribute_panel(view, info, len(self.ir.marked_lines)))

    @on(Tree.NodeHighlighted, "#tree")
    def _attribute_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        self.refresh_marks()
        self.refresh_inspector_for_attribute()
        marks = sorted(self.ir.marked_lines)
        if (
            marks
            and not self.ir.scroll_offset.y
            <= marks[0]
            < self.ir.scroll_offset.y + self.ir.size.height
        ):
            self.ir.scroll_to(y=max(0, marks[0] - 3), animate=False)

    @on(IRView.CursorMoved)
    def _ir_line_moved(self, event: IRView.CursorMoved) -> None:
        snap = self.current_snapshot()
        if snap is None or self.view_mode != "ir" or not event.view.has_focus:
            return
        from ...engine.facts import node_facts

        by_line, _ = self.line_index(snap)
        node_id = by_line.get(event.line)
        if node_id is not None:
            self.inspector.show(node_panel(node_facts(snap, node_id)))

    @on(DataTable.RowSelected, "#timeline")
    def _timeline_selected(self, event: DataTable.RowSelected) -> None:
        if event.cursor_row != self.current_step and 0 <= event.cursor_row < len(self.steps):
            self.current_step = event.cursor_row

    @on(SelectionList.SelectedChanged, "#passes")
    def _passes_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        self.update_stale()

    def update_stale(self) -> None:
        """The plan differs from the one the steps were computed with."""
        plan = (tuple(self.fv_app.preserved), tuple(self.enabled_passes()))
        self.stale = bool(self.run_id) and plan != self._run_plan

    @on(Tabs.TabActivated, "#narrow-tabs")
    def _narrow_tab(self, event: Tabs.TabActivated) -> None:
        if event.tab.id:
            self.narrow_pane = event.tab.id.removeprefix("tab-")

    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        matches = self.ir.search(event.value)
        if matches:
            # Typing refines the query: go to the first match from where the search began.
            self.ir.cursor_line = next((m for m in matches if m >= self._search_anchor), matches[0])
        self.set_status(f"/{event.value}: {len(matches)} matching lines" if event.value else "")

    @on(Input.Submitted, "#search")
    def _search_next(self, event: Input.Submitted) -> None:
        self.ir.next_match()

    def key_escape(self) -> None:
        search = self.query_one("#search", Input)
        if search.has_class("-visible"):
            search.remove_class("-visible")
            self.ir.focus()

    # -- actions -------------------------------------------------------------------
    def action_next_step(self) -> None:
        """Show the next step (waits for it if it is still being computed)."""
        if self.current_step + 1 < len(self.steps):
            self.current_step += 1
        elif self.stepping:
            self._pending_next = 1
            self.set_status("next step still running; it will show when ready")
        else:
            self.notify("this is the last step", timeout=2)

    def action_previous_step(self) -> None:
        """Show the previous step."""
        self._pending_next = 0
        if self.current_step > 0:
            self.current_step -= 1
        else:
            self.notify("this is the first step", timeout=2)

    def action_rerun(self) -> None:
        """Freeze again from the start with the current plan."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        self.start_run()
        self.set_status("re-running with the current plan…")

    def action_toggle_preserve(self) -> None:
        """Add or remove the selected attribute from ``preserved_attrs``."""
        path = self.model_tree.selected_path
        if not path:
            self.notify("select an attribute or module in the model tree first", timeout=3)
            return
        preserved = self.fv_app.preserved
        if path in preserved:
            preserved.remove(path)
            verb = "no longer preserved"
        else:
            preserved.append(path)
            verb = "preserved"
        self.set_status(f"{path} {verb}; explanation updating (r re-runs the steps)")
        self.update_stale()
        self.start_explain()

    def action_toggle_pass(self) -> None:
        """Switch the highlighted pass on or off."""
        lst = self.steps_bar.passes
        if lst.option_count == 0:
            return
        index = lst.highlighted if lst.highlighted is not None else 0
        option = lst.get_option_at_index(index)
        lst.toggle(option.id if option.id is not None else index)  # type: ignore[arg-type]
        on = option.id in lst.selected
        self.set_status(f"pass {option.id} {'on' if on else 'off'}: press r to re-run")
        self.update_stale()

    def action_cycle_view(self) -> None:
        """IR → code → diff → IR."""
        self.view_mode = VIEW_MODES[(VIEW_MODES.index(self.view_mode) + 1) % len(VIEW_MODES)]

    def action_cycle_filter(self) -> None:
        """Cycle the model tree's status filter."""
        self.status_filter = FILTERS[(FILTERS.index(self.status_filter) + 1) % len(FILTERS)]
        self.set_status(f"model tree shows: {self.status_filter}")

    def action_render(self) -> None:
        """Render the current step (graph and diff) to SVG files."""
        step = self.current()
        if step is None:
            self.notify("no step to render yet", timeout=2)
            return
        before = self.steps[self.current_step - 1].snapshot if self.current_step > 0 else None
        out = self.fv_app.output_dir / "steps"
        self.set_status(f"rendering step {step.name} into {out}…")
        self.render_step(step, before, out)

    def action_export(self) -> None:
        """Export everything into the output directory."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        out = self.fv_app.output_dir / "export"
        self.set_status(f"exporting into {out}…")
        self.export(out, tuple(self.fv_app.preserved), tuple(self.enabled_passes()))

    def action_search(self) -> None:
        """Open the search box of the IR pane."""
        if self.has_class("-narrow"):
            self.query_one(Tabs).active = "tab-ir"
        search = self.query_one("#search", Input)
        self._search_anchor = self.ir.cursor_line
        search.add_class("-visible")
        search.focus()

    def action_help(self) -> None:
        """Show every key."""
        from .help import HelpScreen

        app = self.fv_app
        self.app.push_screen(HelpScreen(app.all_bindings(), app.captured_warnings))


def _has_local_browser() -> bool:
    """Whether a browser can open on this machine (not over a plain SSH session)."""
    if sys.platform in ("darwin", "win32"):
        return True
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    return not os.environ.get("SSH_CONNECTION") and bool(os.environ.get("BROWSER"))
