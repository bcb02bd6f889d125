"""The graph view (``v``): the current step's graph, or its diff, drawn in the terminal.

The engine lays the step out with Graphviz (``Session.graph_layout``: the same boxes,
labels and module folding as the SVGs, dot's own positions and edge routes, kept per
step and level in the engine process); this widget draws the result with box-drawing
characters (:mod:`freezeview.session.canvas`) in a scrollable canvas
(:mod:`.graph_canvas_view`). It owns what it shows (the step, graph or diff, the level,
the opened boxes, the selected box, the search) and says what the user did by
messages: ``BoxSelected`` (the screen shows the box in the inspector and moves the IR
pane to its line) and ``Status``. Layouts run in a thread worker; until one arrives the
view says what it is waiting for, and every key stays live.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from rich.style import Style
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical
from textual.message import Message
from textual.widgets import Input, Label
from textual.worker import Worker, WorkerState, get_current_worker

from ...session import HEAT_SCALE, BoxLayout, Canvas, GraphLayout, Handoff, StepSummary, heat_band
from ..failures import Guarded
from ..messages import EngineFailed, Status
from .graph_canvas_view import GraphCanvasView

if TYPE_CHECKING:
    from ...session import GraphSnapshot, NodeTimes

__all__ = ["GraphView"]

# Drawn graphs kept in the widget (steps x levels x graph/diff): going back is instant.
_KEPT = 12


@dataclass
class _Drawn:
    layout: GraphLayout
    canvas: Canvas | None


class GraphView(Guarded, Vertical, can_focus=True):
    """The step's graph (or diff) drawn with characters; see the module docstring."""

    BINDINGS = [
        Binding("plus,equals_sign", "zoom_in", "Zoom in", key_display="+",
                tooltip="Finer: from one box per module down to every op"),
        Binding("minus", "zoom_out", "Zoom out", key_display="-",
                tooltip="Coarser: one box per module, a level up"),
        Binding("enter", "open_box", "Open box",
                tooltip="Open the selected module box down to its ops (again: close it)"),
        Binding("d", "toggle_diff", "Graph/diff",
                tooltip="The step's graph, or its diff against the step before"),
        Binding("right_square_bracket", "next_box", "Next box", key_display="]",
                tooltip="Select the next box (reading order)"),
        Binding("left_square_bracket", "previous_box", "Prev box", key_display="[",
                tooltip="Select the previous box (reading order)"),
        Binding("slash", "search", "Find node", key_display="/",
                tooltip="Jump to the box whose label holds the text typed"),
        Binding("escape", "close_search", "Close search", show=False,
                tooltip="Close the graph view's search box"),
        Binding("i", "picture", "Picture",
                tooltip="Kitty or sixel terminals: the view's picture drawn by Graphviz"),
        Binding("percent_sign", "toggle_heat", "Heat", key_display="%",
                tooltip="Fill each box by its share of the forward's time (needs sample "
                "inputs; the first time, the plan runs again with each node timed)"),
    ]  # fmt: skip

    class BoxSelected(Message):
        """A box was selected: ``node_id`` is its IR node in ``snapshot`` (None for a
        module box; a ghost's node is in the step before's snapshot)."""

        def __init__(
            self, box: BoxLayout, snapshot: GraphSnapshot | None, node_id: int | None
        ) -> None:
            super().__init__()
            self.box = box
            self.snapshot = snapshot
            self.node_id = node_id

    class HeatToggled(Message):
        """The user pressed ``%``: the screen decides (sample inputs, a profiled run)
        and calls :meth:`set_heat`."""

    class LayoutReady(Message):
        """The worker laid out and drew a graph (``key`` says for which state)."""

        def __init__(self, key: tuple[Any, ...], drawn: _Drawn) -> None:
            super().__init__()
            self.key = key
            self.drawn = drawn

    class PictureReady(Message):
        """The engine drew the view's picture (a PNG) for a terminal that shows pictures."""

        def __init__(self, key: tuple[Any, ...], path: Path) -> None:
            super().__init__()
            self.key = key
            self.path = path

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.session: Any = None
        self.run_id = 0
        self.steps: list[StepSummary] = []
        self.index = -1
        #: Coloured by the diff against the step before (``d`` switches).
        self.diff = True
        #: The level asked for: ``"auto"``, a box depth, or None for every op.
        self.level: int | str | None = "auto"
        #: Modules opened down to their ops (Enter).
        self.opened: tuple[str, ...] = ()
        #: Kept attribute path -> why (the screen hands the explanation's).
        self.reasons: dict[str, str] = {}
        self.drawn: _Drawn | None = None
        self._kept: OrderedDict[tuple[Any, ...], _Drawn] = OrderedDict()
        self._want: tuple[Any, ...] | None = None
        self._shown: tuple[Any, ...] | None = None
        self._follow: int | None = None  # node id to select once the layout arrives
        self._matches: list[BoxLayout] = []
        self._rows = 0  # the canvas's last known height (pane_rows())
        # (run, step, role, node) the screen was last told about (BoxSelected).
        self._said: tuple[Any, ...] | None = None
        #: Boxes filled by their share of the forward's time (``%``).
        self.heat = False
        # Each profiled graph's node times by key (the screen's book, read only).
        self._times: Mapping[int, NodeTimes] = {}

    def compose(self) -> ComposeResult:
        yield Label("graph", id="graph-title", classes="pane-title")
        yield Input(placeholder="find a box: op, module or attribute", id="graph-search")
        yield GraphCanvasView(id="graph-canvas")

    def show_failure(self, text: str) -> None:
        """A handler of the view failed (ui/failures.py): the canvas says so."""
        self.drawn = None
        self.canvas_view.show_canvas(None, text)

    @property
    def canvas_view(self) -> GraphCanvasView:
        """The drawing surface."""
        return self.query_one(GraphCanvasView)

    @property
    def layout_shown(self) -> GraphLayout | None:
        """The layout on screen (None while waiting for one)."""
        return self.drawn.layout if self.drawn is not None else None

    @property
    def ready(self) -> bool:
        """True when the graph on screen is the one the view's state asks for."""
        return self.drawn is not None and self._shown == self._key()

    @property
    def selected(self) -> BoxLayout | None:
        """The selected box."""
        return self.canvas_view.selected

    # -- what the screen tells it ------------------------------------------------------
    def show_step(
        self,
        session: Any,
        run_id: int,
        steps: Sequence[StepSummary],
        index: int,
        reasons: Mapping[str, str] | None = None,
    ) -> None:
        """Show step ``index`` of run ``run_id`` (the layout is asked for if needed)."""
        if run_id != self.run_id:
            self._kept.clear()
        if (run_id, index) != (self.run_id, self.index):
            self._forget_search()
        self._follow = _node_of(self.selected)  # n/p: the view follows the node
        self.session = session
        self.run_id = run_id
        self.steps = list(steps)
        self.index = index
        if reasons is not None:
            self.reasons = dict(reasons)
        self.request()

    def forget(self, run_id: int) -> None:
        """While the view is hidden: a newer run started, drop what it holds of older
        ones (their steps and layouts). Nothing is laid out while hidden: a layout is
        seconds of the engine's time on a big graph, for a view that may never show."""
        if run_id == self.run_id:
            return
        self.run_id = run_id
        self.steps = []
        self.index = -1
        self._kept.clear()
        self._want = self._shown = None
        if self.drawn is not None:
            self.drawn = None
            self.canvas_view.show_canvas(None, "no step yet: the graph appears with the first")

    def set_heat(self, on: bool, times: Mapping[int, NodeTimes]) -> None:
        """Switch the heat overlay on or off; ``times`` are the run's node times by
        graph key, as they have arrived (called again as more arrive)."""
        self.heat = on
        self._times = times
        self._paint_heat()
        self.update_title()

    def heat_clock(self) -> str:
        """Which tool timed the graph shown (empty when its times are not here)."""
        times = self._shown_times()
        return times.clock if times is not None else ""

    def _shown_times(self) -> NodeTimes | None:
        step = self._step()
        return self._times.get(step.graph) if step is not None else None

    def _paint_heat(self) -> None:
        """The shown layout's boxes filled by their time's band (HEAT_SCALE), or not."""
        view = self.canvas_view
        times = self._shown_times() if self.heat else None
        layout = self.layout_shown
        if times is None or layout is None or times.total_ms <= 0:
            view.set_heat(())
            return
        ms = times.ms_by_id()
        before = None
        if layout.diff and self.index > 0:
            before = self._times.get(self.steps[self.index - 1].graph)
        ghost_ms = before.ms_by_id() if before is not None else {}
        fills = []
        for box in layout.boxes.values():
            found = (
                [ghost_ms[i] for i in box.ghost_ids if i in ghost_ms]
                if box.role == "ghost"
                else [ms[i] for i in box.node_ids if i in ms]
            )
            if found:
                fills.append((box, heat_style(sum(found) / times.total_ms)))
        view.set_heat(fills)

    def centre_node(self, node_id: int) -> bool:
        """Select and centre the box showing IR node ``node_id``; False if none does."""
        layout = self.layout_shown
        box = layout.box_of(node_id) if layout is not None else None
        if box is None:
            return False
        self.canvas_view.select(box)
        return True

    # -- the layout ----------------------------------------------------------------------
    def _step(self) -> StepSummary | None:
        return self.steps[self.index] if 0 <= self.index < len(self.steps) else None

    def _key(self) -> tuple[Any, ...]:
        return (
            self.run_id,
            self.index,
            self.diff and self.index > 0,
            self.level,
            self.opened,
            tuple(sorted(self.reasons.items())),
            self.pane_rows(),
        )

    def pane_rows(self) -> int:
        """The rows the canvas has (the pane's, less its title's), which module levels
        are fitted to; while the view has never been shown, what its pane will have on
        this screen."""
        # The pane's own height: the canvas's changes with a scrollbar and with a
        # title wrapped to two lines, and either would ask for another layout.
        height = self.size.height
        if height:
            self._rows = height - 1
        elif not self._rows:
            # app.tcss: beside the model pane, the title bar, steps bar, status line,
            # footer and frames take 16 rows; alone on a narrow screen, 7.
            chrome = 7 if self.screen.has_class("-narrow") else 16
            self._rows = max(8, self.app.size.height - chrome - 1)
        return self._rows

    def request(self) -> None:
        """Show the layout for the current state: kept, or asked of the engine."""
        step = self._step()
        if step is None or self.session is None:
            self.drawn = None
            self.canvas_view.show_canvas(None, "no step yet: the graph appears with the first")
            self.update_title()
            return
        key = self._key()
        if self.has_class("-picture"):
            self._picture(key)  # the picture follows the step and the level
        kept = self._kept.get(key)
        if kept is not None:
            self._kept.move_to_end(key)
            self._shown = key
            self._show(kept)
            return
        self._want = key
        self.drawn = None
        what = "diff" if key[2] else "graph"
        self.canvas_view.show_canvas(None, f"laying out the {what} of step {step.label} with dot…")
        self.update_title(busy=True)
        # The graphs go by key: the engine has them (it snapshots them if need be).
        before = self.steps[self.index - 1].graph if key[2] else None
        graphs = Handoff((before, step.graph))
        self._lay_out(key, self.session, graphs, self.level, self.opened, key[6])

    @work(thread=True, exclusive=True, exit_on_error=False, group="graph", description="graph")
    def _lay_out(
        self,
        key: tuple[Any, ...],
        session: Any,
        graphs: Handoff[tuple[int | None, int]],
        level: int | str | None,
        expand: tuple[str, ...],
        rows: int,
    ) -> None:
        """Ask the engine for the laid-out, drawn graph (off the event loop)."""
        before, after = graphs.take()
        canvas = session.graph_canvas(before, after, level, expand, self.reasons, rows)
        if canvas is None:
            return  # another layout was asked for since: its answer is the one shown
        layout = canvas.layout
        self.post_message(self.LayoutReady(key, _Drawn(layout, canvas if layout.boxes else None)))

    def on_graph_view_layout_ready(self, message: GraphView.LayoutReady) -> None:
        self._kept[message.key] = message.drawn
        key, level = message.key, message.drawn.layout.level
        if key[3] == "auto" and not key[2]:
            # A graph's automatic level is that level's picture (a diff's also opens
            # the changed boxes): zooming back to it finds it kept.
            self._kept[(*key[:3], level, *key[4:])] = message.drawn
        while len(self._kept) > _KEPT:
            self._kept.popitem(last=False)
        if message.key == self._want:
            self._shown = message.key
            self._show(message.drawn)

    def on_resize(self, event: events.Resize) -> None:
        """The pane changed height (a resized terminal, or the first show on a screen
        whose pane was guessed): the levels fitted to it are laid out again."""
        shown = self.display and self._step() is not None and self.session is not None
        # Only if the rows changed what to show: the first show resizes the pane too,
        # and asking twice for one layout doubled v's cost on a big graph.
        if shown and self._key() not in (self._want, self._shown):
            self.request()
        elif shown and self.layout_shown is not None:
            self.update_title()  # a narrower or wider title line

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        if event.state == WorkerState.ERROR:
            self.canvas_view.show_canvas(None, "no layout: see the status line")
            self.update_title()
            self.post_message(EngineFailed.of(event.worker))

    def _show(self, drawn: _Drawn) -> None:
        self.drawn = drawn
        layout = drawn.layout
        if drawn.canvas is None:
            note = layout.notes[-1] if layout.notes else "nothing to draw"
            self.canvas_view.show_canvas(None, note)
        else:
            self.canvas_view.show_canvas(drawn.canvas)
        for note in layout.notes:
            self.post_message(Status(note, error=drawn.canvas is None))
        self._paint_heat()
        follow, self._follow = self._follow, None
        # Scrolled once the new canvas size is in force (it bounds the scroll offset).
        self.call_after_refresh(self._place, layout, follow)
        self.update_title()

    def _place(self, layout: GraphLayout, follow: int | None) -> None:
        """Select the box that shows ``follow`` (or a diff's first change), or show the
        top of the graph."""
        if self.layout_shown is not layout:
            return
        box = layout.box_of(follow) if follow is not None else None
        if box is None and layout.diff:
            # A diff opens on the first change in reading order.
            changed = [b for b in layout.boxes.values() if b.status != "same"]
            box = min(changed, key=lambda b: (b.y, b.x)) if changed else None
        if box is not None:
            self.select_box(box, follow=True)  # the inspector and the IR pane follow
        else:
            self.canvas_view.action_home()

    def update_title(self, busy: bool = False) -> None:
        """Step, graph or diff, level, box count; ``laying out…`` while waiting."""
        step = self._step()
        title = Text()
        if step is None:
            title.append("graph", "bold")
        else:
            what = "diff" if self.diff and self.index > 0 else "graph"
            title.append(f"{what} · step {step.label}", "bold")
        layout = self.layout_shown
        label = self.query_one("#graph-title", Label)
        if busy:
            title.append("  laying out…", "italic yellow")
        elif layout is not None:
            level = "every op" if layout.level is None else f"module level {layout.level}"
            tail = Text(f"  [{level}]", "bold cyan")
            if self.heat:
                tail.append("  heat", "bold #e6550d" if self._shown_times() else "dim")
            title = _fitted(title, tail, len(layout.boxes), layout.diff, label.content_size.width)
        # One line, updated without a relayout of the view (the canvas keeps its rows).
        label.update(title, layout=False)

    # -- keys ------------------------------------------------------------------------
    def _levels(self) -> tuple[int | None, ...]:
        layout = self.layout_shown
        return layout.levels if layout is not None else ()

    def _zoom(self, step: int) -> None:
        layout = self.layout_shown
        if layout is None:
            return
        levels = list(layout.levels)
        if layout.level not in levels:
            return
        i = levels.index(layout.level) + step
        if not 0 <= i < len(levels):
            self.post_message(Status("already at " + ("every op" if step > 0 else "the top level")))
            return
        self._follow = _node_of(self.selected)
        self.level = levels[i]
        self.request()

    def action_zoom_in(self) -> None:
        """One level finer (towards every op)."""
        self._zoom(1)

    def action_zoom_out(self) -> None:
        """One level coarser (towards one box per top module)."""
        self._zoom(-1)

    def action_toggle_heat(self) -> None:
        """Ask the screen to switch the heat overlay (it knows about sample inputs)."""
        self.post_message(self.HeatToggled())

    def follow_node(self, node_id: int) -> None:
        """Select IR node ``node_id``'s box: now if the step's layout is shown, else
        when it arrives."""
        if not (self.ready and self.centre_node(node_id)):
            self._follow = node_id

    def action_toggle_diff(self) -> None:
        """Graph <-> diff against the step before."""
        self.diff = not self.diff
        self._follow = _node_of(self.selected)
        self.request()

    def action_open_box(self) -> None:
        """Open the selected module box down to its ops, or close the module it is in."""
        box = self.selected
        if box is None:
            self.post_message(Status("select a box first: click it, ] / [ or /"))
            return
        if box.role == "scope":
            self.opened = (*self.opened, box.scope)
            self._follow = box.node_ids[0] if box.node_ids else None
        else:
            opened = [s for s in self.opened if box.scope == s or box.scope.startswith(s + ".")]
            if not opened:
                what = "a removed op" if box.role == "ghost" else "an op"
                self.post_message(Status(f"{box.lines[0]} is {what}: nothing to open"))
                return
            self.opened = tuple(s for s in self.opened if s not in opened)
            self._follow = _node_of(box)
        self.request()

    def _reading_order(self) -> list[BoxLayout]:
        layout = self.layout_shown
        boxes = list(layout.boxes.values()) if layout is not None else []
        return sorted(boxes, key=lambda b: (b.y, b.x))

    def _select_relative(self, step: int) -> None:
        boxes = self._reading_order()
        if not boxes:
            return
        current = self.selected
        i = boxes.index(current) + step if current in boxes else (0 if step > 0 else -1)
        self.select_box(boxes[i % len(boxes)])

    def action_next_box(self) -> None:
        """Select the next box in reading order."""
        self._select_relative(1)

    def action_previous_box(self) -> None:
        """Select the previous box in reading order."""
        self._select_relative(-1)

    def action_search(self) -> None:
        """Open the search box: typing jumps to the first box whose label matches."""
        search = self.query_one("#graph-search", Input)
        search.add_class("-visible")
        search.value = ""
        search.focus()

    def action_close_search(self) -> None:
        """Close the search box; the canvas takes the keys again."""
        search = self.query_one("#graph-search", Input)
        search.remove_class("-visible")
        self.canvas_view.focus()

    def _forget_search(self) -> None:
        """Another step: the last search's box count is about a graph no longer shown."""
        search = self.query_one("#graph-search", Input)
        if not (self._matches or search.value or search.has_class("-visible")):
            return
        self._matches = []
        if search.has_focus:
            self.canvas_view.focus()
        search.remove_class("-visible")
        with search.prevent(Input.Changed):
            search.value = ""
        self.post_message(Status(""))

    @on(Input.Changed, "#graph-search")
    def _search_changed(self, event: Input.Changed) -> None:
        query = event.value.strip().lower()
        self._matches = (
            [b for b in self._reading_order() if any(query in x.lower() for x in b.lines)]
            if query
            else []
        )
        if self._matches:
            self.select_box(self._matches[0])
        self.post_message(
            Status(f"/{event.value}: {len(self._matches)} matching boxes" if query else "")
        )

    @on(Input.Submitted, "#graph-search")
    def _search_next(self, event: Input.Submitted) -> None:
        if not self._matches:
            self.action_close_search()
            return
        current = self.selected
        i = self._matches.index(current) + 1 if current in self._matches else 0
        self.select_box(self._matches[i % len(self._matches)])

    # -- selection -------------------------------------------------------------------
    def select_box(self, box: BoxLayout, *, follow: bool = False) -> None:
        """Select ``box``: drawn selected, centred, and said to the screen (unless
        ``follow``, the view keeping its node across a zoom, and the screen was told)."""
        self.canvas_view.select(box)
        step = self._step()
        node_id: int | None = None
        if box.role == "ghost":
            # A removed op is described from the graph it was removed from: its ids
            # are the step before's (it no longer exists in this step's graph).
            ghost = box.ghost_ids or box.node_ids
            if ghost and self.index > 0:
                step = self.steps[self.index - 1]
                node_id = ghost[0]
        elif box.role != "scope" and box.node_ids:
            node_id = box.node_ids[0]
        said = (self.run_id, self.index, box.role, node_id if node_id is not None else box.key)
        if follow and said == self._said:
            # The same node of the same run after a zoom: the inspector and IR pane show
            # it already (after a re-run they show the last run's: told again).
            return
        self._said = said
        session = self.session
        snapshot = session.known_graph(step.graph) if step and session is not None else None
        if snapshot is None and node_id is not None and step is not None and session:
            # The node's facts need the step's graph, which the screen does not have yet.
            self._select_taken(box, Handoff(step), node_id)
            return
        self.post_message(self.BoxSelected(box, snapshot, node_id))

    @work(thread=True, exclusive=True, exit_on_error=False, group="select", description="graph")
    def _select_taken(self, box: BoxLayout, step: Handoff[StepSummary], node_id: int) -> None:
        """Say the selection once the step's graph is here (taken off the event loop)."""
        snapshot = self.session.step_graph(step.take().graph)
        if not get_current_worker().is_cancelled:
            self.post_message(self.BoxSelected(box, snapshot, node_id))

    @on(GraphCanvasView.Clicked)
    def _clicked(self, event: GraphCanvasView.Clicked) -> None:
        if event.box is not None:
            self.select_box(event.box)

    # -- real pictures (kitty graphics, sixel) ---------------------------------------
    def action_picture(self) -> None:
        """On a terminal with a graphics protocol: the picture instead of characters."""
        graphics = getattr(self.app, "graphics", None)
        if not graphics:
            self.post_message(
                Status(
                    "this terminal shows no pictures (no kitty graphics or sixel; tmux passes "
                    "neither): the characters are the view here, and g writes the SVG"
                )
            )
            return
        if self.has_class("-picture"):
            self.remove_class("-picture")
            self.canvas_view.focus()
            return
        self.add_class("-picture")
        self._picture(self._key())

    def _picture(self, key: tuple[Any, ...]) -> None:
        step = self._step()
        if step is None or self.session is None:
            return
        before = self.steps[self.index - 1].graph if key[2] else None
        layout = self.layout_shown
        level = layout.level if layout is not None else self.level
        self.post_message(Status("drawing the picture with Graphviz…"))
        graphs = Handoff((before, step.graph))
        self._draw_picture(key, self.session, graphs, level, self.opened)

    @work(thread=True, exclusive=True, exit_on_error=False, group="picture", description="picture")
    def _draw_picture(
        self,
        key: tuple[Any, ...],
        session: Any,
        graphs: Handoff[tuple[int | None, int]],
        level: int | str | None,
        expand: tuple[str, ...],
    ) -> None:
        """Ask the engine for the PNG (off the event loop)."""
        before, after = graphs.take()
        path = session.graph_picture(before, after, level, expand, self.reasons)
        self.post_message(self.PictureReady(key, Path(path)))

    def on_graph_view_picture_ready(self, message: GraphView.PictureReady) -> None:
        if not self.has_class("-picture"):
            return
        from textual_image.widget import SixelImage, TGPImage

        kind = SixelImage if getattr(self.app, "graphics", None) == "sixel" else TGPImage
        for old in self.query("#graph-image"):
            old.remove()
        self.mount(kind(str(message.path), id="graph-image"))
        self.focus()  # the canvas is hidden: the view's own keys (i) stay live
        self.post_message(Status(f"the picture: {message.path.name} (i: back to characters)"))


