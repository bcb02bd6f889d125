"""The screen process's garbage collector: never a full collection across a run's graphs.

A full collection walks every tracked object, and holds the GIL (so the event loop, so
every key) while it does: with a big model's step snapshots in memory that is hundreds
of objects per node, and the keys wait for every one of them. CPython starts one
by itself whenever enough objects survived younger collections, which is exactly what
receiving a snapshot does, at a moment nobody chose.

So, while the app runs:

- :func:`install`: no automatic full collections; the young generations are collected
  as usual (they only see objects allocated since their last collection);
- :func:`keep`: after long-lived data arrived (a step's snapshot), what is alive now
  moves out of the collector's reach (``gc.freeze``, which costs nothing). Reference
  counting still frees those objects when a re-run drops them: the app holds a run's
  snapshots without reference cycles (tests/ui/test_rerun_memory.py checks it);
- :func:`sweep`: a full collection of what is not frozen (the screen's own objects,
  few beside the frozen), then :func:`keep` -- at a run's start, and on a quiet timer,
  so cyclic garbage the screen makes (Textual's messages, finished workers) does not
  pile up;
- :func:`deep_sweep`: the frozen objects too (what was alive when frozen and became
  cyclic garbage since), when enough has joined them (:func:`deep_sweep_if_due`): on the
  quiet timer, once nobody has been at the keys for 2 s, never on a key. It walks the
  screen's own objects only (still many on a big model's screen): the step graphs the
  screen receives are not tracked by the collector at all (session/graph_wire.py), and a
  re-run's start frees the last run's (:func:`let_go`) off the event loop. A user who
  never pauses gets it at a run's start once as many objects have joined the frozen
  ones as the last one left alive, measured by the count taken when the run before
  ended (:func:`note_run_end`): counting the frozen objects walks them all, and a run's
  start is a key's.

A snapshot is freed by reference counting alone: anything that would hold one in a
cycle (a finished worker keeps its arguments) must let go of it. The same goes for what
the screen draws: the screen keeps its toolkit's caches out of cycles of their own
(freezeview/ui/textual_caches.py), so the frozen garbage a run leaves is small beside
what the screen holds, and the deep sweep is seldom due. This module knows
nothing of the toolkit: what the screen must empty before a deep sweep, it hands to
:func:`install` (``before_deep_sweep``).
"""

from __future__ import annotations

import gc
import threading
import time
from collections.abc import Callable, Iterable
from contextlib import AbstractContextManager
from typing import Any, Generic, TypeVar

from ..engine.plumbing import CatchUp, collector_paused, give_back_freed_memory

__all__ = [
    "Handoff",
    "deep_sweep",
    "deep_sweep_if_due",
    "idle_seconds",
    "install",
    "keep",
    "let_go",
    "note_input",
    "note_run_end",
    "paused",
    "sweep",
    "uninstall",
]

T = TypeVar("T")

# Larger than any count of young collections between two sweeps: no automatic full
# collection happens (CPython compares the count of generation-1 collections since the
# last full one with this).
_NEVER = 1 << 30

_saved: tuple[int, ...] | None = None
# What the screen lets go of before each deep sweep (install's ``before_deep_sweep``).
_before_deep_sweep: Callable[[], object] | None = None
#: Seconds the last sweep took, and each deep sweep (bench_keys.py reports them).
last_sweep = 0.0
deep_sweeps: list[tuple[float, int]] = []  # (seconds, objects frozen before)
# Objects frozen right after the last deep sweep (deep_sweep_if_due measures from it);
# None until the app's first run start, which sets it.
_frozen_after_deep: int | None = None
# Objects frozen when last counted (None: not since install). ``gc.get_freeze_count()``
# walks the whole frozen list, whose objects are mostly torch's and Textual's own
# (functions, types, dicts): as long on any model's screen, and no key should wait for
# it. A run's start (the ``r`` key's) decides from this count,
# taken at the run before's end (:func:`note_run_end`) or by the quiet timer's check.
_frozen_counted: int | None = None
#: Frozen objects gained since the last deep sweep that make the next one due, at least
#: (garbage holding little memory); past that, a quarter of what the last one left alive,
#: as CPython's own rule for its full collections: a deep sweep walks what is alive, so
#: each costs about what the garbage between two did to make, and the objects held stay
#: within a quarter more than those alive. A run leaves little garbage, a footer rebuilt
#: (a focus change that changes the keys shown) some more; what the screen holds alive
#: grows and shrinks between runs by far more than either, the more so on a big model's
#: screen, so it may be due with little garbage: the quiet timer runs it, no key waits
#: for it.
DUE_GARBAGE = 20_000
#: The share of what the last deep sweep left alive that makes the next one due.
DUE_SHARE = 0.25
#: Frozen objects gained that make a run's start collect, at least (a user who never
#: pauses for the quiet timer); past that, as many as the last deep sweep left alive
#: (:data:`RUN_START_SHARE`): memory stays bounded, and a key may wait only then.
RUN_START_DUE = 200_000
RUN_START_SHARE = 1.0


