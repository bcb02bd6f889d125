"""The Model pane's tree: modules, their attributes, a status badge on each and the
reason for every kept one; filterable by status; preserved names marked.

The tree owns its filter and says what the user did by messages: which attribute is
selected (:class:`ModelTree.AttributeSelected`), which one to add to or remove from
``preserved_attrs`` (:class:`ModelTree.PreserveToggled`). The screen changes the plan.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from rich.cells import cell_len
from rich.text import Text
from textual.binding import Binding
from textual.message import Message
from textual.reactive import reactive
from textual.widgets import Tree
from textual.widgets.tree import TreeNode

from ..messages import Status
from ..views import AttrView

__all__ = ["FILTERS", "STATUS_STYLES", "ModelTree", "badge"]

#: The rows a status filter shows: each module's children (path, data, whether a module),
#: in order, by the module's path ("" for the root's).
Rows = dict[str, list[tuple[str, AttrView | str, bool]]]

#: Attributes every scripted module carries; listed only when kept.
HOUSEKEEPING = frozenset({"training", "_is_full_backward_hook"})

#: Badge colours per status (kept stands out: it is what users came to understand).
STATUS_STYLES = {
    "inlined": "bold green",
    "kept": "bold black on yellow",
    "dropped": "dim",
}
#: The tree's status filters, in the order ``f`` cycles through them.
FILTERS = ("all", "inlined", "kept", "dropped")


def badge(status: str) -> Text:
    """``[inlined]`` / ``[kept]`` / ``[dropped]`` styled for the tree."""
    return Text(f" {status} ", style=STATUS_STYLES.get(status, ""))


class ModelTree(Tree[AttrView | str]):
    """Module tree; each leaf's data is its :class:`AttrView`, each module's its path."""

    BINDINGS = [
        # Space toggles preserve on the selected attribute, not the tree's
        # expand/collapse: enter and the mouse still expand nodes.
        Binding(
            "space",
            "toggle_preserve",
            "Preserve",
            tooltip="Add/remove the selected attribute to preserved_attrs",
        ),
    ]

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
        view: AttrView | None

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__("model", id=id)
        self.show_root = True
        self.guide_depth = 2
        self._views: list[AttrView] = []
        self._model_name = "model"
        # What _rebuild laid out: a module's children (path, data, is a module), each
        # path's module, the nodes made so far and the modules whose children are made.
        self._module_children: Rows = {}
        self._parent_of: dict[str, str] = {}
        self._made: dict[str, TreeNode[AttrView | str]] = {}
        self._populated: set[str] = set()

    @property
    def views(self) -> list[AttrView]:
        """The attributes shown (all of them, before filtering)."""
        return self._views

    def view_of(self, path: str) -> AttrView | None:
        """The attribute at ``path``."""
        return next((v for v in self._views if v.path == path), None)

    def show(self, name: str, views: Sequence[AttrView]) -> None:
        """Show ``views`` (the model's attributes and verdicts) under ``status_filter``.

        A new explanation of the same model that shows the same rows (a toggle changes
        a few statuses of thousands) relabels the rows whose verdict changed, in place:
        building a 2,048-block stack's 8k rows again took 0.36 s of the event loop, and
        left them all behind as garbage for the screen's deep collection.
        """
        same_model = name == self._model_name and bool(self._made)
        self._model_name = name
        self._views = list(views)
        children, parent_of = self._layout()
        if (
            same_model
            and parent_of == self._parent_of
            and _shape(children) == _shape(self._module_children)
        ):
            self._module_children = children
            self._relabel(children)
            self.root.set_label(self._header())
            return
        self._rebuild(children, parent_of)

    def get_label_width(self, node: TreeNode[AttrView | str]) -> int:
        """The width ``render_label`` gives ``node``'s label, without drawing it.

        Textual measures every line's label each time the tree's lines are laid out
        again (a new explanation, a node expanded), by drawing it: 0.5 s for the 8k lines
        of a 2,048-block stack, on the event loop. Textual offers this override for it.
        """
        label = node.label
        width = label.cell_len if isinstance(label, Text) else cell_len(str(label))
        if node.allow_expand:
            icon = self.ICON_NODE_EXPANDED if node.is_expanded else self.ICON_NODE
            width += cell_len(icon)
        return width

    def on_resize(self) -> None:
        if self._views:
            self.root.set_label(self._header())  # what fits depends on the width

    def watch_status_filter(self, value: str) -> None:
        if self._views:
            self._rebuild(*self._layout())

    def cycle_filter(self) -> None:
        """The next status filter (all → inlined → kept → dropped → all)."""
        self.status_filter = FILTERS[(FILTERS.index(self.status_filter) + 1) % len(FILTERS)]
        self.post_message(Status(f"model tree shows: {self.status_filter}"))

    def action_toggle_preserve(self) -> None:
        """Add the selected attribute to ``preserved_attrs``, or remove it."""
        path = self.selected_path
        if not path:
            self.notify("select an attribute or module in the model tree first", timeout=3)
            return
        self.post_message(self.PreserveToggled(path))

    def on_tree_node_highlighted(self, event: Tree.NodeHighlighted[Any]) -> None:
        self.post_message(self.AttributeSelected(self.selected_path, self.selected_view))

    def _let_go_of_nodes(self) -> None:
        """The rows about to be replaced, freed as soon as nothing else holds them.

        Textual's nodes hold their children and their children them: dropped, they
        are reference cycles, which the screen's collector frees only in a deep sweep
        once frozen (ui/collector.py); each explanation (``space``) left the whole tree
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

    def _layout(self) -> tuple[Rows, dict[str, str]]:
        """The rows ``status_filter`` shows: each module's children (path, data, whether
        a module) in order, and each row's parent."""
        status_filter = self.status_filter
        # Every module carries `training` and a hook placeholder; hundreds of those rows
        # would hide what matters, so they show only when kept (as in `freezeview explain`).
        shown = [
            v
            for v in self._views
            if status_filter in ("all", v.status)
            and (v.path.rsplit(".", 1)[-1] not in HOUSEKEEPING or v.status == "kept")
        ]
        shown_ids = {id(v) for v in shown}
        # Module nodes first (submodules carry verdicts too), then their attributes.
        wanted = set()
        for v in shown:
            parts = v.path.split(".")
            for i in range(1, len(parts)):
                wanted.add(".".join(parts[:i]))
        children: Rows = {}
        parent_of: dict[str, str] = {}
        modules = {""}

        def place(path: str, owner: str, data: AttrView | str, module: bool) -> None:
            parent = owner if owner in modules else ""
            children.setdefault(parent, []).append((path, data, module))
            parent_of[path] = parent
            if module:
                modules.add(path)

        for v in self._views:
            if v.kind == "submodule" and (v.path in wanted or id(v) in shown_ids):
                place(v.path, v.owner, v, True)
        for path in sorted(wanted - modules):
            place(path, path.rsplit(".", 1)[0] if "." in path else "", path, True)
        for v in shown:
            if v.kind != "submodule":
                place(v.path, v.owner, v, False)
        return children, parent_of

    def _rebuild(
        self,
        children: Rows,
        parent_of: dict[str, str],
    ) -> None:
        """Rebuild the tree from :meth:`_layout`'s rows, keeping the cursor on the same
        path when it still exists.

        Only the nodes that show are made: the root's children and the top-level
        modules' (expanded), then a module's children when it is first expanded. An
        L48 encoder has tens of thousands of attributes; making them all took 0.4 s of
        the event loop at every explanation (each preserved-attribute toggle).
        """
        selected = self.selected_path
        self._let_go_of_nodes()
        self.clear()
        self.root.set_label(self._header())
        self.root.data = ""
        self._module_children = children
        self._parent_of = parent_of
        self._made = {"": self.root}
        self._populated = set()
        self._populate("")
        self.root.expand()
        if selected and selected in parent_of:
            cursor_node = self._reveal(selected)
            # Line numbers exist only after the tree re-renders its expanded nodes.
            self.call_after_refresh(self.move_cursor, cursor_node)

    def _relabel(self, children: Rows) -> None:
        """Give the rows made so far their new verdicts; only a row whose label reads
        differently is drawn again."""
        made = self._made
        for rows in children.values():
            for path, data, _module in rows:
                node = made.get(path)
                if node is None or node.data is data:
                    continue
                before = node.data
                node.data = data
                if isinstance(data, AttrView):
                    if not isinstance(before, AttrView) or _label_facts(before) != _label_facts(
                        data
                    ):
                        node.set_label(self._label(data))
                elif isinstance(before, AttrView):  # a module shown by its name alone now
                    node.set_label(path.rsplit(".", 1)[-1])

    def _populate(self, path: str) -> None:
        """Make the nodes of module ``path``'s children (once); the top-level modules
        are expanded, so theirs too."""
        if path in self._populated:
            return
        self._populated.add(path)
        node = self._made[path]
        for child, data, module in self._module_children.get(path, ()):
            if not module:
                assert isinstance(data, AttrView)
                self._made[child] = node.add_leaf(self._label(data), data=data)
                continue
            label = self._label(data) if isinstance(data, AttrView) else child.rsplit(".", 1)[-1]
            top = isinstance(data, AttrView) and child.count(".") < 1
            self._made[child] = node.add(label, data=data, expand=top)
            if top:
                self._populate(child)

    def on_tree_node_expanded(self, event: Tree.NodeExpanded[Any]) -> None:
        data = event.node.data
        path = data.path if isinstance(data, AttrView) else data
        if isinstance(path, str) and path in self._made and path not in self._populated:
            self._populate(path)

    def _reveal(self, path: str) -> TreeNode[AttrView | str]:
        """The node of ``path`` (shown: its modules made and expanded)."""
        chain = [path]
        while chain[-1]:
            chain.append(self._parent_of[chain[-1]])
        for module in reversed(chain[1:]):
            self._populate(module)
            self._made[module].expand()
        return self._made[path]

    def _header(self) -> Text:
        """The root's label: the model's name and the counts, as much as fits the pane.

        The counts always show in full (the title bar names the model too): the name
        goes first, then the double spaces, then the filter note's words, then the note.
        """
        # Room for the label: the pane less the root's "▼ " (40 at 160 columns).
        room = (self.scrollable_content_region.width or 42) - 2
        for with_name, gap, showing in (
            (True, "  ", "showing "),
            (False, "  ", "showing "),
            (False, " ", "showing "),
            (False, " ", ""),
            (False, " ", None),
        ):
            label = Text.assemble((self._model_name, "bold"), "  ") if with_name else Text()
            label.append_text(self._summary(gap, showing))
            if label.cell_len <= room:
                break
        return label

    def _summary(self, gap: str = "  ", showing: str | None = "showing ") -> Text:
        # The same counts as `freezeview explain`'s summary line: every attribute path.
        counts = {s: 0 for s in ("inlined", "kept", "dropped")}
        for v in self._views:
            counts[v.status] = counts.get(v.status, 0) + 1
        text = Text()
        for status, n in counts.items():
            if len(text):
                text.append(gap)
            text.append(f"{n} {status}", STATUS_STYLES[status] if status != "kept" else "yellow")
        if self.status_filter != "all" and showing is not None:
            text.append(f"{gap}({showing}{self.status_filter})", "italic")
        return text

    @staticmethod
    def _label(v: AttrView) -> Text:
        return _label_text(*_label_facts(v))

    @property
    def selected_path(self) -> str | None:
        """Path of the attribute or module under the cursor."""
        node = self.cursor_node
        if node is None or node.data is None:
            return None
        if isinstance(node.data, AttrView):
            return node.data.path
        return node.data or None

    @property
    def selected_view(self) -> AttrView | None:
        """The attribute under the cursor (None on a plain module or the root)."""
        node = self.cursor_node
        if node is not None and isinstance(node.data, AttrView):
            return node.data
        path = self.selected_path
        return self.view_of(path) if path else None

    def select_path(self, path: str) -> bool:
        """Move the cursor to ``path``; False if it is not shown."""
        if path not in getattr(self, "_parent_of", {}):
            return False
        node = self._reveal(path)
        self.call_after_refresh(self.move_cursor, node)
        return True


def _shape(
    children: Rows,
) -> dict[str, list[tuple[str, bool]]]:
    """The rows without their verdicts: which path under which module, in what order."""
    return {
        parent: [(path, module) for path, _, module in rows] for parent, rows in children.items()
    }


def _label_facts(v: AttrView) -> tuple[bool, str, str, str, str | None, str]:
    """What a row's label shows of ``v``: equal facts, the same label."""
    kept_reason = v.reasons[0].code if v.status == "kept" and v.reasons else None
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
    if kept_reason:
        text.append(f" {kept_reason}", "yellow")
    short = {"parameter": "param", "buffer": "buffer", "attribute": "attr"}.get(kind)
    if short:
        text.append(f"  {short}", "dim")
    if value:
        text.append(f" {value}", "cyan")  # an enum member, by name
    return text
