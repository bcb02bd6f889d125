"""The main screen's runs of the plan, as one public object: :class:`RunState`.

The main screen (:mod:`.main`) owns one :class:`RunState` and changes it only through
its methods, on the event loop: a toggle of a preserved name, an explain asked for and
answered, a run started or cancelled. What a worker needs of it is handed over as a
frozen order (:class:`ExplainOrder`, :class:`RunOrder`), never the state itself, and
what comes back is checked against it (an older run's step, an older explain's
verdicts are dropped). The ticked passes are the steps bar's, which says when they
change (``StepsBar.PassToggled``, ``StepsBar.PassesChanged``).

Imports neither Textual nor torch.
"""

from __future__ import annotations

import threading
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ...session import Preserved

if TYPE_CHECKING:
    from ...session import PassSummary

__all__ = ["ExplainOrder", "Plan", "RunOrder", "RunState", "in_plan_order"]


@dataclass(frozen=True)
class Plan:
    """What a run freezes with: the preserved names and the ticked passes, in order."""

    preserved: Preserved = ()
    passes: tuple[str, ...] = ()


@dataclass(frozen=True)
class ExplainOrder:
    """One explain asked of a worker: its number, the names, and its stop (set when a
    newer explain starts: its reasons would be stale on arrival)."""

    request: int
    preserved: Preserved
    cancel: threading.Event


@dataclass(frozen=True)
class RunOrder:
    """One run of the pipeline asked of a worker: its id, its plan, and its stop (set
    by the next run, or when the user quits)."""

    run_id: int
    plan: Plan
    cancel: threading.Event
    #: Time each node of every changed step (the graph view's heat, ``%``).
    profile: bool = False


@dataclass
class RunState:
    """The plan's runs as the main screen holds them (see the module docstring).

    Read freely; changed only by the methods below.
    """

    #: The names in ``preserved_attrs``, in the user's order (space toggles one).
    preserved: Preserved = ()
    #: Which run the steps shown belong to (0: none yet).
    run_id: int = 0
    #: The running pipeline's stop.
    cancel: threading.Event = field(default_factory=threading.Event)
    #: The explain whose answers count (older ones' are stale).
    explain_request: int = 0
    #: The running explain's stop.
    explain_cancel: threading.Event = field(default_factory=threading.Event)
    #: An explain is under way: its whole explanation has not arrived yet.
    explaining: bool = False
    #: A run waits for the explanation (the first one, as the model loads).
    run_waits_for_explain: bool = False
    #: The plan of the last run started (None before the first).
    last_plan: Plan | None = None
    #: Runs time each node (the user asked for the graph view's heat, ``%``).
    profile: bool = False
    #: Whether the last run started timed each node.
    last_profiled: bool = False

    def toggle(self, path: str) -> bool:
        """Add ``path`` to the preserved names, or remove it; whether it is in now."""
        if path in self.preserved:
            self.preserved = tuple(p for p in self.preserved if p != path)
            return False
        self.preserved = (*self.preserved, path)
        return True

    def begin_explain(self) -> ExplainOrder:
        """A new explain of the preserved names; the one before it is told to stop."""
        self.explaining = True
        self.explain_cancel.set()
        self.explain_cancel = threading.Event()
        self.explain_request += 1
        return ExplainOrder(self.explain_request, self.preserved, self.explain_cancel)

    def answers(self, request: int, preserved: Preserved) -> bool:
        """Whether verdicts for explain ``request`` of ``preserved`` are the current ones."""
        return request == self.explain_request and preserved == self.preserved

    def explain_over(self) -> bool:
        """The explain ended (its whole explanation arrived, or it failed); whether a
        run waited for it (that run is now the caller's to start)."""
        self.explaining = False
        waits, self.run_waits_for_explain = self.run_waits_for_explain, False
        return waits

    def run_after_explain(self) -> None:
        """The explain under way (or the next one) starts a run when it ends."""
        self.run_waits_for_explain = True

    def begin_run(self, passes: Sequence[str]) -> RunOrder:
        """A new run of the plan with ``passes``; the one before it is told to stop."""
        self.cancel.set()
        self.cancel = threading.Event()
        self.run_id += 1
        self.last_plan = Plan(self.preserved, tuple(passes))
        self.last_profiled = self.profile
        return RunOrder(self.run_id, self.last_plan, self.cancel, self.profile)

    def current(self, order: RunOrder) -> bool:
        """Whether ``order`` is the run under way (not replaced, not cancelled)."""
        return order.run_id == self.run_id and not order.cancel.is_set()

    def cancel_run(self) -> None:
        """Ask the running pipeline to stop before its next step."""
        self.cancel.set()

    def stale(self, passes: Sequence[str]) -> bool:
        """Whether the plan (with the ticked ``passes``) differs from the last run's."""
        return self.last_plan is not None and Plan(self.preserved, tuple(passes)) != (
            self.last_plan
        )


def in_plan_order(passes: Sequence[PassSummary], plan: Sequence[str] | None) -> list[PassSummary]:
    """The pass list in the order the run takes them: with ``--passes``, the named ones
    first in the order given (as ``freezeview freeze --passes`` runs them, so the app's
    step numbers are the CLI's), then the rest in torch's order."""
    if not plan:
        return list(passes)
    rank = {pid: i for i, pid in enumerate(plan)}
    return sorted(passes, key=lambda p: rank.get(p.id, len(rank)))
