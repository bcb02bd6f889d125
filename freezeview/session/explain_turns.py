"""The app's explain in two parts: torch's statuses at once, freezeview's reasons after.

Toggling a preserved attribute asks for an explanation. Every status is torch's, read off
its freeze of the model (about one ``torch.jit.freeze``); freezeview's reasons come from
its replay of ``freeze_module.cpp`` (about half to one more). :class:`Explainer` hands
the statuses over as soon as torch's freeze is read, every attribute's reasons marked
:data:`PENDING_REASON`, then works out the reasons, and gives way to a run of the steps
(:class:`TorchTurns`): a user who toggles and presses ``r`` sees the steps after torch's
freeze and the run, and the reasons after those. A newer explain, or a cancel, abandons
a replay still under way, so its reasons never reach the screen.

Once a run has been made in the session (a toggle, not the first explain, whose reasons
the first run waits for), the replay starts :data:`GRACE` seconds after the statuses went
out, or as soon as a run asked meanwhile ends: a user who toggles and presses ``r`` gets
a run that neither waits for a stage of the replay nor shares the engine process (and
its GIL) with one.

The explanations of the last few sets of names are kept (:class:`ExplanationMemo`):
names explained before get their reasons at once, beside torch's new freeze.

Imports no torch at import time (the screen's process reads :data:`PENDING_REASON`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol

from .contract import Preserved
from .summaries import AttrSummary, ReasonSummary

if TYPE_CHECKING:
    from ..engine.graph import Inventory
    from ..engine.load import LoadedModel
    from ..engine.reasons import ExplanationMemo

__all__ = [
    "GRACE",
    "PENDING_REASON",
    "Explainer",
    "Superseded",
    "TorchTurns",
    "attr_summaries",
    "reasons_pending",
]

#: Seconds the replay of a toggle's reasons holds off after the statuses went out, for
#: a run asked on them (a key pressed on seeing them); a run ends it.
GRACE = 0.25

#: Seconds background work lets the thread of first work that has just ended answer
#: before its next stage (torch holds the GIL through a stage's bigger calls).
SETTLE = 0.02

#: The one reason of every attribute while freezeview's reasons are worked out.
PENDING_REASON = ReasonSummary(
    code="pending",
    message=(
        "freezeview is still working out why (the status is torch's own); "
        "the reasons follow in a moment"
    ),
)


def reasons_pending(summary: AttrSummary) -> bool:
    """True while ``summary``'s reasons are still being worked out."""
    return summary.reasons == (PENDING_REASON,)


class CancelFlag(Protocol):
    """What a cancel signal offers (a ``threading.Event``)."""

    def is_set(self) -> bool:
        """True once the caller no longer wants the answer."""
        ...


class Superseded(Exception):
    """A replay abandoned: a newer explain started, or its caller cancelled it."""


