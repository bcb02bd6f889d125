"""A step's graph sent from the engine process to the screen in slices.

A snapshot of a big graph is hundreds of thousands of small objects. Unpickled in one
call it holds the screen's GIL (so its event loop, so every key) until the last is made.
Pickled here in slices instead -- the nodes first, deepest first,
:data:`SLICE_NODES` at a time, then the graph's value map in pieces, its IR text, and
last the graph's few fields, all with one pickler whose memo spans the slices -- the
screen unpickles it slice after slice with one unpickler, each slice too small to
hold up a key, and gives the event loop its turn between two slices; each slice refers
to the objects the slices before it made. The result is the same graph (``==``) as one
``pickle.loads`` gives.

On the screen's side (:func:`load_in_slices`):

- the graph's objects are not tracked by the garbage collector: a snapshot is values
  made of values, never a reference cycle, so reference counting alone frees it, and
  no collection ever walks its hundreds of thousands of objects (the screen's deep
  collection, session/collector.py, walks only the screen's own);
- one graph is received at a time (two workers unpickling at once left the event loop
  the smaller share of the GIL);
- while the user is at the keys (a key or the mouse in the last
  :data:`STAND_ASIDE_SECONDS`), the receiving thread waits longer between two slices,
  so a key waits for at most one slice, not for a convoy of them;
- a transfer that became stale (a re-run started) stops at its next slice and frees
  what it built a slice at a time.
"""

from __future__ import annotations

import ctypes
import io
import itertools
import pickle
import sys
import threading
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from . import collector

if TYPE_CHECKING:
    from ..engine.graph import GraphSnapshot

__all__ = ["SLICE_NODES", "STAND_ASIDE_SECONDS", "dump_in_slices", "load_in_slices", "yield_turn"]

#: Nodes a slice holds: few, so a key waits for one slice's unpickling at most, even
#: with the event loop and a second transfer competing for the GIL.
SLICE_NODES = 250
# Entries of the graph's value map a slice holds (each two references to objects sent
# before: cheap).
_SLICE_VALUES = 2000
#: A key or the mouse less than this long ago: the user is at the keys.
STAND_ASIDE_SECONDS = 0.3
# Seconds between two slices while the user is at the keys (long beside a slice's
# unpickling, so the event loop holds the GIL most of that time).
_STAND_ASIDE_PAUSE = 0.02
# One graph unpickled at a time in this process.
_receiving = threading.Lock()


def dump_in_slices(graph: GraphSnapshot, nodes: int = SLICE_NODES) -> list[bytes]:
    """``graph`` pickled as slices for :func:`load_in_slices`: its nodes (a node's nested
    nodes before the node) ``nodes`` at a time, its value map in pieces, its text, then
    its other fields."""
    order = graph.nodes_in_order()[::-1]  # pre-order reversed: every node after its own
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    slices: list[bytes] = []

    def cut(kind: str, value: Any) -> None:
        pickler.dump((kind, value))
        slices.append(buffer.getvalue())
        buffer.seek(0)
        buffer.truncate()

    for start in range(0, len(order), nodes):
        cut("nodes", order[start : start + nodes])
    values = list(graph.value_map().items())
    for start in range(0, len(values), _SLICE_VALUES):
        cut("values", values[start : start + _SLICE_VALUES])
    cut("text", graph.text)
    cut("graph", (graph.method, graph.block, graph.node_count))
    return slices


class _Slices(io.RawIOBase):
    """The slices as one stream, each let go of once read (no copy of them all)."""

    def __init__(self, slices: list[bytes]) -> None:
        self._slices = slices
        self._slices.reverse()  # popped from the end: the first slice last
        self._current = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._current and self._slices:
            self._current = memoryview(self._slices.pop())
        count = min(len(buffer), len(self._current))
        buffer[:count] = self._current[:count]
        self._current = self._current[count:]
        return count


