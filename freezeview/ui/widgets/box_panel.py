"""What the inspector shows for a box of the graph view that has no IR line of its own:
a module box (its label, diff counts and what Enter does) or a removed op's ghost."""

from __future__ import annotations

from rich.table import Table
from rich.text import Text

from ...engine.draw.layout_values import BoxLayout

__all__ = ["box_panel"]


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