class TorchTurns:
    """The engine's torch work in turns: a run of the steps (and explain's torch freeze)
    goes first; the replay's reasons are worked out in the gaps.

    Work that goes first (:meth:`first`) waits only for the replay's current stage to
    end, never runs beside it; the replay (:meth:`background`) pauses between its stages
    (and between torch's bigger calls within them) while any first work is under way,
    lets that work's thread answer once it ends (:data:`SETTLE`), and is abandoned at a
    pause once it is not wanted.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._first = 0
        self._busy = False
        # Pieces of first work finished so far (a grace ends at the next one's end).
        self._done = 0

    @contextlib.contextmanager
    def first(self) -> Iterator[None]:
        """Hold the turn for work that goes first (re-entrant across threads)."""
        with self._cond:
            self._first += 1
            while self._busy:
                self._cond.wait()
        try:
            yield
        finally:
            with self._cond:
                self._first -= 1
                self._done += 1
                self._cond.notify_all()

    def _hold_off(self, wanted: Callable[[], bool], grace: float) -> None:
        """Wait (the condition held) until ``grace`` is over, first work has ended since,
        or first work is under way (the background work waits for its end anyway)."""
        done, deadline = self._done, time.monotonic() + grace
        while self._done == done and not self._first:
            left = deadline - time.monotonic()
            if left <= 0:
                return
            if not wanted():
                raise Superseded
            self._cond.wait(min(left, 0.05))  # a cancel sets no condition

    @property
    def first_active(self) -> int:
        """How many pieces of first work are under way or waiting."""
        return self._first

    @contextlib.contextmanager
    def background(
        self, wanted: Callable[[], bool], grace: float = 0.0
    ) -> Iterator[Callable[[], None]]:
        """Hold the turn for background work; gives the ``pause`` it calls between its
        stages (raises :class:`Superseded` there once ``wanted()`` is False).

        With ``grace``, the work starts no sooner than ``grace`` seconds from now unless
        a piece of first work ends before: first work asked meanwhile (a run on the
        statuses just shown) neither waits for a stage nor shares the process with one.
        """

        def take(done: int) -> None:
            while True:
                while self._first or self._busy:
                    if not wanted():
                        raise Superseded
                    # A cancel sets no condition: look again now and then.
                    self._cond.wait(0.05)
                if self._done == done:
                    break
                # First work has just ended, and its thread still answers (a run's last
                # message): a stage started now would hold the GIL through that.
                done = self._done
                self._cond.wait(SETTLE)
            if not wanted():
                raise Superseded
            self._busy = True

        def pause() -> None:
            with self._cond:
                self._busy = False
                self._cond.notify_all()
                take(self._done)

        with self._cond:
            done = self._done
            if grace > 0:
                self._hold_off(wanted, grace)
            take(done)
        try:
            yield pause
        finally:
            with self._cond:
                self._busy = False
                self._cond.notify_all()


@dataclasses.dataclass
class Explainer:
    """A session's explanations: torch's freeze for the next run, the replay's reasons.

    Args:
        memo: the explanations of the last few sets of names.
        turns: the turns of runs and the replay.
        grace: how long the replay of a toggle's reasons holds off for a run (see
            :data:`GRACE`).
    """

    memo: ExplanationMemo
    turns: TorchTurns = dataclasses.field(default_factory=TorchTurns)
    grace: float = GRACE
    # Whether a run has asked for a freeze (take): explains after that are toggles.
    _ran: bool = False
    # The last explain's preserved names, torch freeze and explanation (None while the
    # reasons are worked out), until a run with the same names takes them.
    _held: tuple[tuple[str, ...], Any, Any] | None = None
    _lock: threading.Lock = dataclasses.field(default_factory=threading.Lock)
    _generation: int = 0
    # The loaded model the freezes were made of (what release_clone spares).
    _module: Any = None
    # Summaries of the memo's explanations (a reason per attribute), by names.
    _summaries: dict[tuple[str, ...], tuple[Any, list[AttrSummary]]] = dataclasses.field(
        default_factory=dict
    )

    def verdicts_in_turns(
        self,
        loaded: LoadedModel,
        preserved: Preserved,
        statuses: Callable[[list[AttrSummary], Inventory], None] | None = None,
        cancel: CancelFlag | None = None,
    ) -> tuple[list[AttrSummary], Inventory | None]:
        """Every attribute's verdict with ``preserved``, and the module tree.

        With ``statuses``, torch's statuses are handed to it first (reasons pending)
        when the reasons are not known yet; the replay then gives way to runs and is
        abandoned, returning those pending summaries, when a newer explain starts or
        ``cancel`` is set. A replay that fails after the statuses went out gives each
        attribute an ``undetermined`` reason saying so.

        Raises:
            PlanError: an unknown name, or torch cannot freeze the model.
        """
        from ..engine.reasons import explain, torch_outcome, torch_statuses_only

        names = tuple(preserved)
        with self._lock:
            self._generation += 1
            mine = self._generation
        module = self._module = loaded.module
        self.forget()
        # torch's freeze is made here and handed to the next run with these names, which
        # then neither freezes the model again nor explains it again. A freeze torch
        # refuses is explain's to word.
        outcome = None
        with self.turns.first():
            try:
                outcome = torch_outcome(module._c, list(names))
            except RuntimeError:
                outcome = None
        # The replay's reasons for names explained before stand where torch's freeze,
        # made anew just now, did the same (kept, folded, logged).
        explanation = self.memo.get(names, outcome)
        pending: list[AttrSummary] | None = None
        if explanation is None and outcome is not None and statuses is not None:
            quick = torch_statuses_only(loaded, names, outcome)
            if quick is not None:
                pending = attr_summaries(quick, names, pending=True)
                self._hold((names, outcome, None))  # a run may take the freeze now
                statuses(list(pending), quick.inventory)
        if explanation is None:
            # A toggle's replay holds off for a run asked on the statuses; the first
            # explain's does not (the first run waits for its reasons).
            grace = self.grace if pending is not None and self._ran else 0.0
            explanation = self._replay(
                loaded, names, outcome, pending, cancel, mine, explain, grace
            )
            if explanation is None:  # abandoned
                return list(pending or []), None
            if isinstance(explanation, list):  # the replay failed after the statuses
                return explanation, None
        if outcome is not None:
            self.memo.put(names, outcome, explanation)
        if pending is None:
            self._hold((names, outcome, explanation))
        else:
            with self._lock:  # the run that took the freeze has gone on without them
                if self._held is not None and self._held[1] is outcome:
                    self._held = (names, outcome, explanation)
        return self._views_of(names, explanation), explanation.inventory

    def _replay(
        self,
        loaded: LoadedModel,
        names: tuple[str, ...],
        outcome: Any,
        pending: list[AttrSummary] | None,
        cancel: CancelFlag | None,
        mine: int,
        explain: Callable[..., Any],
        grace: float = 0.0,
    ) -> Any:
        """The replay's explanation; None when abandoned (only after the statuses went
        out), or the pending summaries with an ``undetermined`` reason when it failed then."""
        from ..engine.reasons import release_clone

        def wanted() -> bool:
            if pending is None:
                return True  # nobody saw statuses: the answer is awaited
            return self._generation == mine and not (cancel is not None and cancel.is_set())

        # Only torch's facts: the frozen clone is the next run's, never the replay's.
        facts = dataclasses.replace(outcome, frozen=None) if outcome is not None else None
        try:
            with self.turns.background(wanted, grace) as pause:
                return explain(loaded, preserved_attrs=list(names), outcome=facts, pause=pause)
        except Superseded:
            return None
        except Exception as exc:
            if pending is None:
                if outcome is not None and outcome.frozen is not None:
                    release_clone(outcome.frozen, loaded.module)
                raise
            reason = ReasonSummary(
                code="undetermined",
                message=f"freezeview could not work out why (the status is torch's): {exc}",
            )
            return [dataclasses.replace(v, reasons=(reason,)) for v in pending]

    def _views_of(self, names: tuple[str, ...], explanation: Any) -> list[AttrSummary]:
        """The summaries of ``explanation``: those made before for a kept one."""
        made = self._summaries.get(names)
        if made is None or made[0] is not explanation.attributes:
            summaries = attr_summaries(explanation, names)
            if self._summaries:  # one copy of the summaries equal to the last kept ones
                from ..engine.plumbing import reuse_equal

                reuse_equal(summaries, list(self._summaries.values())[-1][1])
            made = (explanation.attributes, summaries)
        self._summaries = {n: v for n, v in self._summaries.items() if n in self.memo}
        if names in self.memo:
            self._summaries[names] = made
        return list(made[1])

    def _hold(self, held: tuple[tuple[str, ...], Any, Any]) -> None:
        with self._lock:
            old, self._held = self._held, held
        self._release(old)  # another explain's, finished meanwhile

    def take(self, preserved: Preserved) -> tuple[tuple[str, ...], Any, Any] | None:
        """The last explain's names, torch freeze and explanation (None while its reasons
        are worked out) for a run with ``preserved``; another explain's freeze is freed."""
        with self._lock:
            held, self._held = self._held, None
            self._ran = True
        if held is not None and held[0] == tuple(preserved):
            return held
        self._release(held)
        return None

    def forget(self) -> None:
        """Free the last explain's torch freeze when no run took it."""
        with self._lock:
            held, self._held = self._held, None
        self._release(held)

    def let_go_of_model(self) -> None:
        """Free the last explain's torch freeze and drop the loaded model it was made of
        (the session loaded the model anew: nothing here may keep the old one alive)."""
        self.forget()
        self._module = None

    def _release(self, held: tuple[tuple[str, ...], Any, Any] | None) -> None:
        if held is not None and held[1] is not None and held[1].frozen is not None:
            from ..engine.reasons import release_clone

            release_clone(held[1].frozen, self._module)


