"""The Steps bar: passes with checkboxes and the timeline of steps.

The bar owns which step is shown (``current_step``, moved by ``n``/``p``, the timeline's
enter or click, and a step arriving that ``n`` waited for), whether a run is going on
and whether the plan changed since. It says what happened by messages: a step was
selected (:class:`StepsBar.StepSelected`: the IR pane, and any other view of a step,
follows it), a pass was switched (:class:`StepsBar.PassToggled`), the checked passes
changed (:class:`StepsBar.PassesChanged`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from rich.segment import Segment
from rich.text import Text
from textual import events, on
from textual.app import ComposeResult
from textual.containers import Horizontal, Vertical
from textual.message import Message
from textual.reactive import var
from textual.strip import Strip
from textual.widgets import DataTable, Label, SelectionList
from textual.widgets.selection_list import Selection

from ...session import PassSummary, StepSummary
from ..messages import Status

__all__ = ["PassList", "StepsBar", "notes_cell", "numerics_cell", "pending_row", "step_row"]

COLUMNS = ("#", "step", "+added", "-removed", "~changed", "numerics", "time")
#: Characters of a step's note the timeline's last column shows (the inspector shows it
#: whole when the row is selected).
NOTE_WIDTH = 100


def notes_cell(step: StepSummary) -> Text:
    """The timeline's notes cell: what the step did or why it did not fire, as
    ``freezeview freeze``'s notes column says it (cut at :data:`NOTE_WIDTH`)."""
    text = step.notes
    if len(text) > NOTE_WIDTH:
        text = text[: NOTE_WIDTH - 1] + "…"
    return Text(text or "-", "red" if step.error else ("" if step.changed else "dim"))


def numerics_cell(step: StepSummary) -> Text:
    """The step's largest output difference; ``→`` after it when the step moved the
    numbers and the node where they first move is named (enter on the row goes there)."""
    if not step.numerics:
        return Text("-", "dim")
    cell = Text(step.numerics)
    if step.moved_node is not None:
        cell.append(" →", "bold red")
    return cell


def step_row(step: StepSummary, timings: bool = True, latency: bool = False) -> tuple[Text, ...]:
    """The timeline row for a step (``timings=False`` hides wall times, for snapshots).

    With ``latency`` the row ends with the step's forward latency against the unfrozen
    module (the column exists only when the run times forwards: sample inputs given).
    """
    style = "" if step.changed else "dim"
    if step.error:
        style = "bold red"
    name = Text(step.title, style)  # freezeview freeze's title: one name per step
    if step.error:
        name.append(" ✗", "bold red")
    elif not step.changed:
        name.append(" (no change)", "dim")
    cells = (
        Text(str(step.index), style),
        name,
        Text(f"+{step.added}", "green" if step.added else "dim"),
        Text(f"-{step.removed}", "red" if step.removed else "dim"),
        Text(f"~{step.changed_nodes}", "yellow" if step.changed_nodes else "dim"),
        numerics_cell(step),
        Text(f"{step.seconds * 1000:.0f} ms" if timings else "", "dim"),
    )
    if not latency:
        return cells
    shown = step.latency if timings else ("timed" if step.latency else "")
    return (*cells, Text(shown or "-", "" if step.latency and "same" not in shown else "dim"))


class PassList(SelectionList[str]):
    """The pass checkboxes: a checked box shows ``X``, an unchecked one is empty, so
    the two differ by more than colour (Textual's draws ``X`` in both)."""

    def render_line(self, y: int) -> Strip:
        line = super().render_line(y)
        segments = list(line)
        _, scroll_y = self.scroll_offset
        index = scroll_y + y
        # Textual's box: left side, "X", right side, then the prompt.
        if len(segments) < 3 or segments[1].text != "X":
            return line
        if not 0 <= index < self.option_count:
            return line
        checked = self.get_option_at_index(index).value in self._selected
        inner = segments[1]
        segments[1] = Segment("X" if checked else " ", inner.style, inner.control)
        return Strip(segments, line.cell_length)


def pending_row(index: str, latency: bool = False) -> tuple[Text, ...]:
    """The timeline row of step ``index`` while a re-run computes it (the last run's),
    with an empty latency cell when the timeline has that column, and an empty notes
    cell."""
    blank = len(COLUMNS) - 1 + (1 if latency else 0)
    return (Text(index, "dim"), Text("…", "dim"), *(Text("") for _ in range(blank)))


