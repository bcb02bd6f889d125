"""torch's status over the replay's: where freezeview's reasons meet torch's result.

:mod:`.verdicts` works out a status and its reasons for every attribute by replaying
freeze_module.cpp; :mod:`.torch_freeze` says what torch's real freeze did. This module
puts them together. Where they agree, the replay's reasons stand. Where they do not, the
status shown is torch's and the only reason is ``undetermined``: freezeview says it could
not work out why and lists what it does know (the replay's findings, torch's log lines
about the attribute), never a confident wrong answer. Every disagreement is also kept as
a :class:`Disagreement` so ``--debug`` can print what a bug report needs.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import replace

from .torch_freeze import TorchOutcome
from .verdict_values import AttributeVerdict, Disagreement, Reason

__all__ = ["settle"]

_DID = {
    "kept": "kept it as a module attribute",
    "inlined": "folded it into the graph as a constant",
    "dropped": "removed it",
}


def _log_lines(path: str, log: Iterable[str]) -> tuple[str, ...]:
    tail = "self." + path.rsplit(".", 1)[-1]
    return tuple(
        line for line in log if line.rstrip().endswith((f"self.{path}", tail)) and "self." in line
    )


def _undetermined(verdict: AttributeVerdict, status: str, log: tuple[str, ...]) -> Reason:
    known = [f"{r.code}: {r.message}" for r in verdict.reasons]
    info = verdict.info
    if info.readers:
        known.append(f"read directly by {', '.join(info.readers)}")
    if info.writers:
        known.append(f"assigned directly by {', '.join(info.writers)}")
    if log:
        known.append(f"torch's log: {log[0].split('] ', 1)[-1]}")
    facts = "; ".join(known) if known else "nothing more"
    located = next((r for r in verdict.reasons if r.node or r.source), None)
    return Reason(
        "undetermined",
        f"torch {_DID[status]}, but freezeview's replay of freeze_module.cpp expected it to "
        f"be {verdict.status}, so freezeview could not work out why. What it found: {facts}.",
        node=located.node if located else None,
        source=located.source if located else None,
        method=located.method if located else None,
        source_text=located.source_text if located else None,
    )


def settle(
    verdicts: list[AttributeVerdict], statuses: Mapping[str, str], outcome: TorchOutcome
) -> tuple[list[AttributeVerdict], list[Disagreement]]:
    """Give every verdict torch's status, keeping the replay's reasons where they agree.

    Args:
        verdicts: the replay's verdicts, one per attribute path.
        statuses: torch's status per path (:func:`.torch_freeze.torch_statuses`).
        outcome: torch's freeze, for its log lines.

    Returns:
        The verdicts to show, in the same order, and the disagreements found.
    """
    settled: list[AttributeVerdict] = []
    disagreements: list[Disagreement] = []
    for verdict in verdicts:
        status = statuses.get(verdict.path, verdict.status)
        if status == verdict.status:
            settled.append(verdict)
            continue
        log = _log_lines(verdict.path, outcome.log)
        disagreements.append(
            Disagreement(
                verdict.path,
                status,
                verdict.status,
                tuple(f"{r.code}: {r.message}" for r in verdict.reasons),
                log,
            )
        )
        reason = _undetermined(verdict, status, log)
        settled.append(replace(verdict, status=status, reasons=(reason,)))
    return settled, disagreements
