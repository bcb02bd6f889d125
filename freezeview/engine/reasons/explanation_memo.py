"""Explanations of one loaded model kept by preserved names, for the next explain of them.

The app explains its loaded model again at every toggle of a preserved attribute, and a
toggle undone asks for names explained a moment ago. The replay of freeze_module.cpp
(about as costly as torch's freeze) depends only on the model, which nothing changes,
and the names; what explain reads of torch's freeze (:func:`torch_facts`) is compared
each time: torch freezes the model anew for every explain, and a kept explanation
stands only beside the same torch result.
"""

from __future__ import annotations

import dataclasses
import threading
from collections.abc import Sequence
from typing import Any

from ..plumbing import reuse_equal
from .torch_freeze import TorchOutcome
from .verdict_values import Explanation

__all__ = ["KEPT", "ExplanationMemo", "share_equal", "torch_facts"]

#: How many sets of preserved names keep their explanation, by default.
KEPT = 4


def torch_facts(outcome: TorchOutcome) -> tuple[Any, ...]:
    """All an explanation reads of torch's freeze: what it kept, what it folded and its
    freezing log (the same model frozen with the same names gives the same three)."""
    return (outcome.kept, outcome.folded, outcome.log)


class ExplanationMemo:
    """The explanations of the last ``size`` sets of preserved names (values only: no
    graph, no module), each with the torch facts it was made with.

    Args:
        size: how many sets of names keep theirs (least recently asked go first).
    """

    def __init__(self, size: int = KEPT) -> None:
        self.size = size
        self._kept: dict[tuple[str, ...], tuple[tuple[Any, ...], Explanation]] = {}
        self._lock = threading.Lock()

    def __len__(self) -> int:
        return len(self._kept)

    def __contains__(self, names: object) -> bool:
        return names in self._kept

    def get(self, names: Sequence[str], outcome: TorchOutcome | None) -> Explanation | None:
        """The explanation kept for ``names`` if ``outcome`` (torch's freeze with them,
        made anew) has its torch facts; it then carries this freeze's log and time."""
        key = tuple(names)
        with self._lock:
            kept = self._kept.pop(key, None)
            if kept is None:
                return None
            self._kept[key] = kept  # the most recently asked now
        if outcome is None or kept[0] != torch_facts(outcome):
            return None
        return dataclasses.replace(kept[1], torch_log=outcome.log, torch_seconds=outcome.seconds)

    def put(self, names: Sequence[str], outcome: TorchOutcome, explanation: Explanation) -> None:
        """Keep ``explanation``, made with ``outcome``, for the next :meth:`get` of ``names``.

        Its verdicts and torch's log lines equal to those of an explanation kept already
        are replaced by those (in place: equal values, the same answers): a toggle
        changes a few verdicts of thousands, so each set of names kept costs its own
        list and what differs, not another copy of every verdict.
        """
        key = tuple(names)
        facts = torch_facts(outcome)
        with self._lock:
            self._kept.pop(key, None)
            others = [kept for kept in self._kept.values() if kept[1] is not explanation]
            if others:
                last_facts, last = others[-1]
                share_equal(explanation, last)
                facts = tuple(_shared(new, old) for new, old in zip(facts, last_facts, strict=True))
            self._kept[key] = (facts, explanation)
            while len(self._kept) > self.size:
                del self._kept[next(iter(self._kept))]


def share_equal(explanation: Explanation, kept: Explanation) -> None:
    """Make ``explanation`` hold ``kept``'s verdict objects (and torch log lines) where
    they are equal, path by path: the same values, one copy of each in memory."""
    reuse_equal(explanation.attributes, kept.attributes)
    explanation.torch_log = _shared(explanation.torch_log, kept.torch_log)


def _shared(new: Any, old: Any) -> Any:
    """``new``, or ``old`` where equal; a tuple of strings holding ``old``'s equal ones."""
    if new == old:
        return old
    if isinstance(new, tuple) and isinstance(old, tuple):
        known = {item: item for item in old if isinstance(item, str)}
        return tuple(known.get(item, item) if isinstance(item, str) else item for item in new)
    return new