def heat_style(share: float) -> Style:
    """The fill of a box taking ``share`` (0..1) of the forward's time: the band's colours
    in the review page's heat scale, so the terminal and the SVGs read alike."""
    _upper, fill, text = HEAT_SCALE[heat_band(share)]
    return Style(color=text, bgcolor=fill)


def _node_of(box: BoxLayout | None) -> int | None:
    """The drawn graph's node a box shows, for the view to follow across a zoom, a step
    or graph/diff: none for a removed op (a ghost's ids are the step before's)."""
    if box is None or box.role == "ghost" or not box.node_ids:
        return None
    return box.node_ids[0]


# The title's tail, longest first: the box count and the diff's colour legend, then a
# shorter legend, then the legend's signs alone. The title is one line (no relayout).
_LEGENDS = (
    (("  +added", "green"), (" ~changed", "yellow"), (" -removed", "red")),
    (("  +add", "green"), (" ~chg", "yellow"), (" -rem", "red")),
    (("  +", "green"), ("~", "yellow"), ("-", "red")),
)


def _fitted(head: Text, level: Text, boxes: int, diff: bool, width: int) -> Text:
    """``head`` (the step) and ``level`` with the box count and, for a diff, the colour
    legend, in the longest form that fits ``width`` cells (0: no width known yet, the
    longest form); where even the shortest does not fit, the step's title is cut."""
    count = (f"  {boxes} boxes", "dim")
    tails: list[tuple[tuple[str, str], ...]] = (
        [(count, *legend) for legend in _LEGENDS] if diff else [(count,)]
    )
    for tail in tails:
        end = level.copy()
        for text, style in tail:
            end.append(text, style)
        title = head + end
        if not width or title.cell_len <= width:
            return title
    cut = head.copy()
    cut.truncate(max(8, width - end.cell_len), overflow="ellipsis")
    return cut + end
