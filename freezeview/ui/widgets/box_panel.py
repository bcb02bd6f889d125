"""What the inspector shows for a box of the graph view that has no IR line of its own:
a module box (its label, diff counts and what Enter does) or a removed op's ghost."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ...session import BoxLayout, node_facts
from .inspector import attribute_panel, node_panel

if TYPE_CHECKING:
    from ...session import AttrSummary, GraphSnapshot, Inventory

__all__ = ["box_panel", "selection_panel"]


def box_panel(box: BoxLayout) -> Table:
    """What the inspector shows for a module box or a box without an IR line."""
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold", no_wrap=True)
    table.add_column()
    kind = {"scope": "module box", "ghost": "removed op (ghost)"}.get(box.role, box.role)
    table.add_row("box", Text(kind, "bold green"))
    table.add_row("label", "\n".join(box.lines))
    if box.status != "same":
        table.add_row("diff", box.status)
    if box.kept:
        table.add_row("kept", Text("reads an attribute freezing kept", "bold magenta"))
    if box.tooltip:
        table.add_row("about", Text(box.tooltip[:600], "dim"))
    if box.role == "scope":
        table.add_row("", Text("Enter opens it down to its ops", "italic"))
    return table


def selection_panel(
    box: BoxLayout,
    snapshot: GraphSnapshot | None,
    node_id: int | None,
    summaries: Sequence[AttrSummary],
    inventory: Inventory | None,
) -> RenderableType:
    """What the inspector shows for a box selected in the graph view.

    A module box or a ghost: the box itself. An op: its IR node, then, when the node
    reads an attribute, that attribute's status and why.
    """
    if node_id is None or snapshot is None:
        return box_panel(box)
    facts = node_facts(snapshot, node_id)
    view = next((v for v in summaries if v.path == facts.attribute), None)
    if view is None:
        return node_panel(facts)
    info = inventory.by_path(view.path) if inventory else None
    return Group(node_panel(facts), "", attribute_panel(view, info))
