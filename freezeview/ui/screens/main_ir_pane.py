"""What the main screen's IR pane shows, and the panes that follow it.

The IR pane shows the loaded model or the current step as IR, ``.code`` or the step's
diff; documents are highlighted off the event loop (and every step's IR ahead of time)
and cached. The lines that read or write the attribute selected in the model tree are
marked; the inspector follows the tree and the IR cursor; the search box and the steps
bar's timeline and passes act on the pane. See :mod:`.main_layout` for the layers.
"""

from __future__ import annotations

import gc
from typing import TYPE_CHECKING, Any

from rich.text import Text
from textual import on, work
from textual.widgets import DataTable, Input, Label, SelectionList, Tab, Tree
from textual.worker import get_current_worker

from ..messages import Highlighted
from ..views import StepView
from ..widgets.inspector import attribute_panel, node_panel
from ..widgets.ir_view import IRView, highlight_lines
from .main_layout import MainLayout

if TYPE_CHECKING:
    from ...engine.graph.snapshot_values import GraphSnapshot

__all__ = ["MainIRPane"]

# Documents up to this many lines are highlighted on the spot; longer ones in a worker
# so that stepping through a big graph never holds the event loop.
_SYNC_HIGHLIGHT_LINES = 120


class MainIRPane(MainLayout):
    """The IR pane, its documents and marks, and the panes that follow it."""

    # -- highlighting off the event loop ---------------------------------------------
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

    def on_highlighted(self, message: Highlighted) -> None:
        text = message.text
        self._doc_cache[message.key] = (text, message.lines)
        if message.key == self.document_key() and not (
            message.prefetch and self.ir.document == text and self.ir.highlighted
        ):
            self.ir.set_document(text, self.view_mode, message.lines)
            self.refresh_marks()

    # -- reactives -------------------------------------------------------------------
    def watch_current_step(self, old: int, new: int) -> None:
        self.show_current()
        if 0 <= new < self.steps_bar.timeline.row_count:
            self.steps_bar.timeline.move_cursor(row=new, animate=False)

    def watch_view_mode(self, mode: str) -> None:
        self.show_current()

    def watch_status_filter(self, value: str) -> None:
        if self.views:
            self.model_tree.show(self.session.name if self.session else "model", self.views, value)

    def watch_stepping(self, value: bool) -> None:
        # No class on the screen for this: nothing styles it, and a screen class change
        # restyles every widget (twice a run).
        self.update_titles()

    def watch_stale(self, value: bool) -> None:
        self.set_class(value, "-stale")
        self.update_titles()

    # -- the IR pane -------------------------------------------------------------------
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
        from ...engine.graph.facts import line_index

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
        from ...engine.graph.facts import attribute_node_ids

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
        from ...engine.graph.facts import node_facts

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
