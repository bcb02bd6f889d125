"""``explain --migrate``: what the move to torch.export does with what ``explain``
shows, from one run of ``freezeview migrate`` on the sample inputs: the torch.export
section, the marker on each state write's line, and the JSON fields.

rich and the engine (torch) are imported when the command runs.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import Console

    from ..engine.migrate import Migration, StateWrite
    from ..engine.reasons import AttributeVerdict

__all__ = [
    "export_marks",
    "mark_text",
    "marked_reason",
    "migration_json",
    "print_migration",
    "run_migration",
]


def run_migration(
    args: argparse.Namespace, inputs: tuple[Any, ...], threads: int, budget: float
) -> Migration:
    """``explain --migrate``: :func:`~freezeview.engine.migrate.migrate` once, on the model
    file and the sample inputs (its converter in its child process, with its time limit)."""
    from .migrate import migrate_from_args

    return migrate_from_args(args, inputs, threads, budget)


def migration_json(data: dict[str, Any], migration: Migration) -> None:
    """Add ``explain --migrate``'s facts to an ``explain --json`` document, in place.

    ``migration`` is the ``migrate --json`` document; each attribute gets ``export``:
    null when the model does not convert, else the forward's state write to it
    (``state_write``: how, node, source, source_text, carried, declared; null when the
    forward writes it not) and whether the program holds it, a parameter, as a buffer.
    """
    data["migration"] = migration.to_json()
    writes = export_marks(migration)
    as_buffers = set(migration.parameters_as_buffers)
    for attribute in data["attributes"]:
        path = attribute["path"]
        if not migration.conversion.converted:
            attribute["export"] = None
            continue
        write = writes.get(path)
        state = None if write is None else {k: v for k, v in write.to_json().items() if k != "path"}
        attribute["export"] = {"state_write": state, "parameter_as_buffer": path in as_buffers}


def export_marks(migration: Migration | None) -> dict[str, StateWrite]:
    """The forward's state writes, by path, each saying what torch.export does with it
    (none when the model does not convert: there is nothing to compare with)."""
    if migration is None or not migration.conversion.converted:
        return {}
    return {w.path: w for w in migration.writes}


def marked_reason(v: AttributeVerdict, mark: StateWrite | None) -> int | None:
    """The reason whose source line carries ``mark``: explain's write at migrate's line,
    else explain's first located write; None when explain names none."""
    located = [
        i for i, r in enumerate(v.reasons) if r.code in ("set-attr", "in-place-write") and r.source
    ]
    same = [i for i in located if v.reasons[i].source == mark.source] if mark else []
    return next(iter(same or located), None) if mark else None


def mark_text(mark: StateWrite) -> tuple[str, str]:
    """The marker's text and style."""
    if not mark.carried:
        return "lost in torch.export", "bold red"
    if not mark.declared:
        return "kept by torch.export, undeclared", "yellow"
    return "kept by torch.export", "green"


def print_migration(console: Console, migration: Migration) -> None:
    """``explain --migrate``'s torch.export section: migrate's verdict; how the conversion
    went, or the method, stage and node it failed on; the state writes the ExportedProgram
    loses (each marked on its attribute above) or does not declare; parameters it holds
    as buffers; the input dimensions it fixed; its forward against the frozen one."""
    from rich.markup import escape

    from ..engine.plumbing import plural

    conv = migration.conversion
    colour = "green" if migration.exit_code == 0 else "yellow" if conv.converted else "red"
    console.print()
    console.print(
        "[bold]torch.export[/] (freezeview migrate on the sample inputs): "
        f"[bold {colour}]{escape(migration.verdict)}[/]"
    )
    lines: list[str] = []
    if not conv.available:
        lines.append(conv.cause)
    elif not conv.converted:
        where = f" on {conv.failed_node.describe()}" if conv.failed_node else ""
        lines.append(f"failed in {conv.method}, {conv.stage}{where}")
        lines.append(f"torch: {conv.cause}")
        if conv.hint:
            lines.append(f"known cause: {conv.hint}")
    if conv.unhandled_kinds:
        lines.append(
            "node kinds the converter has no handler for: " + ", ".join(conv.unhandled_kinds)
        )
    if conv.converted:
        lines.append(
            f"converted {conv.method} in {conv.seconds:.2f} s; outputs the same on "
            f"{sum(migration.outputs_same)} of {plural(migration.calls, 'successive call')}"
        )
        lost = migration.lost_writes
        if lost:
            named = ", ".join(f"{w.path} ({w.source or 'no source line recorded'})" for w in lost)
            lines.append(f"{plural(len(lost), 'state write')} lost in the ExportedProgram: {named}")
        undeclared = [w.path for w in migration.writes if w.carried and not w.declared]
        if undeclared:
            lines.append(
                "kept when the program runs, but undeclared (no mutated buffer in its graph "
                "signature): " + ", ".join(undeclared)
            )
        differs = [p for p in migration.state_differs if p not in {w.path for w in lost}]
        if differs:
            lines.append("state that differs after the calls: " + ", ".join(differs))
        held = migration.parameters_as_buffers
        if held:
            more = f", ... {len(held) - 3} more" if len(held) > 3 else ""
            lines.append(
                f"{plural(len(held), 'parameter')} held as buffers by the program "
                f"({', '.join(held[:3])}{more})"
            )
        if migration.specialised:
            lines.append(
                "input dimensions fixed by the program: " + ", ".join(migration.specialised)
            )
        if migration.speed is not None:
            lines.extend(migration.speed.lines())
    lines.extend(migration.notes)
    for line in lines:
        console.print("  " + escape(line))
