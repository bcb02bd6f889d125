"""The main screen: model tree, IR pane, inspector and steps bar, with every key.

The widgets (:mod:`freezeview.ui.widgets`) own what they show, their state and their
own keys, and say what the user did by messages; this screen holds the plan's run (the
steps, the verdicts; started and received by :class:`~.plan_runs.PlanRuns`, a base class
of it), has :class:`~.engine_work.EngineWork` run every engine call in a thread worker,
and routes:

- the widgets' messages: the model tree's ``PreserveToggled`` (explain again) and
  ``AttributeSelected`` (IR marks, inspector), the steps bar's ``StepSelected`` (the IR
  pane shows that step), ``PassToggled`` and ``PassesChanged`` (the plan changed), the IR
  pane's ``NodeSelected`` (inspector), and ``Status`` from any of them;
- the workers' results (:mod:`freezeview.ui.messages`) to the widgets that show them.
  Every worker failure ends in one handler, :meth:`MainScreen.on_engine_failed`.

The screen's keys (``BINDINGS``) work wherever the focus is; their actions ask the
widget concerned. A new view of a step (a graph view) is one more widget: composed in
:meth:`MainScreen.compose`, given the step in :meth:`MainScreen.show_step`; its own
engine work runs in its own workers, which post ``EngineFailed`` when they fail (as the
IR pane's highlighting does).
"""

from __future__ import annotations

import threading
from typing import TYPE_CHECKING, cast

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive, var
from textual.screen import Screen
from textual.widgets import Header, Label, Tab, Tabs

from ...session import AttrSummary, PassSummary, StepSummary, collector
from ..failures import Guarded
from ..messages import (
    EngineFailed,
    ExplanationReady,
    Exported,
    FinalCodeReady,
    ModelLoaded,
    Rendered,
    Status,
    StepReady,
    StepsFinished,
)
from ..widgets.box_panel import selection_panel
from ..widgets.graph_view import GraphView
from ..widgets.inspector import Inspector, attribute_panel, node_panel, step_panel
from ..widgets.ir_pane import IRPane
from ..widgets.ir_view import IRView
from ..widgets.keys_footer import KeysFooter
from ..widgets.model_tree import ModelTree
from ..widgets.status_line import StatusLine
from ..widgets.steps_bar import StepsBar
from .delivery import Delivery
from .engine_work import EngineWork
from .main_keys import MAIN_KEYS
from .plan_runs import PlanRuns

if TYPE_CHECKING:
    from ...session import EngineSession
    from ..host import ScreenHost

__all__ = ["MainScreen"]


