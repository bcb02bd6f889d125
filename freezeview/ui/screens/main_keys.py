"""The main screen's keys: each a Binding whose action the screen routes to a widget.

Listed here, in footer order, so the footer, the help screen (``?``) and the command
palette all read one table. The widgets' own keys (the graph view's pan and zoom, the
tree's ``space``) live on those widgets.
"""

from __future__ import annotations

from textual.binding import Binding, BindingType

__all__ = ["MAIN_KEYS"]

MAIN_KEYS: list[BindingType] = [
    # First, so a narrow footer still shows it (it only appears when narrow).
    Binding("w", "next_pane", "Pane", tooltip="Narrow terminals: show the next pane (tabs)"),
    Binding("n", "next_step", "Next", tooltip="Show the next freezing step"),
    Binding("p", "previous_step", "Prev", tooltip="Show the previous freezing step"),
    Binding("r", "rerun", "Re-run", tooltip="Run freezing again from the start with the plan"),
    Binding(
        "space",
        "toggle_preserve",
        "Preserve",
        tooltip="Add/remove the selected attribute to preserved_attrs (explanation updates)",
    ),
    Binding("t", "toggle_pass", "Pass", tooltip="Switch the highlighted pass on or off"),
    Binding("d", "cycle_view", "IR/code/diff", tooltip="Show the IR, the .code or the step's diff"),
    Binding(
        "f", "cycle_filter", "Filter", tooltip="Show all / inlined / kept / dropped attributes"
    ),
    Binding(
        "v",
        "graph_view",
        "Graph",
        tooltip="Show (or hide) the current step's graph or diff, drawn in the terminal",
    ),
    Binding("g", "render", "SVG", tooltip="Render the current step's graph and diff to SVG"),
    Binding("e", "export", "Export", tooltip="Write everything `freezeview export` writes"),
    Binding(
        "m",
        "migrate",
        "Migrate",
        tooltip="Will it survive torch.export? Convert to an ExportedProgram (.pt2) and "
        "check it behaves the same (freezeview migrate)",
    ),
    Binding(
        "o",
        "open_output",
        "Open",
        tooltip="Open the last picture (g) or review page (e) in the local browser",
    ),
    Binding("slash", "search", "Search", key_display="/", tooltip="Search the IR pane"),
    Binding(
        "ctrl+f",
        "find_attribute",
        "Find attr",
        key_display="^f",
        tooltip="Find an attribute in the model tree by part of its dotted path (enter: next)",
    ),
    Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
]
