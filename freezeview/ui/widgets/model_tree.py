"""The Model pane's tree: modules, their attributes, a status badge on each and the
reason for every kept one; filterable by status; preserved names marked.

The tree owns its filter and says what the user did by messages: which attribute is
selected (:class:`ModelTree.AttributeSelected`), which one to add to or remove from
``preserved_attrs`` (:class:`ModelTree.PreserveToggled`). The screen changes the plan.
"""

from __future__ import annotations

import gc
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, TypeAlias

from rich.cells import cell_len
from rich.text import Text
from textual import work
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widget import Widget
from textual.widgets import Input, Tree
from textual.widgets.tree import TreeNode

from ...session import AttrSummary, Handoff
from ..messages import Status
from ..tree_rows import RANGE_ROWS, TreeRows, lay_out, ranges

__all__ = ["FILTERS", "RANGE_ROWS", "STATUS_STYLES", "ModelTree", "RowRange", "TreeFind", "badge"]


@dataclass(frozen=True, slots=True)
class RowRange:
    """Rows ``start`` to ``stop`` (excluded) of module ``module``'s, folded into one row."""

    module: str
    start: int
    stop: int

    @property
    def key(self) -> str:
        """Its key among the tree's rows (no attribute path holds a NUL)."""
        return f"{self.module}\0{self.start}:{self.stop}"


#: More verdicts than this are laid out under a new filter off the event loop (fewer
#: are quick enough to lay out on it, below).
LAY_OUT_HERE = 5_000

#: What a row of the tree holds: an attribute's verdict, a module's path, or a range.
Row: TypeAlias = AttrSummary | str | RowRange

#: Badge colours per status (kept stands out: it is what users came to understand).
STATUS_STYLES = {
    "inlined": "bold green",
    "kept": "bold black on yellow",
    "dropped": "dim",
}
#: A folded attribute the frozen graph still writes: its row's mark, loud.
WRITTEN_MARK = "⚠ written-constant"
WRITTEN_STYLE = "bold white on red"
#: The tree's status filters, in the order ``f`` cycles through them.
FILTERS = ("all", "inlined", "kept", "dropped")


def badge(status: str) -> Text:
    """``[inlined]`` / ``[kept]`` / ``[dropped]`` styled for the tree."""
    return Text(f" {status} ", style=STATUS_STYLES.get(status, ""))