def install(before_deep_sweep: Callable[[], object] | None = None) -> None:
    """No automatic full collections from now on (the young ones go on).

    Args:
        before_deep_sweep: called at the start of every :func:`deep_sweep`, before the
            collection: the screen lets go there of what its toolkit's caches hold for
            widgets long removed (freezeview/ui/textual_caches.py), so that the sweep
            frees it. None: nothing to let go of.
    """
    global _saved, _frozen_after_deep, _frozen_counted, _before_deep_sweep
    _before_deep_sweep = before_deep_sweep
    if _saved is None:
        _frozen_after_deep = _frozen_counted = None
        _saved = gc.get_threshold()
        gc.set_threshold(_saved[0], _saved[1], _NEVER)


def paused() -> AbstractContextManager[CatchUp]:
    """:func:`~freezeview.engine.plumbing.collector_paused` for the screen's process: with
    the app's collector in place, what the block built is frozen with what :func:`keep`
    froze, and the frozen objects are not walked to find out whether there are any."""
    return collector_paused(frozen_kept=True if _saved is not None else None)


def uninstall() -> None:
    """The collector as it was; what was frozen is the collector's again."""
    global _saved, _before_deep_sweep
    _before_deep_sweep = None
    if _saved is not None:
        gc.set_threshold(*_saved)
        _saved = None
        gc.unfreeze()


def keep() -> None:
    """Objects alive now are long-lived: out of every future collection's walk."""
    if _saved is not None:
        gc.freeze()


def deep_sweep() -> float:
    """A full collection of everything, frozen or not, then freeze the survivors.

    Frozen objects that became cyclic garbage since are only freed this way; so is what
    the ``before_deep_sweep`` given to :func:`install` lets go of first. It walks every
    tracked object alive, in one block: the screen calls it when nobody is at the keys
    (:func:`deep_sweep_if_due`).
    """
    global last_sweep, _frozen_after_deep
    if _saved is None:
        return 0.0
    start = time.perf_counter()
    walked = gc.get_freeze_count()
    if _before_deep_sweep is not None:
        _before_deep_sweep()
    gc.unfreeze()
    gc.collect()
    gc.freeze()
    _frozen_after_deep = _count_frozen()
    last_sweep = time.perf_counter() - start
    deep_sweeps.append((last_sweep, walked))
    return last_sweep


def deep_sweep_if_due(due: int | None = None, *, recount: bool = True) -> float:
    """:func:`deep_sweep`, if enough objects joined the frozen ones since the last (what
    is frozen and alive stays about the same from run to run, so the growth is frozen
    garbage: the screen's widgets removed, workers, the little its caches leave):
    :data:`DUE_GARBAGE`, or a quarter of what the last one left alive
    (:data:`DUE_SHARE`). A deep
    sweep walks every tracked object alive (the screen's own: many on a big model's
    screen, in one block), so the quiet timer calls it, and a run's start only
    with ``due`` = :data:`RUN_START_DUE` (or as many as were alive) and
    ``recount=False``: then the count the last run's end took stands for now (a count
    walks every frozen object, :data:`_frozen_counted`). Nothing is due before the first
    run has ended (:func:`note_run_end`). Returns the seconds it took (0: not due)."""
    if _saved is None or _frozen_after_deep is None:
        return 0.0  # the first run has not ended: nothing to measure from
    frozen = _count_frozen() if recount else _frozen_counted
    if frozen is None:
        return 0.0
    least, share = (DUE_GARBAGE, DUE_SHARE) if due is None else (due, RUN_START_SHARE)
    if frozen <= _frozen_after_deep + max(least, int(_frozen_after_deep * share)):
        return 0.0
    return deep_sweep()


