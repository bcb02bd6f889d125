"""The main screen: model tree, IR pane, inspector and steps bar, with every key.

The widgets (:mod:`freezeview.ui.widgets`) own what they show, their state and their
own keys, and say what the user did by messages. This screen owns the plan's runs (a
:class:`~.run_state.RunState`: the preserved names, the run id, the stops, whether an
explain is under way), runs every engine call in a thread worker of its own (``@work``:
load, explain, the stepwise run, render, export), and routes:

- the widgets' messages: the model tree's ``PreserveToggled`` (explain again) and
  ``AttributeSelected`` (IR marks, inspector), the steps bar's ``StepSelected`` (the IR
  pane shows that step), ``PassToggled`` and ``PassesChanged`` (the plan changed), the IR
  pane's ``NodeSelected`` (inspector), and ``Status`` from any of them;
- the workers' results (:mod:`freezeview.ui.messages`) to the widgets that show them.
  Every worker failure ends in one handler, :meth:`MainScreen.on_engine_failed`.

The screen's keys (``BINDINGS``, :mod:`.main_keys`) work wherever the focus is; their
actions ask the widget concerned. A new view of a step (a graph view) is one more
widget: composed in :meth:`MainScreen.compose`, given the step in
:meth:`MainScreen.show_step`; its own engine work runs in its own workers, which post
``EngineFailed`` when they fail (as the IR pane's highlighting does).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Sequence
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

from rich.console import RenderableType
from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive, var
from textual.screen import Screen
from textual.widgets import Header, Label, Tab, Tabs
from textual.worker import Worker, WorkerState, get_current_worker

from ...session import AttrSummary, BadInputError, PassSummary, StepSummary, collector
from ..failures import Guarded
from ..messages import (
    EngineFailed,
    ExplanationReady,
    Exported,
    FinalCodeReady,
    ModelLoaded,
    NodeTimesReady,
    Rendered,
    Status,
    StepReady,
    StepsFinished,
)
from ..tree_rows import lay_out
from ..widgets.box_panel import selection_panel
from ..widgets.graph_view import GraphView
from ..widgets.inspector import (
    Inspector,
    attribute_panel,
    moved_panel,
    node_panel,
    step_panel,
    time_panel,
    with_time,
)
from ..widgets.ir_pane import IRPane
from ..widgets.ir_view import IRView
from ..widgets.keys_footer import KeysFooter
from ..widgets.model_tree import ModelTree
from ..widgets.status_line import StatusLine
from ..widgets.steps_bar import StepsBar
from .delivery import Delivery
from .main_keys import MAIN_KEYS
from .node_times import NodeTimesBook
from .run_state import ExplainOrder, RunOrder, RunState, in_plan_order

if TYPE_CHECKING:
    from ...session import EngineSession, Preserved
    from ..host import ScreenHost
    from .migrate import MigrationState

__all__ = ["MainScreen"]


class MainScreen(Guarded, Screen[None]):
    """The one screen users work in (see the module docstring)."""

    HORIZONTAL_BREAKPOINTS = [(0, "-narrow"), (120, "-wide")]

    BINDINGS = MAIN_KEYS

    # The screen draws none of these itself: their watchers update the widgets that
    # show them. As reactives they repainted the whole screen at every change (every
    # widget drawn again, on r, space and t, the keys a user presses most).
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

    def __init__(self, preserved: Preserved = ()) -> None:
        """``preserved``: the names in ``preserved_attrs`` at start (``--preserve``)."""
        super().__init__()
        #: The plan's runs: the preserved names, the run id, the stops (one owner: here).
        self.run_state = RunState(preserved=tuple(preserved))
        #: The current run's steps, in order, as they arrive.
        self.steps: list[StepSummary] = []
        #: Every attribute's verdict under the current preserved names.
        self.summaries: list[AttrSummary] = []
        self.passes: list[PassSummary] = []
        #: The engine session, once the model is loading (the load worker takes it).
        self.session: EngineSession | None = None
        #: The attribute's panel last put in the inspector (its marks update it).
        self._attribute_shown: object = None
        #: The model's migrations (``m``), once asked for: they outlive the migrate screen.
        self.migration: MigrationState | None = None
        #: The run's node times (time per node, the graph view's ``%``).
        self.node_times = NodeTimesBook(self)
        # The node (IR line or box) last put in the inspector, and its panel.
        self._node_shown: tuple[Any, object] | None = None
        # (run, step): the step shown when % ran the plan again, shown again on arrival.
        self._heat_back: tuple[int, int] | None = None

    @property
    def run_id(self) -> int:
        """Which run the steps belong to (0: none yet); older runs' messages are dropped."""
        return self.run_state.run_id

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
                yield ModelTree(id="tree")
            yield GraphView(id="graph-pane", classes="pane")
            yield IRPane(id="ir-pane", classes="pane")
            with Vertical(id="inspector-pane", classes="pane"):
                yield Label("inspector", classes="pane-title")
                yield Inspector(id="inspector")
        yield StepsBar(id="steps-bar")
        yield StatusLine("", id="status")
        yield KeysFooter()

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
        self.load_model()
        # The screen's cyclic garbage, between runs too (no automatic full collections).
        self.set_interval(_SWEEP_SECONDS, self._quiet_sweep)

    def _first_focus(self) -> None:
        if not self.has_class("-narrow") and self.focused is self.ir:
            self.model_tree.focus()

    def _quiet_sweep(self) -> None:
        # Only while the user is not at the keys: it walks what is not frozen (more
        # after much drawing), in one block; when enough frozen garbage has gathered,
        # everything the screen tracks (the deep collection, every object the screen
        # holds: never on a key, nor at a run's start).
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
        self.stale = self.run_state.stale(self.enabled_passes())

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
        self.model_tree.toggle_preserve()

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
        (a big model's IR among them, while the user waits on the key).
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
        self.render_step_files(step, before, out)

    def action_export(self) -> None:
        """Export everything into the output directory."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        out = self.fv_app.output_dir / "export"
        self.set_status(f"exporting into {out}…")
        self.export_files(out, self.run_state.preserved, tuple(self.enabled_passes()))

    def action_migrate(self) -> None:
        """Will the model survive torch.export? The migrate screen: the migration found
        for this model, or one started now (:mod:`.migrate`)."""
        from .migrate import MigrateScreen, MigrationState

        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        if self.migration is None:
            # The .pt2 goes next to what e exports (OUTPUT/export/).
            stem = Path(self.fv_app.model_label).stem
            output = self.fv_app.output_dir / f"{stem}.pt2"
            self.migration = MigrationState(self, self.session, output)
        self.app.push_screen(MigrateScreen(self.migration))

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
        verb = "preserved" if self.run_state.toggle(path) else "no longer preserved"
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
        self._show_node(message)
        if self.graph_shown:
            self.graph_view.centre_node(message.facts.node.id)

    def _show_node(self, message: IRPane.NodeSelected | GraphView.BoxSelected) -> None:
        """An IR line's node, or a box of the graph view, in the inspector: what it is,
        its time when the step was profiled, and the numbers' first move when it is
        there. Shown again when the step's node times arrive."""
        if isinstance(message, IRPane.NodeSelected):
            ids: tuple[int, ...] = (message.facts.node.id,)
            panel, ghost = node_panel(message.facts), False
        else:
            inventory = self.session.inventory if self.session else None
            box = message.box
            panel = selection_panel(
                box, message.snapshot, message.node_id, self.summaries, inventory
            )
            ghost = box.role == "ghost"
            ids = box.ghost_ids if ghost else box.node_ids
        shown = with_time(panel, self._time_of(ids, ghost), None if ghost else self._moved_at(ids))
        self.inspector.show(shown)
        self._node_shown = (message, shown)

    @on(GraphView.BoxSelected)
    def _box_selected(self, message: GraphView.BoxSelected) -> None:
        self._show_node(message)
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

    def _time_of(self, node_ids: Sequence[int], before: bool = False) -> RenderableType | None:
        """The inspector's time rows for nodes of the step shown (of the step before it,
        ``before``: a diff's removed ops), when that graph was profiled."""
        index = self.current_step - (1 if before else 0)
        if not 0 <= index < len(self.steps):
            return None
        times = self.node_times.get(self.steps[index].graph)
        return time_panel(times, node_ids) if times is not None else None

    def _moved_at(self, node_ids: Sequence[int]) -> RenderableType | None:
        """The bisection's block when the nodes shown hold the step's first node whose
        value moved."""
        index = self.current_step
        step = self.steps[index] if 0 <= index < len(self.steps) else None
        if step is None or step.moved_node is None or step.moved_node not in node_ids:
            return None
        return moved_panel(step)

    @on(StepsBar.StepEntered)
    def _step_entered(self, message: StepsBar.StepEntered) -> None:
        """Enter on a step whose numerics cell names a node: the IR and the graph view go
        to the first node whose value moved."""
        if not 0 <= message.index < len(self.steps):
            return
        step = self.steps[message.index]
        if step.moved_node is None:
            return
        if message.index != self.current_step:
            self.show_step(message.index)
        self.ir_pane.go_to_node_shown(step.moved_node)
        if self.graph_shown:
            self.graph_view.follow_node(step.moved_node)
        elif self.has_class("-narrow"):
            self.query_one(Tabs).active = "tab-ir"  # one pane at a time: the IR's
        self.set_status(step.moved[0] if step.moved else f"step {step.label}: the numbers move")

    @on(GraphView.HeatToggled)
    def _heat_toggled(self, message: GraphView.HeatToggled) -> None:
        """``%``: the heat overlay on or off; the first time, the plan runs again with
        each node timed (only with sample inputs: nothing runs without them)."""
        view = self.graph_view
        if view.heat:
            view.set_heat(False, self.node_times.times)
            self.run_state.profile = False
            self.set_status("heat overlay off (runs no longer time each node)")
            return
        options = self.fv_app.options
        if not (options.inputs_file or options.input_shapes or any(s.numerics for s in self.steps)):
            self.set_status(
                "time per node needs sample inputs: start freezeview with --inputs FILE "
                "or --input-shape 1,3,224,224",
                error=True,
            )
            return
        self.run_state.profile = True
        view.set_heat(True, self.node_times.times)
        if self.run_state.last_profiled or self.session is None or self.loading_model:
            self.set_status(_HEAT_SAYS + (f" ({view.heat_clock()})" if view.heat_clock() else ""))
            return
        back = self.current_step
        self.start_run()
        self._heat_back = (self.run_id, back)  # the step on show comes back when it arrives
        self.set_status("timing each node: running the plan again with node times…")

    def on_node_times_ready(self, message: NodeTimesReady) -> None:
        """A graph's node times arrived: the heat overlay paints them."""
        if not self.node_times.arrived(message):
            return
        self.graph_view.set_heat(self.graph_view.heat, self.node_times.times)
        shown = self._node_shown
        if shown is not None and self.inspector.shown is shown[1]:
            self._show_node(shown[0])  # the node on show gets its time

    @on(StepsBar.StepSelected)
    def _step_selected(self, message: StepsBar.StepSelected) -> None:
        if message.index != self.current_step:
            return  # the user moved on: a newer selection is on its way
        self.show_step(message.index)

    def show_step(self, index: int) -> None:
        """Show step ``index`` of the run (-1: the loaded model) in every view of a step."""
        for shown in (index - 1, index):  # a diff's removed ops are the step before's
            if 0 <= shown < len(self.steps):
                self.node_times.want(self.session, self.run_id, self.steps[shown])
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

    # -- the engine calls, each in a thread worker of this screen ----------------------
    # One group each; a new call cancels the group's last (exclusive). A worker that
    # fails is said by on_worker_state_changed, as EngineFailed.
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
    def work_out_verdicts(self, order: ExplainOrder, status_filter: str) -> None:
        """Every attribute's verdict under ``order.preserved``: torch's statuses first
        (reasons pending) when the reasons take longer, then the whole explanation;
        ``order.cancel`` (set by the next explain) stops the replay of the reasons. Each
        comes with the model tree's rows under ``status_filter``, laid out here: a big
        model's held the event loop long enough to hold up the keys."""
        session = self.session
        assert session is not None
        worker = get_current_worker()

        def wanted() -> bool:
            return not worker.is_cancelled and not order.cancel.is_set()

        def post(summaries: list[AttrSummary], complete: bool) -> None:
            if wanted():
                rows = lay_out(summaries, status_filter)
                self.post_message(
                    ExplanationReady(
                        summaries,
                        order.preserved,
                        session.inventory,
                        order.request,
                        complete=complete,
                        rows=rows,
                    )
                )

        summaries = session.explain(
            order.preserved, statuses=lambda summaries: post(summaries, False), cancel=order.cancel
        )
        post(summaries, True)

    @work(thread=True, exclusive=True, exit_on_error=False, group="steps", description="freezing")
    def freeze_steps(self, order: RunOrder) -> None:
        """Freeze with ``order``'s plan one step at a time, posting each step as it is
        ready, then StepsFinished (also when the run stops on an error or its cancel)."""
        assert self.session is not None
        plan = order.plan
        start = time.perf_counter()
        count = 0
        try:
            steps = self.session.run_steps(
                plan.preserved, plan.passes, profile=order.profile, cancel=order.cancel
            )
            for step in steps:
                if order.cancel.is_set():
                    break
                self.post_message(StepReady(order.run_id, step))
                count += 1
        finally:
            self.post_message(StepsFinished(order.run_id, count, time.perf_counter() - start))

    @work(thread=True, exclusive=True, exit_on_error=False, group="render", description="rendering")
    def render_step_files(self, step: StepSummary, before: int | None, out_dir: Path) -> None:
        """Render the step's graph and its diff to SVG (``before``: the key of the graph
        before it; the graphs are the engine's, named by key)."""
        assert self.session is not None
        stem = f"{step.index:02d}-{step.name}"
        self.post_message(Rendered(self.session.render_step(before, step.graph, out_dir, stem)))

    @work(thread=True, exclusive=True, exit_on_error=False, group="export", description="exporting")
    def export_files(self, out_dir: Path, preserved: Preserved, passes: tuple[str, ...]) -> None:
        """Export everything like ``freezeview export``."""
        assert self.session is not None
        self.post_message(Exported(out_dir, self.session.export(out_dir, preserved, passes)))

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Only this screen's own workers say so here (the message does not bubble): a
        # failure becomes EngineFailed, which the widgets' failing workers post too.
        if event.state == WorkerState.ERROR:
            self.post_message(EngineFailed.of(event.worker))

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
            if self.run_state.explain_over():
                self.start_run()
        elif message.task == "steps":
            self.stepping = False

    def on_model_loaded(self, message: ModelLoaded) -> None:
        """The model is open: its passes and IR shown, then explain, then the run."""
        app = self.fv_app
        self.passes = in_plan_order(message.passes, app.passes)
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
        assert self.session is not None
        self.ir_pane.set_loaded(message.text, message.code, self.session)
        self.loading_model = False
        self.sub_title = message.name
        took = f" in {message.load_seconds:.2f} s" if app.show_timings else ""
        self.set_status(
            f"loaded {message.name}{took} — "
            f"{message.node_count} nodes after inlining; explaining and freezing…"
        )
        for warning in message.warnings:
            app.record_warning(warning)
        self.show_step(self.current_step)
        # Paint the IR first: the explain and freeze workers keep the GIL busy, and the
        # user should not wait for them to see the model.
        # Then explain, then freeze: one torch worker at a time leaves the event loop
        # a bigger share of the GIL than two competing ones.
        self.run_state.run_after_explain()
        self.call_after_refresh(self.start_explain)

    def on_explanation_ready(self, message: ExplanationReady) -> None:
        """Verdicts for the current preserved names: the tree shows them."""
        state = self.run_state
        if not state.answers(message.request, message.preserved):
            return  # an older request's (its reasons too): a newer one is on its way
        self.summaries = message.summaries
        toggled = state.explaining and state.run_id > 0
        # The first run waits for the reasons, as before: the verdicts come no later.
        if message.complete and state.explain_over():
            self.start_run()
        tree = self.model_tree
        # The rebuilt tree puts its cursor back on this path after the next refresh: the
        # inspector shows the path's new view now (its reasons, pending or not).
        path = tree.selected_path
        tree.show(self.session.name if self.session else "model", self.summaries, message.rows)
        self.ir_pane.mark_attribute(path, refresh=False)
        self._show_attribute(tree.view_of(path) if path else None)
        if message.complete and toggled:
            self.set_status("verdicts and reasons updated (r re-runs the steps)")
        self.query_one("#model-title", Label).update(
            layout=False,
            content=Text.assemble(
                "model  ", ("★ preserved: ", "magenta"), ", ".join(message.preserved) or "none"
            ),
        )

    def on_step_ready(self, message: StepReady) -> None:
        """A step of the current run arrived: the steps bar lists it."""
        if message.run_id != self.run_id:
            return
        # A step lives until a re-run: out of the collector's walks at once (its graph
        # comes when a view shows it, and is kept the same way then).
        collector.keep()
        self.steps.append(message.step)
        # Shows the step if it is the first, or if n was pressed for it.
        self.steps_bar.add_step(message.step, self.fv_app.show_timings)
        if self._heat_back == (message.run_id, message.step.index):
            self._heat_back = None
            self.steps_bar.current_step = message.step.index
        self.ir_pane.update_title()
        self._update_tab_label()
        if message.step.error:
            self.set_status(f"step {message.step.label} failed: {message.step.error}", error=True)

    def on_final_code_ready(self, message: FinalCodeReady) -> None:
        """The final frozen module's ``.code`` arrived (read when the view showed it)."""
        # The .code view of a step from the clean-up on shows the final frozen module's.
        if message.run_id == self.run_id and self.ir_pane.view_mode == "code":
            self.ir_pane.show_current()

    def on_steps_finished(self, message: StepsFinished) -> None:
        """The run is over: the status line says how it went."""
        if message.run_id != self.run_id:
            return
        # What the next run's start decides its deep collection from (not on its key).
        collector.note_run_end()
        self.stepping = False
        self.steps_bar.finish()
        # The .code view of a step from the clean-up on can read the final module's now.
        self.ir_pane.run_finished = True
        if self.ir_pane.view_mode == "code":
            self.ir_pane.show_current()
        if not any(s.error for s in self.steps):
            final = self.steps[-1].node_count if self.steps else 0
            took = f" in {message.seconds:.2f} s" if self.fv_app.show_timings else ""
            self.set_status(
                f"{message.count} steps{took}; final graph {final} nodes. "
                "n/p step, space preserve, t pass, r re-run, ? help"
            )
        self.update_titles()

    def on_rendered(self, message: Rendered) -> None:
        self.delivery.rendered(message.written.paths, message.written.notes)

    def on_exported(self, message: Exported) -> None:
        self.delivery.exported(message.directory, message.written.paths, message.written.notes)

    # -- the plan's runs ---------------------------------------------------------------
    def start_explain(self) -> None:
        """Recompute verdicts for the current preserved names."""
        self.work_out_verdicts(self.run_state.begin_explain(), self.model_tree.status_filter)

    def start_run(self) -> None:
        """Run freezing from the start with the current plan."""
        order = self.run_state.begin_run(self.enabled_passes())
        self.node_times.start_run(order.run_id)
        # The node on show names a snapshot of this run: let go of it with the run.
        self._node_shown = None
        self.steps = []
        self.steps_bar.clear_steps()
        self.stepping = True
        self.stale = False
        self.show_step(-1)
        # The IR pane's diffs are computed here: the diff module's recent snapshots
        # (kept for reuse, up to a few dozen) are the last run's, never asked for again.
        from ...session import forget_recent

        forget_recent()
        # The engine session addresses the last run's graphs by key until the next run
        # asks: they go now, with everything else of that run. Once they are freed (off
        # the event loop: a big graph's objects, freed at once, hold up the keys), the
        # run starts.
        start = partial(self._collect_and_run, order)
        forget_runs = getattr(self.session, "forget_runs", None)  # the engine process's
        if forget_runs is not None:
            collector.let_go(forget_runs(), then=partial(_on_loop, self.app, start))
        else:
            start()

    def _collect_and_run(self, order: RunOrder) -> None:
        """The run (unless another has started). The screen's deep collection waits for
        the quiet timer, a key may come now: only when as many objects have joined the
        frozen ones as the last one left alive (a user who never paused), as counted at
        the last run's end, does it run here."""
        try:
            collector.deep_sweep_if_due(collector.RUN_START_DUE, recount=False)
            if self.run_state.current(order):
                self.freeze_steps(order)
        except Exception as exc:
            # No worker started, so none will say the run ended: said here as a failed
            # run is, or the screen reads "running…" for good (from the let-go thread,
            # the error would only end that thread).
            if order.run_id == self.run_id:
                self.post_message(EngineFailed.of_error("steps", exc))

    def cancel_run(self) -> None:
        """Ask a running pipeline to stop before its next step."""
        self.run_state.cancel_run()


def _on_loop(app: Any, call: Callable[[], object]) -> None:
    """``call`` on the app's event loop (from another thread), unless the app closed."""
    with contextlib.suppress(RuntimeError):
        app.call_from_thread(call)


# Seconds between two full collections of the screen's own objects (session/collector.py).
_SWEEP_SECONDS = 10.0
# Seconds without a key or the mouse before that collection runs.
_QUIET_SECONDS = 2.0

# The panes the graph view takes the place of: the model pane (wide), all (narrow).
#: What the status line says when the heat overlay goes on.
_HEAT_SAYS = (
    "heat overlay: each box filled by its share of the forward's time, light under 0.5 %, "
    "dark from 20 %; a module box adds up its ops"
)

_PANES = ("graph-pane", "model-pane", "ir-pane", "inspector-pane", "steps-bar")
