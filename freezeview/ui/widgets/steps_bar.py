"""The Steps bar: passes with checkboxes and the timeline of steps."""

from __future__ import annotations

from collections.abc import Sequence

from rich.text import Text
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.widgets import DataTable, Label, SelectionList
from textual.widgets.selection_list import Selection

from ..views import PassView, StepView

__all__ = ["StepsBar", "step_row"]

COLUMNS = ("#", "step", "+added", "-removed", "~changed", "numerics", "time")


def step_row(step: StepView, timings: bool = True) -> tuple[Text, ...]:
    """The timeline row for a step (``timings=False`` hides wall times, for snapshots)."""
    style = "" if step.changed else "dim"
    if step.error:
        style = "bold red"
    name = Text(step.name, style)
    if step.error:
        name.append(" ✗", "bold red")
    elif not step.changed:
        name.append(" (no change)", "dim")
    return (
        Text(str(step.index), style),
        name,
        Text(f"+{step.added}", "green" if step.added else "dim"),
        Text(f"-{step.removed}", "red" if step.removed else "dim"),
        Text(f"~{step.changed_nodes}", "yellow" if step.changed_nodes else "dim"),
        Text(step.numerics or "-", "dim" if not step.numerics else ""),
        Text(f"{step.seconds * 1000:.0f} ms" if timings else "", "dim"),
    )


class StepsBar(Horizontal):
    """Pass checkboxes (left) and the step timeline (right)."""

    def compose(self) -> ComposeResult:
        with Vertical(id="passes-box"):
            yield Label("passes", classes="pane-title")
            yield SelectionList[str](id="passes")
        with Vertical(id="timeline-box"):
            yield Label("steps", id="timeline-title", classes="pane-title")
            table: DataTable[Text] = DataTable(
                id="timeline", cursor_type="row", zebra_stripes=False
            )
            yield table

    def on_mount(self) -> None:
        table = self.query_one("#timeline", DataTable)
        for col in COLUMNS:
            table.add_column(col, key=col)

    @property
    def passes(self) -> SelectionList[str]:
        """The pass checkboxes."""
        return self.query_one("#passes", SelectionList)

    @property
    def timeline(self) -> DataTable[Text]:
        """The step table."""
        return self.query_one("#timeline", DataTable)

    def set_passes(self, passes: Sequence[PassView], enabled: Sequence[str]) -> None:
        """Fill the pass list."""
        lst = self.passes
        lst.clear_options()
        lst.add_options(
            [
                Selection(f"{p.id}  [dim]{p.description}[/]", p.id, p.id in enabled, id=p.id)
                for p in passes
            ]
        )

    def clear_steps(self) -> None:
        """Empty the timeline (before a re-run)."""
        self.timeline.clear()

    def add_step(self, step: StepView, timings: bool = True) -> None:
        """Append a step to the timeline."""
        table = self.timeline
        row = step_row(step, timings)
        # DataTable measures new rows on its next idle, but a frame painted before that
        # is cached with the old column widths and the step names stay cut off (steps
        # arrive in bursts from the engine process). Widening the columns first avoids it.
        for column, cell in zip(table.ordered_columns, row, strict=True):
            column.content_width = max(column.content_width, cell.cell_len)
        table.add_row(*row, key=str(step.index))

    def set_title(self, text: Text | str) -> None:
        """Text above the timeline (status, staleness)."""
        self.query_one("#timeline-title", Label).update(text, layout=False)