class ModelTree(Tree[Row]):
    """Module tree; each leaf's data is its :class:`AttrSummary`, each module's its path
    (or its verdict, for a submodule), each folded range of rows its :class:`RowRange`."""

    #: Which attributes the tree lists: ``all``, ``inlined``, ``kept`` or ``dropped``.
    status_filter: reactive[str] = reactive("all", init=False)

    @dataclass
    class PreserveToggled(Message):
        """The user asked to add ``path`` to ``preserved_attrs``, or to remove it."""

        path: str

    @dataclass
    class AttributeSelected(Message):
        """The cursor is on ``path`` (an attribute, a module, or None on the root)."""

        path: str | None
        #: The attribute's verdict (None on a plain module or the root).
        view: AttrSummary | None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("model", id=id)
        self.show_root = True
        self.guide_depth = 2
        self._summaries: list[AttrSummary] = []
        self._model_name = "model"
        # The rows shown, the nodes made so far (by path, or by RowRange.key) and the
        # modules and ranges whose children are made.
        self._rows = lay_out([])
        self._made: dict[str, TreeNode[Row]] = {}
        self._populated: set[str] = set()

    @property
    def summaries(self) -> list[AttrSummary]:
        """The attributes shown (all of them, before filtering)."""
        return self._summaries

    def view_of(self, path: str) -> AttrSummary | None:
        """The attribute at ``path``."""
        return next((v for v in self._summaries if v.path == path), None)

    def show(
        self, name: str, summaries: Sequence[AttrSummary], rows: TreeRows | None = None
    ) -> None:
        """Show ``summaries`` (the model's attributes and verdicts) under ``status_filter``;
        ``rows``, their :func:`~freezeview.ui.tree_rows.lay_out` if already made (off
        the event loop: the explain worker's), used if laid out under that filter.

        A new explanation of the same model that shows the same rows (a toggle changes
        a few statuses of thousands) relabels the rows whose verdict changed, in place:
        building a big model's rows again held up the event loop, and left them all
        behind as garbage for the screen's deep collection.
        """
        same_model = name == self._model_name and bool(self._made)
        self._model_name = name
        self._summaries = list(summaries)
        if rows is None or rows.status_filter != self.status_filter:
            rows = lay_out(self._summaries, self.status_filter)
        if same_model and rows.shape == self._rows.shape:
            self._rows = rows
            self._relabel()
            self.root.set_label(self._header())
            return
        self._rebuild(rows)

    def get_label_width(self, node: TreeNode[Row]) -> int:
        """The width ``render_label`` gives ``node``'s label, without drawing it.

        Textual measures every line's label each time the tree's lines are laid out
        again (a new explanation, a node expanded), by drawing it: every line of a big
        model's tree drawn on the event loop only to be measured. Textual offers this
        override for it.
        """
        label = node.label
        width = label.cell_len if isinstance(label, Text) else cell_len(str(label))
        if node.allow_expand:
            icon = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            width += cell_len(icon)
        return width

    def _build(self) -> None:
        """Textual's layout of the tree's lines, its reference cycle freed at once.

        Textual lays the lines out with a recursive closure: a function and its own cell,
        a reference cycle that holds the whole list of lines, each line's path of nodes
        and their labels. Left to the screen's collector it is frozen with what the
        screen holds (session/collector.py) and stays until a deep sweep: every layout of a
        big model's tree, one object or more per line, each time. Laid out with the
        collector paused, the cycle is among the youngest objects, and a collection of
        those alone (which walks only them) frees it.
        """
        enabled = gc.isenabled()
        gc.disable()
        try:
            super()._build()
        finally:
            if enabled:
                gc.enable()
                gc.collect(0)

    def on_resize(self) -> None:
        if self._summaries:
            self.root.set_label(self._header())  # what fits depends on the width

    def watch_status_filter(self, value: str) -> None:
        if len(self._summaries) > LAY_OUT_HERE:
            self._lay_out_filtered(Handoff(self._summaries), value)
        elif self._summaries:
            self._rebuild(lay_out(self._summaries, value))

    @work(thread=True, exclusive=True, exit_on_error=False, group="tree-rows")
    def _lay_out_filtered(self, summaries: Handoff[list[AttrSummary]], status_filter: str) -> None:
        """A big model's rows under another filter, laid out off the event loop (a pass
        over every verdict), then shown unless stale by then. The
        verdicts come in a handoff: a finished worker keeps its arguments."""
        shown = summaries.take()
        rows = lay_out(shown, status_filter)
        self.app.call_from_thread(self._show_filtered, shown, rows)

    def _show_filtered(self, summaries: list[AttrSummary], rows: TreeRows) -> None:
        if summaries is self._summaries and rows.status_filter == self.status_filter:
            self._rebuild(rows)

    def cycle_filter(self) -> None:
        """The next status filter (all → inlined → kept → dropped → all)."""
        self.status_filter = FILTERS[(FILTERS.index(self.status_filter) + 1) % len(FILTERS)]
        self.post_message(Status(f"model tree shows: {self.status_filter}"))

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        """``space`` never expands or collapses (enter and the mouse do): it is the
        screen's key (preserve), bound there once, which asks :meth:`toggle_preserve`."""
        return action != "toggle_node"

    def toggle_preserve(self) -> None:
        """Ask to add the selected attribute to ``preserved_attrs``, or to remove it
        (:class:`PreserveToggled`); without a selection, say how to make one."""
        path = self.selected_path
        if not path:
            how = (
                "w shows the Model pane"
                if self.screen.has_class("-narrow")
                else "tab moves between panes, or click it"
            )
            self.notify(f"select an attribute or module in the model tree first ({how})", timeout=4)
            return
        self.post_message(self.PreserveToggled(path))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        self.post_message(self.AttributeSelected(self.selected_path, self.selected_view))

    def _let_go_of_nodes(self) -> None:
        """The rows about to be replaced, freed as soon as nothing else holds them.

        Textual's nodes hold their children and their children them: dropped, they
        are reference cycles, which the screen's collector frees only in a deep sweep
        once frozen (session/collector.py); each explanation (``space``) left the whole tree
        shown so far behind. The ``Tree`` keeps them by id too, past ``clear()``.
        """
        # Textual's private lists: a Textual without them keeps its own way (cycles).
        nodes = getattr(self, "_tree_nodes", None)
        if not isinstance(nodes, dict):
            return
        for node in (self.root, *nodes.values()):
            children = getattr(node, "_children", None)
            if isinstance(children, list):
                children.clear()
        nodes.clear()

    def _rebuild(self, rows: TreeRows) -> None:
        """Rebuild the tree from ``rows``, keeping the cursor on the same path when it
        still exists.

        Only the nodes that show are made: the root's children and the top-level
        modules' (expanded), then a module's children when it is first expanded. A big
        model has tens of thousands of attributes; making them all held up the event
        loop at every explanation (each preserved-attribute toggle).
        """
        selected = self.selected_path
        self._let_go_of_nodes()
        self.clear()
        self._rows = rows
        self.root.set_label(self._header())
        self.root.data = ""
        self._made = {"": self.root}
        self._populated = set()
        self._populate("")
        self.root.expand()
        if selected and selected in rows.parent_of:
            cursor_node = self._reveal(selected)
            # Line numbers exist only after the tree re-renders its expanded nodes.
            self.call_after_refresh(self.move_cursor, cursor_node)

    def _relabel(self) -> None:
        """Give the rows made so far their new verdicts (the same rows show); only a row
        whose label reads differently is drawn again."""
        data_of = self._rows.data_of
        for path, node in self._made.items():
            before = node.data
            if isinstance(before, RowRange):
                label = self._range_label(before)
                if label.plain != str(node.label):
                    node.set_label(label)
                continue
            data = data_of.get(path)
            if data is None or data is before:  # the root, or a module shown by its path
                continue
            node.data = data
            if isinstance(data, AttrSummary):
                if not isinstance(before, AttrSummary) or _label_facts(before) != _label_facts(
                    data
                ):
                    node.set_label(self._label(data))
            elif isinstance(before, AttrSummary):  # a module shown by its name alone now
                node.set_label(path.rsplit(".", 1)[-1])

    def _populate(self, key: str) -> None:
        """Make the nodes of a module's children, or of a range's (once); the top-level
        modules are expanded, so theirs too, unless there are so many that they are
        folded in ranges."""
        if key in self._populated:
            return
        self._populated.add(key)
        node = self._made[key]
        folded = node.data
        if isinstance(folded, RowRange):
            module, start, stop = folded.module, folded.start, folded.stop
        else:
            module, start, stop = key, 0, len(self._rows.children.get(key, ()))
        spans = ranges(stop - start)
        if spans:
            for first, last in spans:
                rows = RowRange(module, start + first, start + last)
                self._made[rows.key] = node.add(self._range_label(rows), data=rows)
            return
        for child, data, is_module in self._rows.children.get(module, [])[start:stop]:
            if not is_module:
                assert isinstance(data, AttrSummary)
                self._made[child] = node.add_leaf(self._label(data), data=data)
                continue
            label = self._label(data) if isinstance(data, AttrSummary) else child.rsplit(".", 1)[-1]
            top = isinstance(data, AttrSummary) and node is self.root
            self._made[child] = node.add(label, data=data, expand=top)
            if top:
                self._populate(child)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        data = event.node.data
        key = (
            data.key
            if isinstance(data, RowRange)
            else data.path
            if isinstance(data, AttrSummary)
            else data
        )
        if isinstance(key, str) and key in self._made and key not in self._populated:
            self._populate(key)

    def _reveal(self, path: str) -> TreeNode[Row]:
        """The node of ``path`` (shown: its modules, and the ranges it is folded in, made
        and expanded)."""
        chain = [path]
        while chain[-1]:
            chain.append(self._rows.parent_of[chain[-1]])
        for module, child in zip(reversed(chain[1:]), reversed(chain[:-1]), strict=True):
            key = module
            while True:
                self._populate(key)
                self._made[key].expand()
                inner = self._range_holding(key, self._rows.place[child])
                if inner is None:
                    break
                key = inner
        return self._made[path]

    def _range_holding(self, key: str, place: int) -> str | None:
        """The key of the range, among module or range ``key``'s rows (made), that
        holds the module's row number ``place``; None if they are not folded."""
        for node in self._made[key].children:
            rows = node.data
            if isinstance(rows, RowRange) and rows.start <= place < rows.stop:
                return rows.key
        return None

    def _range_label(self, rows: RowRange) -> Text:
        """A range's row: its first and last rows' names, how many, how many kept."""
        children = self._rows.children.get(rows.module, [])
        first = children[rows.start][0].rsplit(".", 1)[-1]
        last = children[rows.stop - 1][0].rsplit(".", 1)[-1]
        kept_under = self._rows.kept_under
        kept = sum(kept_under.get(path, 0) for path, _, _ in children[rows.start : rows.stop])
        label = Text.assemble(f"[{first} … {last}]", (f"  {rows.stop - rows.start} rows", "dim"))
        if kept:
            label.append(f"  {kept} kept", "yellow")
        return label

    def _header(self) -> Text:
        """The root's label: the model's name and the counts, as much as fits the pane.

        The counts always show in full (the title bar names the model too): the name
        goes first, then the double spaces, then the filter note's words, then the note.
        """
        # Room for the label: the pane less the root's "▼ " (40 at 160 columns).
        room = (self.scrollable_content_region.width or 42) - 2
        # The same counts as `freezeview explain`'s summary line: every attribute path.
        counts = self._rows.counts
        for with_name, gap, showing in (
            (True, "  ", "showing "),
            (False, "  ", "showing "),
            (False, " ", "showing "),
            (False, " ", ""),
            (False, " ", None),
        ):
            label = Text.assemble((self._model_name, "bold"), "  ") if with_name else Text()
            label.append_text(self._summary(counts, gap, showing))
            if label.cell_len <= room:
                break
        return label

    def _summary(self, counts: dict[str, int], gap: str, showing: str | None) -> Text:
        text = Text()
        for status, n in counts.items():
            if len(text):
                text.append(gap)
            text.append(f"{n} {status}", STATUS_STYLES[status] if status != "kept" else "yellow")
        if self.status_filter != "all" and showing is not None:
            text.append(f"{gap}({showing}{self.status_filter})", "italic")
        return text

    @staticmethod
    def _label(v: AttrSummary) -> Text:
        return _label_text(*_label_facts(v))

    @property
    def selected_path(self) -> str | None:
        """Path of the attribute or module under the cursor."""
        node = self.cursor_node
        if node is None or node.data is None or isinstance(node.data, RowRange):
            return None
        if isinstance(node.data, AttrSummary):
            return node.data.path
        return node.data or None

    @property
    def selected_view(self) -> AttrSummary | None:
        """The attribute under the cursor (None on a plain module or the root)."""
        node = self.cursor_node
        if node is not None and isinstance(node.data, AttrSummary):
            return node.data
        path = self.selected_path
        return self.view_of(path) if path else None

    # -- find by name (ctrl+f) -----------------------------------------------------------
    def open_find(self) -> None:
        """Show the find box above the tree and focus it: typing jumps to the first
        attribute whose dotted path holds the text, enter to the next."""
        found = self.screen.query("#tree-find")
        box = found.first(TreeFind) if found else None
        if box is None:
            box = TreeFind(self)
            parent = self.parent
            assert isinstance(parent, Widget)
            parent.mount(box, before=self)
        box.display = True
        box.focus()

    def find(self, text: str, after: str | None = None) -> tuple[int, int]:
        """Put the cursor on the first attribute or module (after ``after``, around the
        end) whose dotted path holds ``text`` (case ignored) among the rows the filter
        shows; returns (which match, how many), (0, 0) when none."""
        needle = text.strip().lower()
        if not needle:
            return 0, 0
        shown = self._rows.parent_of
        matches = [v.path for v in self._summaries if needle in v.path.lower() and v.path in shown]
        if not matches:
            return 0, 0
        at = 0
        if after in matches:
            at = (matches.index(after) + 1) % len(matches)
        self.select_path(matches[at])
        return at + 1, len(matches)

    def select_path(self, path: str) -> bool:
        """Move the cursor to ``path``; False if it is not shown."""
        if path not in self._rows.parent_of:
            return False
        node = self._reveal(path)
        self.call_after_refresh(self.move_cursor, node)
        return True