def note_run_end() -> None:
    """The current run's steps have all arrived: count the frozen objects now (one walk
    of them all, with no key being handled) for the next run's start to decide from.

    The first run's end sets the count the deep sweeps measure from: before it, the
    screen gains what it holds alive (the explanation, the tree, the steps: most of a big
    model's screen), not garbage; measured from the model's load, that made the first
    re-run's ``r`` walk them all while the user waited.
    """
    global _frozen_after_deep
    if _saved is not None:
        counted = _count_frozen()
        if _frozen_after_deep is None:
            _frozen_after_deep = counted


def _count_frozen() -> int:
    """The frozen objects, counted now (a walk of them all) and kept as the last count."""
    global _frozen_counted
    _frozen_counted = gc.get_freeze_count()
    return _frozen_counted


_last_input = 0.0


def note_input() -> None:
    """The user pressed a key or used the mouse (the app calls it for every such event)."""
    global _last_input
    _last_input = time.monotonic()


def idle_seconds() -> float:
    """Seconds since the user last pressed a key or used the mouse."""
    return time.monotonic() - _last_input


def sweep() -> float:
    """Free the cyclic garbage among the objects not frozen, then freeze the survivors.

    Returns the seconds it took (little: the run's snapshots are frozen, out of reach).
    """
    global last_sweep
    if _saved is None:
        return 0.0
    start = time.perf_counter()
    gc.collect()
    gc.freeze()
    last_sweep = time.perf_counter() - start
    return last_sweep


def let_go(graphs: Iterable[Any], then: Callable[[], object] | None = None) -> threading.Thread:
    """Free a run's graphs off the event loop, a slice at a time, then call ``then``.

    Dropping a big snapshot frees its objects in one cascade that holds the GIL until
    the last is freed, on the ``r`` key. Here a thread holds each graph's nodes in a flat
    list, lets the graph go, then frees the nodes a thousand at a time and gives the GIL
    back between slices. ``then`` (the screen's deep collection, which must not walk those
    graphs) is called once they are gone, from that thread.
    """
    pending = list(graphs)

    def dismantle() -> None:
        try:
            while pending:
                graph = pending.pop()
                walk = getattr(graph, "nodes_in_order", None)
                nodes = list(walk()) if walk is not None else []
                del graph, walk
                while nodes:
                    del nodes[-_SLICE:]
                    time.sleep(0.0005)  # the event loop's turn
        except Exception:
            # The rest go whole: the next run waits on ``then``, which must come.
            pending.clear()
        try:
            if then is not None:
                then()
        finally:
            # The graphs' large blocks (their text, their arrays) went back to the C heap,
            # not to the system: without this, the screen's resident size after a re-run
            # depends on where the next run's blocks happen to land, and varies by run.
            give_back_freed_memory()

    thread = threading.Thread(target=dismantle, name="freezeview-let-go", daemon=True)
    thread.start()
    return thread


# Nodes freed at a time by let_go (few enough that a key never waits long for the GIL).
_SLICE = 1000


class Handoff(Generic[T]):
    """A value given to a thread worker, taken out once when the worker starts.

    A finished Textual worker keeps the arguments it was called with, in reference
    cycles; frozen (:func:`keep`), those would hold a run's snapshots for good. Given in
    a handoff, the worker holds only the empty box once its call returns.
    """

    __slots__ = ("_value",)

    def __init__(self, value: T) -> None:
        self._value: T | None = value

    def peek(self) -> T:
        """The value, left in place."""
        if self._value is None:
            raise RuntimeError("handed-off value already taken")
        return self._value

    def take(self) -> T:
        """The value (once; a second take is an error)."""
        value, self._value = self._value, None
        if value is None:
            raise RuntimeError("handed-off value taken twice")
        return value