def _gc_untrack() -> Callable[[object], None] | None:
    """CPython's ``PyObject_GC_UnTrack`` (None elsewhere: objects stay tracked).

    The one call into CPython's C API freezeview makes, and why: Python has no public
    way to take an object out of the collector's reach for good. ``gc.freeze()`` moves
    objects to the permanent generation, but the screen's deep sweep
    (session/collector.py) unfreezes everything to find the cyclic garbage among the
    screen's own objects, and would then walk every node of every graph received (a
    big graph's steps hold about as many objects as the rest of the screen: each deep
    sweep would walk them all again). A ``gc.untrack`` was proposed and rejected upstream:
    https://github.com/python/cpython/issues/86205. Untracking is safe here because a
    snapshot's values hold no reference cycle (tests/session/test_graph_wire.py fails
    when this symbol is gone on CPython, or a received graph is tracked again).
    """
    if sys.implementation.name != "cpython":
        return None
    try:
        untrack = ctypes.pythonapi.PyObject_GC_UnTrack
    except AttributeError:
        return None
    untrack.argtypes = [ctypes.py_object]
    untrack.restype = None
    return untrack  # type: ignore[no-any-return]


_UNTRACK = _gc_untrack()


class _UntrackingUnpickler(pickle.Unpickler):
    """An unpickler whose snapshot values (and the tuples they are made of) are not
    tracked by the garbage collector: they hold no reference cycle, reference counting
    frees them, and no collection needs to walk them."""

    _kinds = frozenset(
        ("NodeSnapshot", "ValueInfo", "BlockSnapshot", "ConstantSummary", "SourceLocation")
    )

    def find_class(self, module: str, name: str) -> Any:
        found = super().find_class(module, name)
        untrack = _UNTRACK
        if untrack is None or name not in self._kinds or not module.endswith("snapshot_values"):
            return found

        def make(*fields: Any) -> Any:
            made = found(*fields)
            for value in fields:
                if type(value) is tuple:
                    untrack(value)
                    for item in value:
                        if type(item) is tuple:
                            untrack(item)
            untrack(made)
            return made

        return make


def load_in_slices(
    slices: Sequence[bytes],
    pause: float = 0.0005,
    stale: Callable[[], bool] | None = None,
) -> GraphSnapshot | None:
    """The graph :func:`dump_in_slices` pickled, unpickled a slice at a time with a
    ``pause`` between two slices (other threads' turn at the GIL; longer while the user
    is at the keys), one graph at a time in this process; each slice is let go of once
    read when ``slices`` is a list (it is emptied). None if ``stale()`` said so between
    two slices (what was built is freed a slice at a time)."""
    from ..engine.graph import GraphSnapshot

    count = len(slices)
    stream = io.BufferedReader(_Slices(slices if isinstance(slices, list) else list(slices)))
    unpickler = _UntrackingUnpickler(stream)
    pieces: list[list[Any]] = []
    values: dict[str, Any] = {}
    text = ""
    fields: tuple[str, Any, int] | None = None
    with _receiving:
        for i in range(count):
            kind, value = unpickler.load()
            if kind == "nodes":
                pieces.append(value)
            elif kind == "values":
                values.update(value)
            elif kind == "text":
                text = value
            else:
                fields = value
            del value
            if i + 1 < count:
                yield_turn(pause)
                if stale is not None and stale():
                    # The unpickler's memo goes first (references only: the nodes are
                    # the pieces'), then the nodes, a few slices at a time.
                    values.clear()
                    del unpickler, stream
                    _free_in_slices(pieces)
                    return None
    assert fields is not None, "the last slice holds the graph's fields"
    method, block, node_count = fields
    # The nodes arrived in reversed pre-order: the graph's walk order, as it was sent.
    in_order = tuple(itertools.chain.from_iterable(pieces))[::-1]
    graph = GraphSnapshot.from_parts(method, block, text, node_count, values, in_order)
    untrack = _UNTRACK
    if untrack is not None:
        untrack(graph)
        untrack(in_order)
        untrack(values)
    return graph


def yield_turn(pause: float) -> None:
    """The other threads' turn at the GIL between two slices: longer while the user is
    at the keys."""
    at_keys = collector.idle_seconds() < STAND_ASIDE_SECONDS
    time.sleep(_STAND_ASIDE_PAUSE if at_keys else pause)


def _free_in_slices(pieces: list[Any]) -> None:
    """The nodes of a stopped transfer, freed a few slices at a time, the latest first
    (one cascade of tens of thousands of nodes would hold the GIL)."""
    while pieces:
        del pieces[-4:]
        time.sleep(0.0005)
