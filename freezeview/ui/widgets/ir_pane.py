"""The IR pane: the loaded model or a step as IR, ``.code`` or the step's diff.

The pane owns what it shows (``view_mode``, the run's steps it was given and which one),
its documents (a step's IR or code is shown at once and coloured line by line as it is
drawn, see :class:`IRView`; a diff is computed off the event loop and kept for the run),
the marks of the selected attribute's readers and writers, its search box and its title.
It posts :class:`IRPane.NodeSelected` when the cursor lands on a node's line (the
inspector shows its facts). The screen tells it which step to show
(:meth:`IRPane.show_step`, on the steps bar's ``StepSelected``) and which attribute to
mark (:meth:`IRPane.mark_attribute`, on the model tree's ``AttributeSelected``).
"""

from __future__ import annotations

import textwrap
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.app import ComposeResult
from textual.containers import Vertical
from textual.message import Message
from textual.reactive import reactive
from textual.timer import Timer
from textual.widgets import Input, Label
from textual.worker import Worker, WorkerState, get_current_worker

from ...session import Handoff, StepSummary, collector
from ..messages import EngineFailed, FinalCodeReady, Highlighted, Status
from .ir_source import GraphRead, GraphsTaken
from .ir_view import IRView

if TYPE_CHECKING:
    from ...session import EngineSession, GraphSnapshot, NodeFacts

__all__ = ["VIEW_MODES", "IRPane"]

#: What the pane can show, in the order ``d`` cycles through them.
VIEW_MODES = ("ir", "code", "diff")

# Line maps kept: the steps either side of the one shown, and a few more.
_LINE_INDEXES = 4

# Graphs up to this many nodes are read whole (marks, a node's facts) on the event loop
# (quick enough not to hold up the keys); bigger ones in a worker.
_SYNC_FACTS_NODES = 2000
# Seconds the cursor rests on a line of a big graph before its node's facts are read.
_CURSOR_REST = 0.08

# Diffs of graphs up to this many nodes are computed on the spot; bigger ones in a
# worker so that stepping through a big graph never holds the event loop.
_SYNC_DIFF_NODES = 200


def code_header(step: StepSummary, steps: Sequence[StepSummary], which: str) -> str:
    """The comment above the ``.code`` view of ``step``: whose code it is.

    TorchScript prints ``.code`` for a module, and a run has two: the loaded module and
    the final frozen one; the steps between are graphs (their IR and diff are the
    step's own). ``which`` is ``final`` or ``loaded``.
    """
    last = steps[-1] if steps else step
    this = f"step {step.label}"
    inside = (
        "TorchScript prints .code only for a module; a step inside the run is a graph: "
        "d shows its diff, then its IR."
    )
    if which == "final" and step is last:
        text = f".code of the final frozen module: this step, {this}, is the run's last."
    elif which == "final":
        text = (
            f".code of the final frozen module, after the run's last step, "
            f"{last.label}: not {this}'s own. {inside}"
        )
    else:
        text = (
            f".code of the loaded module, before freezing: not {this}'s own. {inside} "
            "The frozen module's .code shows at the steps after fold_attributes."
        )
    lines = textwrap.wrap(text, 60)
    return "".join(f"# {line}\n" for line in lines)