class TreeFind(Input):
    """The model tree's find box (ctrl+f): a part of a dotted path, such as
    ``layer3.2.bn`` or ``running_var``; enter goes to the next match, escape closes."""

    DEFAULT_CSS = """
    TreeFind {
        height: 3;
    }
    """
    BINDINGS = [Binding("escape", "close", "Close find", show=False)]

    def __init__(self, tree: ModelTree) -> None:
        super().__init__(
            placeholder="find an attribute by its path (enter: next, esc: close)", id="tree-find"
        )
        self._tree = tree

    def _say(self, text: str, found: tuple[int, int]) -> None:
        at, count = found
        tree = self._tree
        if count:
            self.post_message(Status(f"{at} of {count} attribute paths hold {text.strip()!r}"))
        elif text.strip():
            shown = "" if tree.status_filter == "all" else f" (tree shows: {tree.status_filter})"
            self.post_message(Status(f"no attribute path holds {text.strip()!r}{shown}", True))

    def on_input_changed(self, event: Input.Changed) -> None:
        event.stop()
        self._say(event.value, self._tree.find(event.value))

    def on_input_submitted(self, event: Input.Submitted) -> None:
        event.stop()
        self._say(event.value, self._tree.find(event.value, after=self._tree.selected_path))

    def action_close(self) -> None:
        """Hide the box; the tree takes the focus, on the attribute found."""
        self.display = False
        self._tree.focus()


def _label_facts(v: AttrSummary) -> tuple[bool, str, str, str, str | None, str]:
    """What a row's label shows of ``v``: equal facts, the same label."""
    kept_reason = v.reasons[0].code if v.status == "kept" and v.reasons else None
    if v.written_constant:
        kept_reason = WRITTEN_MARK
    return (v.preserved, v.name, v.kind, v.status, kept_reason, v.value)


def _label_text(
    preserved: bool, name: str, kind: str, status: str, kept_reason: str | None, value: str
) -> Text:
    """A row's label, from :func:`_label_facts`."""
    text = Text()
    text.append("★ " if preserved else "  ", "bold magenta")
    text.append(name, "bold" if kind == "submodule" else "")
    text.append(" ")
    text.append_text(badge(status))
    if kept_reason == WRITTEN_MARK:
        text.append(" ")
        text.append(kept_reason, WRITTEN_STYLE)
    elif kept_reason:
        text.append(f" {kept_reason}", "yellow")
    short = {"parameter": "param", "buffer": "buffer", "attribute": "attr"}.get(kind)
    if short:
        text.append(f"  {short}", "dim")
    if value:
        text.append(f" {value}", "cyan")  # an enum member, by name
    return text
