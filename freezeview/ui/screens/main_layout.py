"""The main screen's layout and state: its panes, reactives and widgets.

The main screen is built in layers, one idea per file, each class the base of the next:
:class:`MainLayout` (this file: what is on screen and the state behind it) ←
:class:`~.main_ir_pane.MainIRPane` (what the IR pane shows, and the panes that follow
it) ← :class:`~.main_workers.MainWorkers` (the engine calls and their results) ←
:class:`~.main.MainScreen` (the keys and their actions).
"""

from __future__ import annotations

import threading
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.reactive import reactive
from textual.screen import Screen
from textual.widgets import Header, Input, Label, Tab, Tabs

from ..views import AttrView, PassView, StepView
from ..widgets.inspector import Inspector
from ..widgets.ir_view import IRView
from ..widgets.keys_footer import KeysFooter
from ..widgets.model_tree import ModelTree
from ..widgets.steps_bar import StepsBar

if TYPE_CHECKING:
    from ..host import ScreenHost
    from ..remote_session import RemoteSession
    from ..session import Session

__all__ = ["MainLayout"]


class MainLayout(Screen[None]):
    """The main screen's panes, reactives and widgets (see the module docstring)."""

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
        yield KeysFooter()

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

    # -- the plan as the screen holds it ---------------------------------------------
    def enabled_passes(self) -> list[str]:
        """Pass ids checked in the steps bar."""
        return [str(v) for v in self.steps_bar.passes.selected]

    def update_stale(self) -> None:
        """The plan differs from the one the steps were computed with."""
        plan = (tuple(self.fv_app.preserved), tuple(self.enabled_passes()))
        self.stale = bool(self.run_id) and plan != self._run_plan

    # -- loading state ---------------------------------------------------------------
    def watch_loading_model(self, value: bool) -> None:
        # A static loading state rather than Textual's animated LoadingIndicator: the
        # animation would compete for the GIL with the worker importing torch.
        if value:
            self.ir.set_document(f"loading {self.fv_app.model_label} …\n", "text")

    # -- narrow terminals ------------------------------------------------------------
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