class IRPane(Vertical):
    """Title, IR text view and search box (see the module docstring)."""

    #: What the pane shows: ``ir``, ``code`` or ``diff``.
    view_mode: reactive[str] = reactive("ir", init=False)

    @dataclass
    class NodeSelected(Message):
        """The IR cursor is on the line of a node: its inputs, outputs and writes."""

        facts: NodeFacts

    @dataclass
    class MarksShown(Message):
        """The lines of attribute ``path``'s readers and writers are marked (``count``)."""

        path: str
        count: int

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        #: The run whose steps are shown (diffs are kept for this run only).
        self.run_id = 0
        #: The run's steps (the screen's list: it grows as steps arrive).
        self.steps: Sequence[StepSummary] = ()
        #: Which of them is shown (-1: the loaded model).
        self.index = -1
        #: True when the model could not be opened (the title says so).
        self.failed = False
        self._loaded_text = ""
        self._loaded_code = ""
        self._source: EngineSession | None = None
        self._attribute: str | None = None
        # The current run's diffs by (run, step, mode): a re-run empties it.
        self._doc_cache: dict[tuple[Any, ...], str] = {}
        # Line maps of the last few snapshots shown (id -> the snapshot, so the id
        # stays its own, and the map).
        self._line_index: dict[
            int, tuple[GraphSnapshot, tuple[dict[int, int], dict[int, int]]]
        ] = {}
        self._search_anchor = 0
        # Marked lines of the last few (snapshot, attribute) pairs: id -> (snapshot, lines).
        self._marks: dict[tuple[int, str], tuple[GraphSnapshot, frozenset[int]]] = {}
        self._facts_lock = threading.Lock()  # the maps are filled by workers too
        self._node_timer: Timer | None = None
        #: True while the pane waits for the graph of the step it shows.
        self.taking_graph = False
        #: True once the run shown has all its steps (its final ``.code`` can be read).
        self.run_finished = False
        self._code_asked = 0  # the run whose final .code was asked for
        # (run, step, node) whose IR line the cursor goes to once the step's IR shows.
        self._goto: tuple[int, int, int] | None = None

    def compose(self) -> ComposeResult:
        yield Label("IR", id="ir-title", classes="pane-title")
        yield IRView(id="ir")
        yield Input(placeholder="search the IR (enter: next match, esc: close)", id="search")

    @property
    def ir(self) -> IRView:
        """The text view."""
        return self.query_one(IRView)

    # -- what the screen tells the pane ------------------------------------------------
    def show_text(self, text: str) -> None:
        """Plain text instead of a graph (loading, or why the model did not open)."""
        self.ir.set_document(text, "text")

    def show_failure(self, message: str) -> None:
        """Why the model could not be opened, in place of a graph."""
        self.failed = True
        wrapped = textwrap.fill(message, width=max(40, self.ir.size.width - 2))
        self.show_text(f"could not open the model:\n\n{wrapped}\n")
        self.update_title()

    def set_loaded(self, text: str, code: str, source: EngineSession) -> None:
        """The loaded model's IR and ``.code`` (shown until the first step), and where
        diffs and the final code come from."""
        self._loaded_text = text
        self._loaded_code = code
        self._source = source

    def show_step(self, run_id: int, steps: Sequence[StepSummary], index: int) -> None:
        """Show step ``index`` of run ``run_id`` (-1: the loaded model)."""
        if run_id != self.run_id:
            # An earlier run's diffs and line maps are never needed again (a line map
            # is two dicts the size of the graph, and keyed by the snapshot's id, which
            # a newer snapshot may reuse).
            self._doc_cache.clear()
            with self._facts_lock:
                self._line_index.clear()
                self._marks.clear()
            self.workers.cancel_group(self, "highlight")
        if run_id != self.run_id:
            self.run_finished = False
        self.run_id = run_id
        self.steps = steps
        self.index = index
        self.show_current()

    def mark_attribute(self, path: str | None, refresh: bool = True, scroll: bool = False) -> None:
        """Mark the lines that read or write ``path`` (None: no marks); ``scroll``: bring
        the first into view. On a big graph the marks come a moment later (a worker reads
        the graph): :class:`IRPane.MarksShown` says when."""
        self._attribute = path
        if refresh:
            self.refresh_marks(scroll)

    def cycle_view(self) -> None:
        """IR → code → diff → IR."""
        self.view_mode = VIEW_MODES[(VIEW_MODES.index(self.view_mode) + 1) % len(VIEW_MODES)]

    def open_search(self) -> None:
        """Show the search box and focus it."""
        search = self.query_one("#search", Input)
        self._search_anchor = self.ir.cursor_line
        search.add_class("-visible")
        search.focus()

    def scroll_to_marks(self) -> None:
        """Bring the first marked line into view if it is not."""
        ir = self.ir
        marks = sorted(ir.marked_lines)
        if marks and not ir.scroll_offset.y <= marks[0] < ir.scroll_offset.y + ir.size.height:
            ir.scroll_to(y=max(0, marks[0] - 3), animate=False)

    # -- diffs off the event loop -------------------------------------------------------
    @work(
        thread=True,
        exclusive=True,
        exit_on_error=False,
        group="highlight",
        description="diffing",
    )
    def highlight(self, key: tuple[Any, ...], build: Handoff[Callable[[], str]], mode: str) -> None:
        """Build a document (a diff: slow on big graphs) off the event loop."""
        text = build.take()()
        if not get_current_worker().is_cancelled:
            self.post_message(Highlighted(key, [], text))

    def on_highlighted(self, message: Highlighted) -> None:
        message.stop()
        if message.key[0] != self.run_id:
            return  # a diff of an earlier run
        self._doc_cache[message.key] = message.text
        if message.key == self.document_key():
            self.ir.set_document(message.text, self.view_mode)
            self.refresh_marks()

    def on_worker_state_changed(self, event: Worker.StateChanged) -> None:
        # Worker messages do not bubble: the screen's one failure handler gets it this way.
        if event.state == WorkerState.ERROR:
            self.post_message(EngineFailed.of(event.worker))

    # -- the document ------------------------------------------------------------------
    def watch_view_mode(self, mode: str) -> None:
        self.show_current()

    def current(self) -> StepSummary | None:
        """The step shown (None before the first step arrives)."""
        if 0 <= self.index < len(self.steps):
            return self.steps[self.index]
        return None

    def current_snapshot(self) -> GraphSnapshot | None:
        """The graph shown (None before the first step, and while it is being taken)."""
        step = self.current()
        return self._graph(step)

    def _graph(self, step: StepSummary | None) -> GraphSnapshot | None:
        """``step``'s graph, if the screen has it."""
        if step is None or self._source is None:
            return None
        return self._source.known_graph(step.graph)

    def _missing_graphs(self) -> tuple[int, ...]:
        """Keys of the graphs the current document needs and the screen lacks."""
        step = self.current()
        if step is None or self._source is None or self.view_mode == "code":
            return ()
        wanted = [step.graph]
        if self.view_mode == "diff" and self.index > 0:
            wanted.insert(0, self.steps[self.index - 1].graph)
        return tuple(k for k in dict.fromkeys(wanted) if self._source.known_graph(k) is None)

    @work(
        thread=True,
        exclusive=True,
        exit_on_error=False,
        group="graphs",
        description="taking a step's graph",
    )
    def take_graphs(self, run_id: int, keys: tuple[int, ...]) -> None:
        """Have the engine snapshot and send the graphs of a step the pane shows (only
        the steps somebody looks at are ever snapshotted)."""
        source = self._source
        assert source is not None
        for key in keys:
            source.step_graph(key)
        self.post_message(GraphsTaken(run_id))

    @on(GraphsTaken)
    def _graphs_taken(self, message: GraphsTaken) -> None:
        message.stop()
        # The graphs live until a re-run: out of the collector's walks at once.
        collector.keep()
        self.taking_graph = False
        if message.run_id == self.run_id and self.current() is not None:
            self.show_current()

    def document_key(self) -> tuple[Any, ...]:
        """Identifies what the pane should show now."""
        return (self.run_id, self.index, self.view_mode)

    def _document_text(self) -> Callable[[], str]:
        """A function building the current document's text (may be slow for diffs)."""
        step = self.current()
        mode = self.view_mode
        snap = self.current_snapshot()
        if snap is None:
            preview = self._loaded_text if mode != "code" else self._loaded_code
            return lambda: preview
        if mode == "ir":
            return lambda: snap.text
        if mode == "code":
            code = self._code_for(self.index)
            return lambda: code
        previous = self._graph(self.steps[self.index - 1]) if self.index > 0 else None
        if step is None or previous is None:
            return lambda: "(the first step has nothing before it to compare with)\n"
        source = self._source
        assert source is not None
        # The step's number and title as the header, the timeline and the CLI say them.
        a = self.steps[self.index - 1].label
        b = step.label

        def build() -> str:
            text = source.diff_text(previous, snap, a, b)
            return text or f"(step {step.label} did not change the graph)\n"

        return build

    def _final_code_missing(self) -> bool:
        """True when the ``.code`` view of the step shown needs the final module's code
        and the screen has not got it yet (only read when shown: torch prints it from the
        whole graph, slowly for a big one)."""
        step = self.current()
        return (
            self.view_mode == "code"
            and self.run_finished
            and self._source is not None
            and step is not None
            and step.name not in ("inline", "fold_attributes")
            and not any(s.code for s in self.steps[: self.index + 1])
            and self._source.final_code is None
            and self._code_asked != self.run_id
        )

    @work(
        thread=True,
        exclusive=True,
        exit_on_error=False,
        group="final-code",
        description="reading the frozen module's .code",
    )
    def read_final_code(self, run_id: int) -> None:
        """Have the engine read the final frozen module's ``.code`` (FinalCodeReady says
        when it is here: the screen shows it again)."""
        source = self._source
        assert source is not None
        source.read_final_code()
        self.post_message(FinalCodeReady(run_id))

    def _code_for(self, index: int) -> str:
        # The pipeline keeps graphs, not modules, per step: a step's own code is shown
        # when the engine gives it; otherwise the loaded module's code up to the
        # attribute folding, and the final frozen module's from the clean-up on.
        for i in range(min(index, len(self.steps) - 1), -1, -1):
            code = self.steps[i].code
            if code:
                return code
        step = self.current()
        final = self._source.final_code if self._source else None
        if step is not None and step.name not in ("inline", "fold_attributes") and final:
            return code_header(step, self.steps, "final") + final
        if step is not None:
            return code_header(step, self.steps, "loaded") + self._loaded_code
        return self._loaded_code

    def show_current(self) -> None:
        """Put the current document in the pane (a big diff is computed off the loop)."""
        key = self.document_key()
        cached = self._doc_cache.get(key)
        self.taking_graph = False
        missing = () if cached is not None else self._missing_graphs()
        if cached is not None:
            self.ir.set_document(cached, self.view_mode)
        elif self._final_code_missing():
            self.ir.set_document("reading the frozen module's .code…\n", "text")
            self._code_asked = self.run_id
            self.read_final_code(self.run_id)
        elif missing:
            step = self.current()
            assert step is not None
            self.ir.set_document(f"taking the graph of step {step.label}…\n", "text")
            self.taking_graph = True
            self.take_graphs(self.run_id, missing)
        else:
            build = self._document_text()
            step = self.current()
            small = step is not None and step.node_count < _SYNC_DIFF_NODES
            if self.view_mode != "diff" or small:
                text = build()
                if self.view_mode == "diff":
                    self._doc_cache[key] = text
                self.ir.set_document(text, self.view_mode)
            else:
                self.ir.set_document("computing…", self.view_mode)
                self.highlight(key, Handoff(build), self.view_mode)
        self.refresh_marks()
        self.update_title()
        goto, self._goto = self._goto, None
        if goto is not None and goto[:2] == (self.run_id, self.index):
            if self.current_snapshot() is None:
                self._goto = goto  # still being taken
            else:
                self.go_to_node(goto[2])

    def update_title(self) -> None:
        """The pane's title: the step, its changes, the view and the node count."""
        step = self.current()
        mode = {"ir": "IR", "code": ".code", "diff": "diff"}[self.view_mode]
        if self.view_mode == "code" and step is not None and step is not self.steps[-1]:
            # Whose .code it is: a module's, never a step's inside the run.
            early = step.name in ("inline", "fold_attributes") or not self.run_finished
            mode = ".code of the loaded module" if early else ".code of the frozen module"
        title = Text()
        if self.failed:
            title.append("no model", "bold red")
        elif step is None:
            title.append("loaded model (inlined forward)", "bold")
        else:
            title.append(f"step {step.label}", "bold")
            title.append(" · ")
            title.append(f"+{step.added} ", "green")
            title.append(f"-{step.removed} ", "red")
            title.append(f"~{step.changed_nodes}", "yellow")
            if step.numerics:
                title.append(f" · Δ {step.numerics}")
        title.append(f"  [{mode}]", "bold cyan")
        if step is not None:
            title.append(f"  {step.node_count} nodes", "dim")
        self.query_one("#ir-title", Label).update(title, layout=False)

    # -- marks and the node under the cursor ---------------------------------------------
    # Each reads the whole graph (the line map, the attribute's readers and writers, a
    # node's users): on a big graph that would hold up the keys, so above
    # _SYNC_FACTS_NODES nodes it runs in a thread worker and the result is applied
    # when it comes, if the pane still shows that graph.
    def line_index(self, snap: GraphSnapshot) -> tuple[dict[int, int], dict[int, int]]:
        """Cached IR line <-> node map for a snapshot (blocking: a whole-graph pass the
        first time; the workers call it)."""
        from ...session import line_index

        key = id(snap)
        with self._facts_lock:
            hit = self._line_index.get(key)
        if hit is None or hit[0] is not snap:
            hit = (snap, line_index(snap))
            with self._facts_lock:
                while len(self._line_index) >= _LINE_INDEXES:
                    self._line_index.pop(next(iter(self._line_index)))
                self._line_index[key] = hit
        return hit[1]

    def _on_loop(self, snap: GraphSnapshot) -> bool:
        """True when reading ``snap`` whole is quick enough for the event loop."""
        return snap.node_count < _SYNC_FACTS_NODES

    def refresh_marks(self, scroll: bool = False) -> None:
        """Mark the IR lines that read or write the selected attribute (``scroll``:
        then bring the first one into view)."""
        snap = self.current_snapshot()
        path = self._attribute
        if snap is None or path is None or self.view_mode != "ir":
            self.ir.mark_lines(())
            return
        cached = self._marks.get((id(snap), path))
        if cached is not None and cached[0] is snap:
            self._apply_marks(path, cached[1], scroll)
        elif self._on_loop(snap):
            self._apply_marks(path, self._marks_of(snap, path), scroll)
        else:
            self.ir.mark_lines(())  # the last graph's marks would point at other lines
            self._read_graph(Handoff((snap, "marks", path, scroll)))

    def _marks_of(self, snap: GraphSnapshot, path: str) -> frozenset[int]:
        """The lines of ``path``'s readers and writers in ``snap`` (blocking)."""
        from ...session import attribute_node_ids

        _by_line, by_node = self.line_index(snap)
        ids = attribute_node_ids(snap, path)
        lines = frozenset(by_node[i] for i in ids if i in by_node)
        with self._facts_lock:
            while len(self._marks) >= _LINE_INDEXES:
                self._marks.pop(next(iter(self._marks)))
            self._marks[(id(snap), path)] = (snap, lines)
        return lines

    def _apply_marks(self, path: str, lines: frozenset[int], scroll: bool) -> None:
        self.ir.mark_lines(lines)
        self.post_message(self.MarksShown(path, len(lines)))
        if scroll:
            self.scroll_to_marks()

    def go_to_node_shown(self, node_id: int) -> None:
        """Put the cursor on IR node ``node_id``'s line of the step shown, in the IR
        view: now if its graph is here, else once it has been taken."""
        # Kept until the IR of that step is on screen (show_current goes there).
        self._goto = (self.run_id, self.index, node_id)
        if self.view_mode != "ir":
            self.view_mode = "ir"
        if self._goto is not None and self.current_snapshot() is not None:
            self._goto = None
            self.go_to_node(node_id)

    def go_to_node(self, node_id: int) -> bool:
        """Put the cursor on IR node ``node_id``'s line (the IR view; the graph view
        selected it); False if the node has no line here (on a big graph not read yet:
        True, and the cursor moves when the line is known)."""
        snap = self.current_snapshot()
        if snap is None:
            return False
        if self.view_mode != "ir":
            self.view_mode = "ir"
        with self._facts_lock:
            known = self._line_index.get(id(snap))
        if not self._on_loop(snap) and (known is None or known[0] is not snap):
            self._read_graph(Handoff((snap, "goto", node_id, False)))
            return True
        _by_line, by_node = self.line_index(snap)
        line = by_node.get(node_id)
        if line is None:
            return False
        self.ir.cursor_line = line
        return True

    @on(IRView.CursorMoved)
    def _ir_line_moved(self, event: IRView.CursorMoved) -> None:
        snap = self.current_snapshot()
        if snap is None or self.view_mode != "ir" or not event.view.has_focus:
            return
        if not self._on_loop(snap):
            # Read when the cursor rests: holding a key down asks for one node, not one
            # whole-graph pass per line passed.
            if self._node_timer is not None:
                self._node_timer.stop()
            # The timer is kept until the next move: it names the graph by id and the
            # line, never holds the graph (a re-run must free the last run's graphs).
            shown, line = id(snap), event.line
            self._node_timer = self.set_timer(_CURSOR_REST, lambda: self._rested(shown, line))
            return
        facts = self._facts_at(snap, event.line)
        if facts is not None:
            self.post_message(self.NodeSelected(facts))

    def _rested(self, shown: int, line: int) -> None:
        """The cursor rested on ``line`` of the graph ``shown`` (its id): read its node's
        facts, if the pane still shows that graph."""
        snap = self.current_snapshot()
        if snap is not None and id(snap) == shown and self.view_mode == "ir":
            self._read_graph(Handoff((snap, "node", line, False)))

    def _facts_at(self, snap: GraphSnapshot, line: int) -> NodeFacts | None:
        from ...session import node_facts

        by_line, _ = self.line_index(snap)
        node_id = by_line.get(line)
        return node_facts(snap, node_id) if node_id is not None else None

    def _read_graph(self, job: Handoff[tuple[GraphSnapshot, str, Any, bool]]) -> None:
        """Ask a whole-graph question off the event loop: ``marks`` (of an attribute),
        ``node`` (the facts of a line's node), ``goto`` (a node's line). One worker per
        kind at a time: a newer question cancels the older one's answer."""
        what = job.peek()[1]

        def read() -> None:
            snap, what, arg, scroll = job.take()
            result: Any
            if what == "marks":
                result = self._marks_of(snap, arg)
            elif what == "node":
                result = self._facts_at(snap, arg)
            else:
                result = self.line_index(snap)[1].get(arg)
            if not get_current_worker().is_cancelled:
                self.post_message(GraphRead(id(snap), what, arg, result, scroll))

        self.run_worker(
            read, thread=True, exclusive=True, exit_on_error=False, group=f"graph-{what}"
        )

    @on(GraphRead)
    def _graph_read(self, message: GraphRead) -> None:
        message.stop()
        snap = self.current_snapshot()
        if snap is None or id(snap) != message.snapshot or self.view_mode != "ir":
            return  # the pane moved on
        if message.what == "marks":
            if message.arg == self._attribute:
                self._apply_marks(message.arg, message.result, message.scroll)
        elif message.what == "node":
            if message.result is not None and message.arg == self.ir.cursor_line:
                self.post_message(self.NodeSelected(message.result))
        elif message.result is not None:
            self.ir.cursor_line = message.result

    # -- search ------------------------------------------------------------------------
    @on(Input.Changed, "#search")
    def _search_changed(self, event: Input.Changed) -> None:
        matches = self.ir.search(event.value)
        if matches:
            # Typing refines the query: go to the first match from where the search began.
            self.ir.cursor_line = next((m for m in matches if m >= self._search_anchor), matches[0])
        self.post_message(
            Status(f"/{event.value}: {len(matches)} matching lines" if event.value else "")
        )

    @on(Input.Submitted, "#search")
    def _search_next(self, event: Input.Submitted) -> None:
        self.ir.next_match()

    def close_search(self) -> bool:
        """Hide the search box if it is open (the IR view takes the focus); False if it
        was not open."""
        search = self.query_one("#search", Input)
        if not search.has_class("-visible"):
            return False
        search.remove_class("-visible")
        self.ir.focus()
        return True
