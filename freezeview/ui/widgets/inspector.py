"""The Inspector: facts about the selected attribute or the selected IR line."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from rich.console import Group, RenderableType
from rich.syntax import Syntax
from rich.table import Table
from rich.text import Text
from textual.app import ComposeResult
from textual.containers import VerticalScroll
from textual.widgets import Static

if TYPE_CHECKING:
    from ...session import NodeFacts, NodeTimes
from ...session import AttrSummary, StepSummary, change_word, format_time
from .model_tree import badge

__all__ = [
    "Inspector",
    "attribute_panel",
    "moved_panel",
    "node_panel",
    "shown_source",
    "step_panel",
    "time_panel",
    "with_time",
]


def _table() -> Table:
    table = Table.grid(padding=(0, 1))
    table.add_column(style="bold cyan", no_wrap=True)
    table.add_column(overflow="fold")
    return table


def attribute_panel(view: AttrSummary, info: Any = None, lines: int = 0) -> RenderableType:
    """What the inspector shows for an attribute.

    Args:
        view: the attribute and its verdict.
        info: the inventory's ``AttributeInfo`` (type, dtype, shape, readers, writers).
        lines: how many lines of the current IR read or write it.
    """
    table = _table()
    parts: list[RenderableType] = []
    if view.written_constant:
        parts += [_written_warning(view), Text("")]
    table.add_row("attribute", Text(view.path, "bold"))
    table.add_row(
        "status", Text.assemble(badge(view.status), "  preserved" if view.preserved else "")
    )
    table.add_row("kind", view.kind)
    table.add_row("type", view.type or (getattr(info, "type", "") if info else ""))
    if info is not None:
        if getattr(info, "dtype", None):
            shape = getattr(info, "shape", None)
            shape_text = "x".join(str(s) for s in shape) if shape else "scalar"
            table.add_row("tensor", f"{info.dtype}  [{shape_text}]  {getattr(info, 'device', '')}")
        elif getattr(info, "value", ""):
            table.add_row("value", str(info.value))
        if getattr(info, "readers", ()):
            table.add_row("read by", ", ".join(info.readers))
        if getattr(info, "writers", ()):
            table.add_row("written by", ", ".join(info.writers))
    table.add_row("in this IR", f"{lines} line(s) read or write it (marked)")
    parts.append(table)
    for reason in view.reasons:
        r = _table()
        r.add_row("reason", Text.assemble((reason.code, "bold yellow"), "  ", reason.message))
        if reason.node:
            r.add_row("node", Text(reason.node, "green"))
        if reason.source:
            r.add_row("source", reason.source)
        if reason.source_text:
            r.add_row("line", _python_line(reason.source_text))
        if reason.method:
            r.add_row("method", reason.method)
        parts.append(Text(""))
        parts.append(r)
    return Group(*parts)


def _written_warning(view: AttrSummary) -> RenderableType:
    """The inspector's first lines for a folded attribute the frozen graph still writes:
    what that does, each writing node with its source line, and where to read more."""
    from ...session import WRITTEN_HELP  # torch-free values

    table = _table()
    table.add_row(
        Text("⚠ warning", "bold white on red"),
        Text(
            "folded into the graph as a constant, yet the frozen graph still writes it: "
            "the frozen model mutates its own constant, its outputs can change from call "
            "to call, and a saved file holds whatever the constant held at save time",
            "bold red",
        ),
    )
    for reason in view.reasons:
        if reason.code == "written-constant":
            where = shown_source(reason.source) if reason.source else "no source line recorded"
            table.add_row("written at", Text.assemble((where, "bold"), f"  {reason.source_text}"))
    table.add_row("what to do", Text(WRITTEN_HELP, "dim"))
    return table


def _python_line(text: str) -> Syntax:
    """One source line, highlighted as the Python it was compiled from."""
    return Syntax(text, "python", theme="ansi_dark", background_color="default", word_wrap=True)


def shown_source(where: str) -> str:
    """A source position as the inspector shows it: library code by its package path.

    Inlined library calls (torch's ``functional.py``) carry the path of the environment
    torch was installed in; ``torch/nn/functional.py:2817`` says the same in a narrow
    pane, and the same on every machine.
    """
    _, found, inside = where.rpartition("/site-packages/")
    return inside if found else where


def node_panel(facts: NodeFacts) -> RenderableType:
    """What the inspector shows for an IR node: inputs, outputs, writes and aliases."""
    node = facts.node
    table = _table()
    table.add_row("node", Text(node.kind, "bold green"))
    if node.scope:
        table.add_row("module", node.scope)
    if node.source:
        table.add_row("source", f"{shown_source(str(node.source))}  {node.source.text}".strip())
    if facts.attribute:
        table.add_row("attribute", Text(facts.attribute, "bold"))
    if node.constant is not None:
        table.add_row("constant", node.constant.text)
    for named in facts.read_as:
        table.add_row("read as", named)
    for name, type_, src in facts.inputs:
        table.add_row("input", Text.assemble((f"%{name}", "cyan"), f" : {type_}  ← {src}"))
    for name, type_, users in facts.outputs:
        used = ", ".join(users) if users else "unused"
        table.add_row("output", Text.assemble((f"%{name}", "cyan"), f" : {type_}  → {used}"))
    if facts.writes:
        table.add_row("writes", Text(", ".join(f"%{n}" for n in facts.writes), "bold red"))
    for out, inp in facts.aliases:
        table.add_row("aliases", f"%{out} may alias %{inp}")
    for name, line in facts.writers:
        table.add_row("written by", Text.assemble((f"%{name}", "cyan"), "  ", (line, "red")))
    if not facts.writes and not facts.writers:
        table.add_row("mutation", Text("nothing writes these values", "dim"))
    if node.schema:
        table.add_row("schema", Text(node.schema, "dim"))
    return table


def step_panel(step: StepSummary) -> RenderableType:
    """What the inspector shows for a step of the timeline: what it did, or why it did
    not fire (the note ``freezeview freeze`` prints), with its counts and figures."""
    table = _table()
    table.add_row("step", Text.assemble((step.label, "bold"), (f"  {step.name}", "dim")))
    if step.error:
        table.add_row("result", Text("failed: the run stopped here", "bold red"))
    elif step.changed:
        table.add_row(
            "result",
            f"changed the graph: +{step.added} added, -{step.removed} removed, "
            f"~{step.changed_nodes} changed ({step.node_count} nodes after it)",
        )
    else:
        table.add_row("result", Text("no change: the graph is the one before it", "dim"))
    label = "error" if step.error else ("why not" if not step.changed else "notes")
    table.add_row(label, Text(step.notes or "-", "red" if step.error else ""))
    if step.numerics:
        table.add_row("numerics", f"{step.numerics} (largest output difference vs unfrozen)")
    if step.latency:
        table.add_row("latency", step.latency)
    if step.verdict:
        table.add_row("so far", step.verdict)
    moved = moved_panel(step)
    if moved is None:
        return table
    return Group(table, Text(""), moved)


def moved_panel(step: StepSummary) -> RenderableType | None:
    """Where ``step`` moved the numbers: the bisection's block, as ``freezeview freeze``
    prints it (None when the step was not bisected)."""
    if not step.moved:
        return None
    moved = _table()
    moved.add_row("numbers", Text(step.moved[0], "bold red"))
    for line in step.moved[1:]:
        moved.add_row("", line.strip())
    if step.moved_node is not None:
        moved.add_row("", Text("enter on this step: the node in the IR and the graph", "dim"))
    return moved


def time_panel(times: NodeTimes, node_ids: Sequence[int]) -> RenderableType | None:
    """The time of the nodes ``node_ids`` (an op, or a module box's ops together) in the
    step's profiled forward, against the same nodes in the unfrozen module; None when
    none of them was timed."""
    found = times.of(node_ids)
    if not found or times.total_ms <= 0:
        return None
    ms = sum(n.ms for n in found)
    table = _table()
    table.add_row(
        "time",
        Text.assemble(
            (format_time(ms), "bold"), f"  {100 * ms / times.total_ms:.1f} % of the forward"
        ),
    )
    if times.step is None:
        table.add_row("unfrozen", Text("this is the unfrozen module's forward", "dim"))
    elif all(n.unfrozen_ms is not None for n in found):
        before = sum(n.unfrozen_ms or 0.0 for n in found)
        noise = sum(n.spread + n.unfrozen_spread for n in found)
        word = change_word(before, ms, noise)
        change = f"{100 * (ms - before) / before:+.0f} %" if before > 0 else ""
        shown = "same (inside the noise)" if word == "same" else f"{word} {change}".strip()
        style = {"faster": "green", "slower": "red"}.get(word, "dim")
        table.add_row("unfrozen", Text.assemble(format_time(before), "  ", (shown, style)))
    else:
        table.add_row(
            "unfrozen", Text("no match in the unfrozen module (an op a pass made)", "dim")
        )
    table.add_row("timed by", Text(times.clock, "dim"))
    return table


def with_time(panel: RenderableType, *more: RenderableType | None) -> RenderableType:
    """``panel`` with what else there is to say of its node after it (its time, the
    numbers moving there), each when there is one."""
    parts = [panel]
    for part in more:
        if part is not None:
            parts += [Text(""), part]
    return parts[0] if len(parts) == 1 else Group(*parts)


class Inspector(VerticalScroll):
    """Scrollable panel showing one renderable."""

    def compose(self) -> ComposeResult:
        yield Static(
            Text("Select an attribute in the model tree or a line in the IR.", "dim"),
            id="inspector-body",
        )

    shown: RenderableType = ""

    def show(self, renderable: RenderableType) -> None:
        """Replace the panel's content."""
        self.shown = renderable
        self.query_one("#inspector-body", Static).update(renderable)
        self.scroll_home(animate=False)

    def plain_text(self, width: int = 120) -> str:
        """What the panel shows, as plain text (tests, screen readers)."""
        import io

        from rich.console import Console

        out = io.StringIO()
        Console(width=width, file=out, color_system=None).print(self.shown)
        return out.getvalue()

    @property
    def body(self) -> Static:
        """The static holding the content (tests read its renderable)."""
        return self.query_one("#inspector-body", Static)
