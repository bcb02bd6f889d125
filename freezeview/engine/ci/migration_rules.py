"""``check``'s ``[migration]`` rules: does the model still convert to an ExportedProgram,
and does the program still keep every state write the TorchScript forward makes?

Both rules are held against one run of :func:`~freezeview.engine.migrate.migrate` on the
file's sample inputs (torch's converter in a child process with a time limit; nothing
timed, nothing written). A lost write is reported at its writing line, so ``check
--format github`` puts it on the pull request's diff there.
"""

from __future__ import annotations

import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..migrate import Migration, migrate
from ..reasons import Reason

__all__ = [
    "MIGRATION_KINDS",
    "MigrationBreak",
    "hold_migration_rule",
    "hold_migration_rules",
    "run_migration",
]

#: The rule kinds of ``[migration]``: ``converts = true`` and ``state_kept = true``.
MIGRATION_KINDS = ("converts", "state-kept")


class MigrationBreak(NamedTuple):
    """One way a ``[migration]`` rule is broken: the fields of ``check``'s violation (the
    report's line, the attribute, what was expected, what torch does, the writing line)."""

    message: str
    path: str | None
    expected: str
    actual: str
    reason: Reason | None = None


def run_migration(loaded: Any, inputs: Sequence[Any], *, eval_mode: bool = False) -> Migration:
    """``migrate`` on ``loaded`` (a :class:`~freezeview.engine.load.LoadedModel`): its
    file, or for a module built in Python a copy saved to a temporary file (the child
    process loads the model from a file)."""
    if loaded.path is not None:
        return migrate(loaded.path, inputs, budget=0, eval_mode=eval_mode)
    import torch

    with tempfile.TemporaryDirectory(prefix="freezeview-check-") as tmp:
        path = Path(tmp) / "model.pt"
        torch.jit.save(loaded.module, str(path))
        return migrate(path, inputs, budget=0, eval_mode=eval_mode)


def _failure(migration: Migration) -> str:
    """``fails in forward, converting a node on prim::fork (m.py:3: ...): torch: ...``."""
    conv = migration.conversion
    if not conv.available:
        return conv.cause
    where = f" on {conv.failed_node.describe()}" if conv.failed_node else ""
    text = f"torch's converter fails in {conv.method}, {conv.stage or 'converting'}{where}"
    if conv.cause:
        text += f": {conv.cause}"
    if conv.hint:
        text += f" ({conv.hint})"
    return text


def _where(source: str, text: str) -> str:
    where = source or "no source line recorded"
    return f"{where}: {text}" if text else where


def hold_migration_rule(kind: str, migration: Migration) -> tuple[list[MigrationBreak], int]:
    """``(breaks, checked)`` for rule ``kind`` (one of :data:`MIGRATION_KINDS`): no
    break when it holds; ``checked`` is how many facts it was held against."""
    conv = migration.conversion
    if kind == "converts":
        if conv.converted:
            return [], 1
        message = f"migration: expected it to convert to an ExportedProgram, {_failure(migration)}"
        return [MigrationBreak(message, None, "converts", "does not convert")], 1
    if not conv.converted:
        message = (
            "migration: expected the ExportedProgram to keep every state write, but no "
            f"program was made: {_failure(migration)}"
        )
        return [MigrationBreak(message, None, "state kept", "does not convert")], 1
    breaks = [
        MigrationBreak(
            f"{write.path}: expected the ExportedProgram to keep this state write, torch's "
            f"converter loses it ({write.how}, {_where(write.source, write.source_text)})",
            write.path,
            "kept",
            "lost",
            Reason(
                write.how,
                f"forward writes {write.path}; the ExportedProgram does not keep the write",
                node=write.node or None,
                source=write.source or None,
                method="forward",
                source_text=write.source_text or None,
            ),
        )
        for write in migration.lost_writes
    ]
    return breaks, len(migration.writes)


def hold_migration_rules(
    rules: Sequence[Any], loaded: Any, inputs: Sequence[Any] | None, *, eval_mode: bool = False
) -> dict[int, tuple[list[MigrationBreak], int]]:
    """Every ``[migration]`` rule of ``rules`` held against one run of migrate: by the
    rule's position in ``rules``, ``(breaks, checked)``; empty when the file has none."""
    asked = {i: rule.kind for i, rule in enumerate(rules) if rule.kind in MIGRATION_KINDS}
    if not asked:
        return {}
    migration = run_migration(loaded, inputs or (), eval_mode=eval_mode)
    return {i: hold_migration_rule(kind, migration) for i, kind in asked.items()}
