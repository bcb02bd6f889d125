"""A step's graph sent from the engine process to the screen in slices.

A snapshot of a 70k-node graph is hundreds of thousands of small objects. Unpickled in
one call it holds the screen's GIL (so its event loop, so every key) for a quarter of a
second. Pickled here in slices instead -- the nodes first, deepest first, a couple of
thousand at a time, then the graph, all with one pickler whose memo spans the slices --
the screen unpickles it slice after slice with one unpickler and gives the event loop
its turn between two slices; each slice refers to the nodes the slices before it made.
The result is the same graph (``==``) as one ``pickle.loads`` gives.
"""

from __future__ import annotations

import io
import pickle
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from ..engine.plumbing.collector import collector_paused

if TYPE_CHECKING:
    from ..engine.graph.snapshot_values import GraphSnapshot

__all__ = ["dump_in_slices", "load_in_slices"]

# Nodes a slice holds: a few milliseconds of unpickling each.
SLICE_NODES = 2000


def dump_in_slices(graph: GraphSnapshot, nodes: int = SLICE_NODES) -> list[bytes]:
    """``graph`` pickled as slices for :func:`load_in_slices`: its nodes (a node's nested
    nodes before the node) ``nodes`` at a time, then the graph itself."""
    order = graph.nodes_in_order()[::-1]  # pre-order reversed: every node after its own
    buffer = io.BytesIO()
    pickler = pickle.Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL)
    slices: list[bytes] = []

    def cut(value: Any) -> None:
        pickler.dump(value)
        slices.append(buffer.getvalue())
        buffer.seek(0)
        buffer.truncate()

    for start in range(0, len(order), nodes):
        cut(order[start : start + nodes])
    cut(graph)
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


def load_in_slices(slices: Sequence[bytes], pause: float = 0.0005) -> Any:
    """The graph :func:`dump_in_slices` pickled, unpickled a slice at a time with a
    ``pause`` between two slices (other threads' turn at the GIL); each slice is let go
    of once read when ``slices`` is a list (it is emptied)."""
    count = len(slices)
    stream = io.BufferedReader(_Slices(slices if isinstance(slices, list) else list(slices)))
    unpickler = pickle.Unpickler(stream)
    value: Any = None
    # Built with the cyclic collector running, young collections would rescan the new
    # objects again and again (see remote_session._receive).
    with collector_paused():
        for i in range(count):
            value = unpickler.load()
            if i + 1 < count:
                time.sleep(pause)
    return value