def _text(value: Any) -> str:
    from ..engine.graph import SourceLocation

    if value is None:
        return ""
    if isinstance(value, SourceLocation):
        return f"{value.short()}  {value.text}".strip()
    return str(value)


def attr_summaries(
    explanation: Any, preserved: Preserved, pending: bool = False
) -> list[AttrSummary]:
    """The summaries of an explanation's verdicts; with ``pending``, every attribute's one
    reason is :data:`PENDING_REASON` (torch's statuses, the reasons to follow)."""
    waiting = (PENDING_REASON,)
    # A preserved name, or under one (every attribute, at every toggle: one set lookup).
    exact, under = frozenset(preserved), tuple(f"{n}." for n in preserved)
    return [
        AttrSummary(
            path=verdict.path,
            kind=str(verdict.kind),
            type=str(verdict.type),
            status=str(verdict.status),
            reasons=waiting if pending else tuple(_reason_view(r) for r in verdict.reasons),
            preserved=verdict.path in exact or verdict.path.startswith(under),
            value=verdict.info.value if verdict.info.value_kind == "enum" else "",
        )
        for verdict in explanation.attributes
    ]


def _reason_view(reason: Any) -> ReasonSummary:
    return ReasonSummary(
        code=str(reason.code),
        message=str(reason.message),
        node=_text(getattr(reason, "node", None)),
        source=_text(getattr(reason, "source", None)),
        method=_text(getattr(reason, "method", None)),
        source_text=_text(getattr(reason, "source_text", None)),
    )
