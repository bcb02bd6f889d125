"""The help screen (``?``): every key with what it does, generated from the bindings."""

from __future__ import annotations

from collections.abc import Iterable

from rich.console import Group
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import VerticalScroll
from textual.screen import ModalScreen
from textual.widgets import Static

__all__ = ["HelpScreen", "bindings_table", "help_sections", "sections_table"]

_INTRO = (
    "freezeview shows what torch.jit.freeze does to this model. The tree on the left "
    "says, for every attribute, whether freezing inlines it as a constant, keeps it or "
    "drops it, and why. The IR pane shows the graph at the current step; the steps bar "
    "lists the passes (checkboxes) and the steps of the last run."
)
_PANES = (
    "Moving between panes: tab and shift+tab move the focus from pane to pane (model "
    "tree, IR, inspector, the passes and the steps' timeline), and a click focuses the "
    "pane clicked; the focused pane has a bright border, and arrows, enter and the "
    "mouse wheel move in it. Under 120 columns one pane shows at a time: w or the tabs "
    "at the top switch panes."
)
#: The sections of the keys table: (title, which bindings).
Section = tuple[str, list[Binding]]


def bindings_table(bindings: Iterable[Binding]) -> Table:
    """A two-column table: key, description and tooltip."""
    table = Table(box=None, padding=(0, 2), show_header=True, header_style="bold")
    table.add_column("key", style="bold cyan", no_wrap=True)
    table.add_column("action")
    table.add_column("what it does", style="dim")
    for b in bindings:
        table.add_row(b.key_display or b.key, b.description, b.tooltip)
    return table


def help_sections(bindings: Iterable[Binding]) -> list[Section]:
    """``bindings`` in sections: the keys that work everywhere, and the graph view's own
    (some letters mean something else there: they win while the graph has the focus)."""
    from ..widgets.graph_canvas_view import GraphCanvasView
    from ..widgets.graph_view import GraphView

    graph = {id(b) for b in (*GraphView.BINDINGS, *GraphCanvasView.BINDINGS)}
    listed = list(bindings)
    return [
        ("Everywhere", [b for b in listed if id(b) not in graph]),
        (
            "In the graph view (v shows it; while it has the focus these keys win over "
            "the ones above with the same letter)",
            [b for b in listed if id(b) in graph],
        ),
    ]


def sections_table(sections: Iterable[Section]) -> Group:
    """Each section's title and its keys table."""
    parts: list[Text | Table] = []
    for title, keys in sections:
        if not keys:
            continue
        if parts:
            parts.append(Text(""))
        parts.append(Text(title, style="bold underline"))
        parts.append(bindings_table(keys))
    return Group(*parts)


class HelpScreen(ModalScreen[None]):
    """Lists every key of the main screen; escape, ? or q closes it."""

    BINDINGS = [
        Binding("escape,question_mark,q", "dismiss", "Close help", tooltip="Back to the model"),
    ]

    def __init__(self, bindings: list[Binding], warnings: Iterable[str] = ()) -> None:
        super().__init__()
        self._warnings = list(warnings)
        self._keys = bindings
        #: The keys tables shown, by section (tests read it).
        self.table = sections_table(help_sections(bindings))

    def compose(self) -> ComposeResult:
        with VerticalScroll(id="help-box"):
            yield Static(Text("freezeview — keys", style="bold"), id="help-title")
            yield Static(Text(_INTRO), id="help-intro")
            yield Static(Text(_PANES), id="help-panes")
            yield Static(self.table, id="help-keys")
            if self._warnings:
                # torch's own warnings (deprecations on freeze, jit.load...) are kept
                # here as information instead of being printed over the screen.
                yield Static(
                    Text("torch warned: " + " | ".join(self._warnings), style="dim"),
                    id="help-warnings",
                )
            yield Static(
                Text(
                    "Ctrl+P opens the command palette with the same commands. "
                    "Esc closes this screen.",
                    style="italic",
                )
            )