class StepsBar(Horizontal):
    """Pass checkboxes (left) and the step timeline (right)."""

    # Drawn by the widgets their watchers update (the timeline's cursor, the title), not
    # by the bar: as reactives they repainted the whole bar at every change.
    #: The step shown, as a row of the timeline (-1: none yet, the loaded model).
    current_step: var[int] = var(-1, init=False)
    #: True while a run is computing steps (the title says so; ``n`` waits for them).
    running: var[bool] = var(False, init=False)
    #: True when the plan changed since the steps were computed (the title asks for r).
    stale: var[bool] = var(False, init=False)

    @dataclass
    class StepSelected(Message):
        """Step ``index`` of the run is the one to show (-1: the loaded model)."""

        index: int

    @dataclass
    class StepInspected(Message):
        """The user went to step ``index`` (``n``, ``p``, the timeline's enter, click or
        cursor): the inspector says what the step did, or why it did not fire."""

        index: int

    @dataclass
    class StepEntered(Message):
        """The user pressed enter on (or clicked) step ``index``'s row: a step whose
        numerics cell names a node goes to it."""

        index: int

    @dataclass
    class PassToggled(Message):
        """The user switched pass ``pass_id`` on or off."""

        pass_id: str
        on: bool

    @dataclass
    class PassesChanged(Message):
        """The checked passes changed (``enabled``, in the order they run)."""

        enabled: list[str]

    def __init__(self, *, id: str | None = None) -> None:
        super().__init__(id=id)
        # Presses of n while the next step is still being computed.
        self._pending_next = 0
        # The run's latency verdict (from the last step that carried one).
        self._verdict = ""
        # Steps of the current run in the timeline; the rows after them are the last
        # run's, pending (clear_steps).
        self._arrived = 0
        # Whether the title showed the verdict when last updated.
        self._verdict_shown = False

    def compose(self) -> ComposeResult:
        with Vertical(id="passes-box"):
            yield Label("passes", classes="pane-title")
            yield PassList(id="passes")
        with Vertical(id="timeline-box"):
            yield Label("steps", id="timeline-title", classes="pane-title")
            table: DataTable[Text] = DataTable(
                id="timeline", cursor_type="row", zebra_stripes=False
            )
            yield table

    def on_mount(self) -> None:
        table = self.timeline
        for col in COLUMNS:
            table.add_column(col, key=col)
        # Last, where the timeline has room for it (it scrolls sideways when narrow).
        table.add_column("notes", key="notes")

    @property
    def passes(self) -> SelectionList[str]:
        """The pass checkboxes."""
        return self.query_one("#passes", SelectionList)

    @property
    def timeline(self) -> DataTable[Text]:
        """The step table."""
        return self.query_one("#timeline", DataTable)

    @property
    def step_count(self) -> int:
        """Steps of the current run in the timeline (the pending rows after them not)."""
        return self._arrived

    # -- passes ----------------------------------------------------------------------
    def set_passes(self, passes: Sequence[PassSummary], enabled: Sequence[str]) -> None:
        """Fill the pass list."""
        lst = self.passes
        lst.clear_options()
        lst.add_options(
            [
                Selection(f"{p.id}  [dim]{p.description}[/]", p.id, p.id in enabled, id=p.id)
                for p in passes
            ]
        )

    def enabled_passes(self) -> list[str]:
        """Pass ids checked, in the list's order (the order they run in)."""
        # Not SelectionList.selected: that is in the order the boxes were checked, and a
        # pass switched off and on again would move to the end of the run.
        lst = self.passes
        selected = set(lst.selected)
        values = (lst.get_option_at_index(i).value for i in range(lst.option_count))
        return [str(v) for v in values if v in selected]

    def toggle_pass(self) -> None:
        """Switch the highlighted pass (the first one if none is) on or off."""
        lst = self.passes
        if lst.option_count == 0:
            return
        index = lst.highlighted if lst.highlighted is not None else 0
        option = lst.get_option_at_index(index)
        pass_id = option.id if option.id is not None else str(index)
        lst.toggle(pass_id)
        self.post_message(self.PassToggled(pass_id, pass_id in lst.selected))

    @on(SelectionList.SelectedChanged, "#passes")
    def _passes_changed(self, event: SelectionList.SelectedChanged[str]) -> None:
        self.post_message(self.PassesChanged(self.enabled_passes()))

    # -- steps -----------------------------------------------------------------------
    def clear_steps(self) -> None:
        """Before a re-run: the last run's rows stay, as pending rows, until the new
        run's steps take their places; those left over go when it finishes.

        Emptying the table changed its size, and Textual lays out and draws the whole
        screen again for any widget whose size changes, on the ``r`` key, while the user
        waits for the run. A run with the same plan has as many steps: nothing changes
        size.
        """
        self._pending_next = 0
        self._verdict = ""
        self._arrived = 0
        table = self.timeline
        # The latency column stays: the session's sample inputs time every run alike.
        latency = "latency" in table.columns
        for row in table.ordered_rows:
            cells = pending_row(row.key.value or "", latency)
            for column, cell in zip(table.ordered_columns, cells, strict=True):
                table.update_cell(row.key, column.key, cell)
        self.current_step = -1
        self.update_title()

    def add_step(self, step: StepSummary, timings: bool = True) -> None:
        """Put a step in the timeline (in its pending row, or a new one); show it if it
        is the first, or if ``n`` was pressed for it before it arrived."""
        table = self.timeline
        if step.latency and "latency" not in table.columns:
            # The first timed step: the run has sample inputs; earlier rows show "-".
            # The notes stay the last column (the widest, cut by a narrow pane).
            notes = {row.key: table.get_cell(row.key, "notes") for row in table.ordered_rows}
            table.remove_column("notes")
            table.add_column("latency", key="latency", default=Text("-", "dim"))
            table.add_column("notes", key="notes", default=Text(""))
            for row_key, cell in notes.items():
                table.update_cell(row_key, "notes", cell)
        row = (*step_row(step, timings, latency="latency" in table.columns), notes_cell(step))
        if step.verdict:
            self._verdict = step.verdict
        # DataTable measures new cells on its next idle, but a frame painted before that
        # is cached with the old column widths and the step names stay cut off (steps
        # arrive in bursts from the engine process). Widening the columns first avoids it.
        wider = []
        for column, cell in zip(table.ordered_columns, row, strict=True):
            wider.append(cell.cell_len > column.content_width)
            column.content_width = max(column.content_width, cell.cell_len)
        key = str(step.index)
        if key in table.rows:
            for column, cell, widen in zip(table.ordered_columns, row, wider, strict=True):
                table.update_cell(key, column.key, cell, update_width=widen)
        else:
            table.add_row(*row, key=key)
        self._arrived += 1
        if self.current_step < 0:
            self.current_step = 0
        elif self._pending_next and self.current_step == self._arrived - 2:
            self._pending_next -= 1
            self.current_step += 1
        else:
            self.update_title()

    def finish(self) -> None:
        """The run is over: no more steps will arrive for ``n`` to wait for, and the
        last run's rows no step took go."""
        self._pending_next = 0
        table = self.timeline
        for row in table.ordered_rows[self._arrived :]:
            table.remove_row(row.key)
        self.running = False
        self.update_title()

    def next_step(self) -> None:
        """Show the next step (waits for it if it is still being computed)."""
        if self.current_step + 1 < self.step_count:
            self.current_step += 1
            self.post_message(self.StepInspected(self.current_step))
        elif self.running:
            self._pending_next = 1
            self.post_message(Status("next step still running; it will show when ready"))
        else:
            self.notify("this is the last step", timeout=2)

    def previous_step(self) -> None:
        """Show the previous step."""
        self._pending_next = 0
        if self.current_step > 0:
            self.current_step -= 1
            self.post_message(self.StepInspected(self.current_step))
        else:
            self.notify("this is the first step", timeout=2)

    def watch_current_step(self, old: int, new: int) -> None:
        self.post_message(self.StepSelected(new))
        if 0 <= new < self.step_count:
            self.timeline.move_cursor(row=new, animate=False)

    @on(DataTable.RowSelected, "#timeline")
    def _timeline_selected(self, event: DataTable.RowSelected) -> None:
        if event.cursor_row != self.current_step and 0 <= event.cursor_row < self.step_count:
            self.current_step = event.cursor_row
        if 0 <= event.cursor_row < self.step_count:
            self.post_message(self.StepInspected(event.cursor_row))
            self.post_message(self.StepEntered(event.cursor_row))

    @on(events.DescendantBlur)
    def _timeline_left(self, event: events.DescendantBlur) -> None:
        # Left with the cursor on a row not selected (looked at, not shown): the cursor
        # goes back to the step shown, the one the headers name.
        step = self.current_step
        if event.widget is self.timeline and 0 <= step < self.step_count:
            self.timeline.move_cursor(row=step, animate=False)

    @on(DataTable.RowHighlighted, "#timeline")
    def _timeline_highlighted(self, event: DataTable.RowHighlighted) -> None:
        # The user's cursor in the timeline (not the cursor the bar moves for n and p).
        if self.timeline.has_focus and 0 <= event.cursor_row < self.step_count:
            self.post_message(self.StepInspected(event.cursor_row))

    # -- title -----------------------------------------------------------------------
    def watch_running(self, value: bool) -> None:
        self.update_title()

    def watch_stale(self, value: bool) -> None:
        self.set_class(value, "-stale")
        self.update_title()

    def update_title(self) -> None:
        """The timeline's title: how many steps, running, plan changed."""
        status = Text("steps ")
        if self.running:
            status.append("running…", "bold yellow")
        else:
            status.append(f"{self.step_count}", "bold")
        if self.stale:
            status.append("  plan changed: press r to re-run", "bold black on yellow")
        elif self._verdict and not self.running:
            status.append(f"  {self._verdict}", "bold")
        # The verdict wraps onto as many lines as the pane's width needs (a title laid
        # out for one line cut it at the pane's edge): the title is laid out again when
        # it shows the verdict or stops showing it, and only then (a layout repaints the
        # bar).
        verdict = self._verdict in status.plain if self._verdict else False
        relayout = verdict or self._verdict_shown
        self._verdict_shown = verdict
        self.query_one("#timeline-title", Label).update(status, layout=relayout)
