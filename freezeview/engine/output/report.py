"""Step and plan reports shared by the CLI and the app: JSON objects and rich tables.

``freezeview freeze --json`` prints one JSON object per line: one per step
(``"type": "step"``), then one ``"type": "result"``. The same dictionaries feed the
app's report export, so the CLI and the UI never disagree on what a step said.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import torch

from ..freeze import REGISTRY, Numerics, PassInfo, Plan, Step, default_passes, needs_guard
from ..measure import Measurement, format_ms, latency_cell, verdict_text

if TYPE_CHECKING:  # rich is imported by the tables only: `freeze --json` never draws one
    from rich.table import Table
    from rich.text import Text

__all__ = [
    "bytes_text",
    "measurement_lines",
    "numerics_text",
    "passes_json",
    "passes_table",
    "plan_json",
    "result_json",
    "step_json",
    "step_row",
    "steps_table",
]


def plan_json(plan: Plan) -> dict[str, Any]:
    """The plan as JSON, with the torch version it runs on."""
    data = plan.to_json()
    data["torch_version"] = torch.__version__
    return data


def step_json(step: Step, measurement: Measurement | None = None) -> dict[str, Any]:
    """One step as a JSON object (no graph text: use ``export`` for graphs).

    Args:
        step: the step.
        measurement: what the measure stage found so far; gives ``latency_ms`` (null
            when the step did not change the graph or nothing was timed) and
            ``constant_bytes`` (bytes of tensor constants in the step's graphs).
    """
    latency = measurement.steps.get(step.index) if measurement is not None else None
    data = {
        "type": "step",
        "index": step.index,
        "name": step.name,
        "title": step.title,
        "kind": step.kind,
        "round": step.round,
        "changed": step.changed,
        "nodes": step.node_count,
        "nodes_added": step.nodes_added,
        "nodes_removed": step.nodes_removed,
        "nodes_changed": step.nodes_changed,
        "seconds": round(step.seconds, 6),
        "notes": list(step.notes),
        "numerics": step.numerics.to_json() if step.numerics is not None else None,
        "error": step.error,
        "methods": sorted(step.snapshots),
        "folded": list(step.folded),
        "kept": list(step.kept),
        "latency_ms": latency.to_json() if latency is not None else None,
        "constant_bytes": (
            measurement.constant_bytes.get(step.index) if measurement is not None else None
        ),
    }
    return data


def result_json(
    steps: Sequence[Step],
    plan: Plan,
    *,
    model: str,
    output: str | None,
    warnings: Iterable[str] = (),
    measurement: Measurement | None = None,
) -> dict[str, Any]:
    """The closing JSON object of a run.

    With a finished ``measurement`` it has ``latency_ms`` (unfrozen and frozen medians,
    their ratio, the threads), ``portability`` and ``sizes``; each is null otherwise.
    """
    failed = next((s for s in steps if s.error), None)
    last = steps[-1] if steps else None
    return {
        "type": "result",
        "model": model,
        "output": output,
        "ok": failed is None,
        "error": failed.error if failed else None,
        "plan": plan_json(plan),
        "steps": len(steps),
        "changed_steps": sum(1 for s in steps if s.changed),
        "nodes": last.node_count if last else None,
        "seconds": round(sum(s.seconds for s in steps), 6),
        "warnings": list(warnings),
        "latency_ms": measurement.latency_json() if measurement is not None else None,
        "portability": (
            measurement.portability.to_json()
            if measurement is not None and measurement.portability is not None
            else None
        ),
        "sizes": (
            measurement.sizes.to_json()
            if measurement is not None and measurement.sizes is not None
            else None
        ),
        "second_call": (
            measurement.second_call.to_json()
            if measurement is not None and measurement.second_call is not None
            else None
        ),
    }


def numerics_text(numerics: Numerics | None) -> str:
    """``1.2e-07 / 3.4e-08`` (max abs / max rel), ``exact``, or ``not checked``."""
    if numerics is None:
        return "not checked"
    if numerics.note:
        return numerics.note
    if numerics.max_abs == 0.0:
        return "exact"
    return f"{numerics.max_abs:.2g} / {numerics.max_rel:.2g}"


def bytes_text(count: int | None) -> str:
    """``83.0 kB``, ``97.8 MB``, or ``-``."""
    if count is None:
        return "-"
    for unit, size in (("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if count >= size:
            return f"{count / size:.1f} {unit}"
    return f"{count} B"


def step_row(
    step: Step, *, show_numerics: bool = True, measurement: Measurement | None = None
) -> list[str | Text]:
    """One row of :func:`steps_table`: reads only what the row shows.

    The CLI takes each row as its step arrives, so the step's graphs can go before the
    next step runs. With a ``measurement`` the row has the constant bytes and a latency
    cell (the step's latency and its change against the unfrozen module), which
    :func:`steps_table` fills again when it draws the row.
    """
    from rich.text import Text

    if step.error:
        status = Text(step.title, style="bold red")
    elif step.changed:
        status = Text(step.title, style="bold")
    else:
        status = Text(step.title, style="dim")
    delta = (
        f"+{step.nodes_added}/-{step.nodes_removed}/~{step.nodes_changed}" if step.changed else "-"
    )
    # The first note only: the rest can cost more than the whole run (explain). Whole:
    # the column folds it on a terminal, and a file or pipe has no width to cut it to.
    notes = step.error or step.first_note
    row: list[str | Text] = [
        str(step.index),
        status,
        str(step.node_count) if step.node_count is not None else "-",
        delta,
        f"{step.seconds * 1000:.1f}",
    ]
    if show_numerics:
        row.append(numerics_text(step.numerics))
    if measurement is not None:
        row.append(bytes_text(measurement.constant_bytes.get(step.index)))
        # Always a cell (the column may come only with a later step's timing): the table
        # fills it when it is drawn, from the figures the verdict quotes.
        row.append(latency_cell(measurement, step.index))
    row.append(Text(notes, style="red" if step.error else ("" if step.changed else "dim")))
    return row


def steps_table(
    steps: Sequence[Step],
    *,
    show_numerics: bool = True,
    rows: Sequence[Sequence[str | Text]] | None = None,
    measurement: Measurement | None = None,
) -> Table:
    """A rich table of steps: what each did, in nodes, time and (if checked) numerics.

    Args:
        steps: the steps, in order.
        show_numerics: add the numerics column.
        rows: the rows, if already taken with :func:`step_row` (same ``show_numerics``,
            a ``measurement`` given to both or to neither), one per step.
        measurement: adds the constants column, and the latency column when timed. Its
            cells are read from ``measurement`` as it is now: after the run the unfrozen
            figure and the final step's are the interleaved pair the verdict quotes
            (:meth:`~freezeview.engine.measure.MeasuredRun.time_verdict`), and every
            row's change is against that one unfrozen figure.
    """
    from rich.table import Table

    table = Table(title=None, show_lines=False, header_style="bold")
    table.add_column("#", justify="right", style="dim")
    table.add_column("step")
    table.add_column("nodes", justify="right")
    table.add_column("+/-/~", justify="right")
    table.add_column("ms", justify="right")
    if show_numerics:
        table.add_column("max abs / rel diff", justify="right")
    if measurement is not None:
        table.add_column("constants", justify="right")
        if measurement.unfrozen is not None:
            table.add_column("latency vs unfrozen", justify="right")
    table.add_column("notes", overflow="fold")
    if rows is None:
        rows = [
            step_row(step, show_numerics=show_numerics, measurement=measurement) for step in steps
        ]
    # The latency cell sits before the notes: filled now, or gone when nothing was timed.
    at = 6 + int(show_numerics)
    for step, row in zip(steps, rows, strict=False):
        cells = list(row)
        if measurement is not None and len(cells) > at:
            if measurement.unfrozen is not None:
                cells[at] = latency_cell(measurement, step.index)
            else:
                del cells[at]
        table.add_row(*cells)
    return table


def measurement_lines(measurement: Measurement) -> list[str]:
    """What a run's measurement says in lines of text: latency, sizes, portability.

    The first line is the unfrozen baseline (how it was timed: threads, under
    ``inference_mode`` or with autograd), the second the verdict (how much faster or
    slower the frozen module is, and which steps did it), on the same figures as the
    steps table's latency column.
    """
    lines: list[str] = []
    u = measurement.unfrozen
    if u is not None:
        together = (
            ", in alternating blocks with the frozen forward" if measurement.interleaved else ""
        )
        lines.append(
            f"unfrozen forward: {format_ms(u.median)} median, {format_ms(u.min)} - "
            f"{format_ms(u.max)} over {u.runs} runs after {u.warmup} warm-up runs{together}; "
            f"{measurement.threads} thread{'s' if measurement.threads != 1 else ''}, "
            f"{measurement.timed_under()}, at most {measurement.budget:g} s of timing per step"
        )
        lines.append(verdict_text(measurement))
    for index, note in sorted(measurement.notes.items()):
        lines.append(f"step {index}: {note}")
    sizes = measurement.sizes
    if sizes is not None:
        text = (
            f"constants {bytes_text(sizes.constant_bytes)}"
            f" ({bytes_text(sizes.duplicate_constant_bytes)} duplicated),"
            f" kept attributes {bytes_text(sizes.kept_attribute_bytes)}"
        )
        if sizes.input_file_bytes is not None:
            text += f"; input file {bytes_text(sizes.input_file_bytes)}"
        if sizes.output_file_bytes is not None:
            text += f", frozen file {bytes_text(sizes.output_file_bytes)}"
            if sizes.input_file_bytes:
                text += f" ({sizes.output_file_bytes / sizes.input_file_bytes:.2f}x)"
        lines.append(text)
    port = measurement.portability
    if port is not None:
        if port.devices:
            text = f"portability: constants on {', '.join(port.devices)}"
            if port.dtypes:
                text += f" ({', '.join(port.dtypes)})"
        else:
            text = "portability: no tensor constants"
        if port.backend_only_nodes:
            kinds = ", ".join(f"{k} x{n}" for k, n in sorted(port.backend_only_nodes.items()))
            by = f" (from step {port.step})" if port.step else ""
            text += f"; backend-only nodes{by}: {kinds}"
        else:
            text += "; no backend-only nodes"
        note = port.note
        if port.roundtrip == "same":
            text += "; saved and loaded in a fresh process: same outputs"
        elif port.roundtrip is None and port.saveable:
            # Why it was not checked: the note's own reason (a forward that failed),
            # else no sample inputs (with inputs the round trip always runs).
            why = note.rstrip(".") if note else "round trip not checked: no sample inputs"
            text += f"; saveable ({why})"
            note = ""
        lines.append(text)
        if note:
            lines.append(note)
    again = measurement.second_call
    if again is not None:
        if again.same:
            lines.append("run twice: the frozen model gave the same outputs on both calls")
        else:
            lines.append(f"run twice: {again.note}")
    return lines


def passes_json(registry: Mapping[str, PassInfo] | None = None) -> list[dict[str, Any]]:
    """Every registry pass as JSON, with whether the default plan runs it."""
    reg = REGISTRY if registry is None else registry
    default = set(default_passes(True, False, reg))
    inference = set(default_passes(True, True, reg)) - default
    out = []
    for info in reg.values():
        data = info.to_json(default)
        data["default_with_optimize_for_inference"] = info.id in inference
        out.append(data)
    return out


def passes_table(registry: Mapping[str, PassInfo] | None = None) -> Table:
    """The registry as a rich table (``freezeview passes``)."""
    from rich.table import Table

    reg = REGISTRY if registry is None else registry
    default = set(default_passes(True, False, reg))
    inference = set(default_passes(True, True, reg)) - default
    guard = " (+ a guard step: order not verified on this torch)" if needs_guard() else ""
    table = Table(
        title=f"frozen-graph passes on torch {torch.__version__}{guard}",
        header_style="bold",
        show_lines=True,
    )
    table.add_column("pass")
    table.add_column("exact", justify="center")
    table.add_column("default", justify="center")
    table.add_column("what it does / when it fires", overflow="fold")
    for info in reg.values():
        if info.id in default:
            mark = "yes" if info.group != "loop" else "yes (loop)"
        elif info.id in inference:
            mark = "--optimize-for-inference"
        else:
            mark = "no"
        if not info.available:
            mark = "unavailable"
        table.add_row(
            info.id,
            "yes" if info.exact else "no",
            mark,
            f"{info.description}\n[dim]fires on: {info.fires_when}[/dim]",
        )
    return table