class MainScreen(Guarded, Screen[None]):
    """The one screen users work in (see the module docstring)."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = MAIN_KEYS

    # The screen draws none of these itself: their watchers update the widgets that
    # show them. As reactives they repainted the whole screen at every change (a full
    # frame: 50-100 ms at 160x48, on r, space and t).
    #: True while the model loads (the IR pane shows a loading state).
    loading_model: var[bool] = var(True)
    #: True while freezing steps are being computed.
    stepping: var[bool] = var(False)
    #: True when the plan changed since the steps were computed (press r).
    stale: var[bool] = var(False)
    #: The graph view (v) is shown.
    graph_shown = False
    #: Which pane a narrow terminal shows (``model``, ``ir``, ``inspector``, ``steps``).
    narrow_pane: reactive[str] = reactive("ir")

    def __init__(self) -> None:
        super().__init__()
        #: The current run's steps, in order, as they arrive.
        self.steps: list[StepSummary] = []
        #: Every attribute's verdict under the current preserved names.
        self.summaries: list[AttrSummary] = []
        self.passes: list[PassSummary] = []
        #: Which run the steps belong to (0: none yet); older runs' messages are dropped.
        self.run_id = 0
        self._cancel = threading.Event()
        self._explaining = False
        self._run_after_explain = False
        self._run_plan: tuple[tuple[str, ...], tuple[str, ...]] = ((), ())
        #: Starts the explain and the runs, and takes what their workers give.
        self.runs = PlanRuns(self)
        #: The attribute's panel last put in the inspector (its marks update it).
        self._attribute_shown: object = None

    @property
    def session(self) -> EngineSession | None:
        """The engine session, once the model has loaded (:class:`EngineWork` holds it)."""
        return self.engine.session

    @property
    def fv_app(self) -> ScreenHost:
        """The app that hosts this screen, as the screen uses it (no import of ui/app)."""
        # Any app with ScreenHost's attributes may host the screen; FreezeviewApp does.
        return cast("ScreenHost", self.app)

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
                yield ModelTree(id="tree", screen_space=True)
            yield GraphView(id="graph-pane", classes="pane")
            yield IRPane(id="ir-pane", classes="pane")
            with Vertical(id="inspector-pane", classes="pane"):
                yield Label("inspector", classes="pane-title")
                yield Inspector(id="inspector")
        yield StepsBar(id="steps-bar")
        yield StatusLine("", id="status")
        yield KeysFooter()
        yield EngineWork(id="engine")

    @property
    def engine(self) -> EngineWork:
        """The widget that runs the engine calls in thread workers."""
        return self.query_one(EngineWork)

    @property
    def model_tree(self) -> ModelTree:
        """The model tree."""
        return self.query_one(ModelTree)

    @property
    def ir_pane(self) -> IRPane:
        """The IR pane."""
        return self.query_one(IRPane)

    @property
    def ir(self) -> IRView:
        """The IR pane's text view."""
        return self.query_one(IRView)

    @property
    def graph_view(self) -> GraphView:
        """The graph view (shown by ``v``)."""
        return self.query_one(GraphView)

    @property
    def inspector(self) -> Inspector:
        """The inspector."""
        return self.query_one(Inspector)

    @property
    def steps_bar(self) -> StepsBar:
        """The steps bar."""
        return self.query_one(StepsBar)

    # -- what the widgets hold, read here ----------------------------------------------
    @property
    def current_step(self) -> int:
        """The step shown (the steps bar's; -1: the loaded model)."""
        return self.steps_bar.current_step

    @property
    def view_mode(self) -> str:
        """What the IR pane shows: ``ir``, ``code`` or ``diff``."""
        return self.ir_pane.view_mode

    @property
    def status_filter(self) -> str:
        """Which attributes the model tree lists."""
        return self.model_tree.status_filter

    def enabled_passes(self) -> list[str]:
        """Pass ids checked in the steps bar."""
        return self.steps_bar.enabled_passes()

    def set_status(self, text: str | Text, error: bool = False) -> None:
        """One line above the footer: what the app is doing, or the last error."""
        self.query_one(StatusLine).show(text, error)

    def show_failure(self, text: str) -> None:
        """A handler of this screen failed (ui/failures.py): the screen's handlers
        describe things in the inspector, which says so instead."""
        self.inspector.show(Text(text, "bold red"))

    def update_titles(self) -> None:
        """The IR pane's and the timeline's titles, and the narrow IR tab's label."""
        self.ir_pane.update_title()
        self.steps_bar.update_title()
        self._update_tab_label()

    def _update_tab_label(self) -> None:
        if self.has_class("-narrow"):
            tab = self.query_one("#tab-ir", Tab)
            index = self.current_step
            label = f"IR {self.steps[index].index}" if 0 <= index < len(self.steps) else "IR"
            if tab.label_text != label:
                tab.label = label

    # -- screen state ----------------------------------------------------------------
    def on_mount(self) -> None:
        self.delivery = Delivery(self.app, self.set_status, self.query_one(StatusLine).show_link)
        self.title = "freezeview"
        self.sub_title = self.fv_app.model_label
        self.watch_narrow_pane(self.narrow_pane)
        self.watch_loading_model(True)
        self.update_titles()
        self.set_status(f"loading {self.fv_app.model_label} (torch.jit.load)…")
        # The model tree first: space (preserve) and f (filter) work on it at once (a
        # narrow terminal, known once laid out, focuses the pane it shows).
        self.query_one(IRView).focus()
        self.call_after_refresh(self._first_focus)
        self.engine.load_model()
        # The screen's cyclic garbage, between runs too (no automatic full collections).
        self.set_interval(_SWEEP_SECONDS, self._quiet_sweep)

    def _first_focus(self) -> None:
        if not self.has_class("-narrow") and self.focused is self.ir:
            self.model_tree.focus()

    def _quiet_sweep(self) -> None:
        # Only while the user is not at the keys: it walks what is not frozen (a few
        # milliseconds, or tens after much drawing), in one block; when enough frozen
        # garbage has gathered, everything the screen tracks (the deep collection,
        # tens of milliseconds: never on a key, nor at a run's start).
        quiet = collector.idle_seconds() >= _QUIET_SECONDS
        if quiet and not self.stepping and not self.loading_model:
            collector.deep_sweep_if_due() or collector.sweep()

    def watch_loading_model(self, value: bool) -> None:
        # A static loading state rather than Textual's animated LoadingIndicator: the
        # animation would compete for the GIL with the worker importing torch.
        if value:
            self.ir_pane.show_text(f"loading {self.fv_app.model_label} …\n")

    def watch_stepping(self, value: bool) -> None:
        # No class on the screen for this: nothing styles it, and a screen class change
        # restyles every widget (twice a run).
        self.steps_bar.running = value

    def watch_stale(self, value: bool) -> None:
        self.steps_bar.stale = value

    def update_stale(self) -> None:
        """The plan differs from the one the steps were computed with."""
        plan = (tuple(self.fv_app.preserved), tuple(self.enabled_passes()))
        self.stale = bool(self.run_id) and plan != self._run_plan

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The pane switcher only matters (and only shows in the footer) when narrow.
        if action == "next_pane":
            return self.has_class("-narrow")
        return True

    def on_resize(self) -> None:
        # Crossing the 120-column breakpoint shows or hides the pane switcher.
        self.call_after_refresh(self.refresh_bindings)
        if self.graph_shown:
            self.call_after_refresh(self._place_graph)

    def watch_narrow_pane(self, pane: str) -> None:
        for name in ("model", "ir", "inspector", "steps"):
            self.set_class(name == pane, f"-show-{name}")
        if self.has_class("-narrow"):
            # The pane's own widget takes the keys (space on the tree, t on the passes).
            target = {"model": "#tree", "ir": "#ir", "inspector": "#inspector", "steps": "#passes"}
            self.call_after_refresh(self.query_one(target[pane]).focus)

    @on(Tabs.TabActivated, "#narrow-tabs")
    def _narrow_tab(self, event: Tabs.TabActivated) -> None:
        if event.tab.id:
            self.narrow_pane = event.tab.id.removeprefix("tab-")
        if self.graph_shown and self.has_class("-narrow"):
            # A tab chosen while the graph view fills a narrow screen: that pane instead.
            self.graph_shown = False
            self._place_graph()

    def key_escape(self) -> None:
        self.ir_pane.close_search()

    # -- keys ------------------------------------------------------------------------
    def action_next_pane(self) -> None:
        """Show the next pane on a narrow terminal."""
        order = ("model", "ir", "inspector", "steps")
        nxt = order[(order.index(self.narrow_pane) + 1) % len(order)]
        self.query_one(Tabs).active = f"tab-{nxt}"

    def action_next_step(self) -> None:
        """Show the next step (waits for it if it is still being computed)."""
        self.steps_bar.next_step()

    def action_previous_step(self) -> None:
        """Show the previous step."""
        self.steps_bar.previous_step()

    def action_rerun(self) -> None:
        """Freeze again from the start with the current plan."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        self.start_run()
        self.set_status("re-running with the current plan…")

    def action_toggle_preserve(self) -> None:
        """Add or remove the selected attribute from ``preserved_attrs``."""
        self.model_tree.action_toggle_preserve()

    def action_toggle_pass(self) -> None:
        """Switch the highlighted pass on or off."""
        self.steps_bar.toggle_pass()

    def action_cycle_view(self) -> None:
        """IR → code → diff → IR."""
        self.ir_pane.cycle_view()

    def action_cycle_filter(self) -> None:
        """Cycle the model tree's status filter."""
        self.model_tree.cycle_filter()

    def action_graph_view(self) -> None:
        """Show or hide the graph view (it takes the model pane's place)."""
        showing = not self.graph_shown
        self.graph_shown = showing
        self._place_graph()
        if showing:
            self._show_graph()
            # Focused once the view is on screen: the focus restyles the panes and
            # rebuilds the footer (its keys change), a frame's worth of work of its own.
            self.call_after_refresh(self._focus_graph)
        else:
            self.ir.focus()

    def _focus_graph(self) -> None:
        if self.graph_shown:  # (not hidden again since)
            self.graph_view.canvas_view.focus()

    def _place_graph(self) -> None:
        """The graph pane in the model pane's place, or alone on a narrow terminal.

        Set on the panes themselves: a class on the screen would restyle every widget
        (about 0.2 s with a big model's IR on screen).
        """
        panes = [self.query_one(f"#{name}") for name in ("main", *_PANES)]
        # Back to what app.tcss says. Clearing a rule asks for no layout (Textual's
        # Styles.clear_rule), and the containers keep their cached arrangement: each
        # pane asks for one, or a hidden graph view stayed on screen, over the model
        # pane, until something else laid the screen out.
        for pane in panes:
            if pane.styles.clear_rule("display"):
                pane.refresh(layout=True)
        if not self.graph_shown:
            return
        self.graph_view.display = True
        hidden = _PANES[1:] if self.has_class("-narrow") else ("model-pane",)
        for name in hidden:
            self.query_one(f"#{name}").display = False
        self.query_one("#main").display = True

    def _show_graph(self) -> None:
        """Hand the graph view the step shown and the kept attributes' reasons."""
        self.graph_view.show_step(
            self.session, self.run_id, self.steps, self.current_step, self._kept_reasons()
        )

    def _kept_reasons(self) -> dict[str, str]:
        """Kept attribute path -> why, from the explanation (the graph view marks them)."""
        return {
            v.path: v.reasons[0].message for v in self.summaries if v.status == "kept" and v.reasons
        }

    def action_render(self) -> None:
        """Render the current step (graph and diff) to SVG files."""
        index = self.current_step
        if not 0 <= index < len(self.steps):
            self.notify("no step to render yet", timeout=2)
            return
        step = self.steps[index]
        before = self.steps[index - 1].graph if index > 0 else None
        out = self.fv_app.output_dir / "steps"
        self.set_status(f"rendering step {step.label} into {out}…")
        self.engine.render_step(step, before, out)

    def action_export(self) -> None:
        """Export everything into the output directory."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        out = self.fv_app.output_dir / "export"
        self.set_status(f"exporting into {out}…")
        self.engine.export(out, tuple(self.fv_app.preserved), tuple(self.enabled_passes()))

    def action_open_output(self) -> None:
        """Open the last rendered picture or exported page in the local browser."""
        self.delivery.open_last()

    def action_search(self) -> None:
        """Open the search box of the IR pane."""
        if self.has_class("-narrow"):
            self.query_one(Tabs).active = "tab-ir"
        self.ir_pane.open_search()

    def action_find_attribute(self) -> None:
        """Find an attribute in the model tree by part of its dotted path."""
        if self.has_class("-narrow"):
            self.query_one(Tabs).active = "tab-model"
        self.model_tree.open_find()

    def action_help(self) -> None:
        """Show every key."""
        from .help import HelpScreen

        app = self.fv_app
        self.app.push_screen(HelpScreen(app.all_bindings(), app.captured_warnings))

    # -- what the widgets say --------------------------------------------------------
    @on(Status)
    def _status(self, message: Status) -> None:
        self.set_status(message.text, message.error)

    @on(ModelTree.PreserveToggled)
    def _preserve_toggled(self, message: ModelTree.PreserveToggled) -> None:
        path = message.path
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

    @on(ModelTree.AttributeSelected)
    def _attribute_selected(self, message: ModelTree.AttributeSelected) -> None:
        self._show_attribute(message.view)
        self.ir_pane.mark_attribute(message.path if self.summaries else None, scroll=True)

    @on(IRPane.MarksShown)
    def _marks_shown(self, message: IRPane.MarksShown) -> None:
        # The inspector counts the marked lines: on a big graph they come after it showed.
        # Only while the inspector still shows that attribute: the user may have
        # selected a box or an IR line since (a step's marks come after n).
        tree = self.model_tree
        shown = self._attribute_shown
        showing = shown is not None and self.inspector.shown is shown
        if message.path == tree.selected_path and showing:
            self._show_attribute(tree.selected_view)

    def _show_attribute(self, view: AttrSummary | None) -> None:
        """The attribute's verdict, facts and marked lines in the inspector."""
        if view is None:
            return
        inventory = self.session.inventory if self.session else None
        info = inventory.by_path(view.path) if inventory else None
        panel = attribute_panel(view, info, len(self.ir.marked_lines))
        self._attribute_shown = panel
        self.inspector.show(panel)

    @on(IRPane.NodeSelected)
    def _node_selected(self, message: IRPane.NodeSelected) -> None:
        self.inspector.show(node_panel(message.facts))
        if self.graph_shown:
            self.graph_view.centre_node(message.facts.node.id)

    @on(GraphView.BoxSelected)
    def _box_selected(self, message: GraphView.BoxSelected) -> None:
        inventory = self.session.inventory if self.session else None
        self.inspector.show(
            selection_panel(
                message.box, message.snapshot, message.node_id, self.summaries, inventory
            )
        )
        if (
            message.node_id is not None
            and message.snapshot is not None
            and message.box.role != "ghost"
        ):
            self.ir_pane.go_to_node(message.node_id)

    @on(StepsBar.StepInspected)
    def _step_inspected(self, message: StepsBar.StepInspected) -> None:
        # What the step did, or why it did not fire (freezeview freeze's note).
        if 0 <= message.index < len(self.steps):
            self.inspector.show(step_panel(self.steps[message.index]))

    @on(StepsBar.StepSelected)
    def _step_selected(self, message: StepsBar.StepSelected) -> None:
        if message.index != self.current_step:
            return  # the user moved on: a newer selection is on its way
        self.show_step(message.index)

    def show_step(self, index: int) -> None:
        """Show step ``index`` of the run (-1: the loaded model) in every view of a step."""
        self.ir_pane.show_step(self.run_id, self.steps, index)
        if self.graph_shown:
            self._show_graph()
        else:
            # Hidden, the graph view lays nothing out (v asks for the step shown then);
            # it only lets go of an earlier run.
            self.graph_view.forget(self.run_id)
        self._update_tab_label()

    @on(StepsBar.PassToggled)
    def _pass_toggled(self, message: StepsBar.PassToggled) -> None:
        state = "on" if message.on else "off"
        self.set_status(f"pass {message.pass_id} {state}: press r to re-run")
        self.update_stale()

    @on(StepsBar.PassesChanged)
    def _passes_changed(self, message: StepsBar.PassesChanged) -> None:
        self.update_stale()

    # -- workers -------------------------------------------------------------------
    # -- what the workers give -------------------------------------------------------
    def on_engine_failed(self, message: EngineFailed) -> None:
        """Every worker failure ends here: one sentence on screen, the session goes on."""
        self.set_status(f"{message.task} failed: {message.message}", error=True)
        self.notify(message.message, title=f"{message.task} failed", severity="error", timeout=8)
        if message.task == "load":
            self.loading_model = False
            self.add_class("-failed")
            self.ir_pane.show_failure(message.message)
            self.update_titles()
        elif message.task == "explain":
            self._explaining = False
            self.runs.start_pending_run()
        elif message.task == "steps":
            self.stepping = False

    def on_model_loaded(self, message: ModelLoaded) -> None:
        self.runs.model_loaded(message)

    def on_explanation_ready(self, message: ExplanationReady) -> None:
        self.runs.explanation_ready(message)

    def on_step_ready(self, message: StepReady) -> None:
        self.runs.step_ready(message)

    def on_final_code_ready(self, message: FinalCodeReady) -> None:
        self.runs.final_code_ready(message)

    def on_steps_finished(self, message: StepsFinished) -> None:
        self.runs.steps_finished(message)

    def on_rendered(self, message: Rendered) -> None:
        self.delivery.rendered(message.written.paths, message.written.notes)

    def on_exported(self, message: Exported) -> None:
        self.delivery.exported(message.directory, message.written.paths, message.written.notes)

    # -- the plan's runs (plan_runs.py) -------------------------------------------------
    def start_explain(self) -> None:
        """Recompute verdicts for the current preserved names."""
        self.runs.start_explain()

    def start_run(self) -> None:
        """Run freezing from the start with the current plan."""
        self.runs.start_run()

    def cancel_run(self) -> None:
        """Ask a running pipeline to stop before its next step."""
        self.runs.cancel_run()


# Seconds between two full collections of the screen's own objects (session/collector.py).
_SWEEP_SECONDS = 10.0
# Seconds without a key or the mouse before that collection runs.
_QUIET_SECONDS = 2.0

# The panes the graph view takes the place of: the model pane (wide), all (narrow).
_PANES = ("graph-pane", "model-pane", "ir-pane", "inspector-pane", "steps-bar")
