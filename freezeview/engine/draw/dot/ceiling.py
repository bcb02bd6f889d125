"""The box ceiling: how big a picture freezeview hands to Graphviz at all.

Graphviz's layout time grows about as the cube of the boxes drawn, so a picture far
above what ``dot`` lays out within the timeout is drawn coarser without running it
(:func:`box_ceiling`), and once a picture overran, pictures at least as big are drawn
coarser at once (:class:`Overruns`).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

__all__ = [
    "BENDS_PER_BOX",
    "CEILING_BOXES",
    "CEILING_EXPONENT",
    "CEILING_TIMEOUT",
    "HOPELESS_BENDS_PER_BOX",
    "LONG_EDGE_BENDS",
    "POSITION_ITERATIONS_PER_BOX",
    "Overruns",
    "bend_ceiling",
    "box_ceiling",
    "edge_bends",
    "position_limit",
]


class Overruns:
    """What Graphviz could not draw in time, shared by the pictures of one run.

    Layout time grows with the boxes drawn, so once a picture of ``n`` boxes overran,
    freezeview goes straight to a coarser level for pictures of ``n`` boxes or more
    (an export of a 17k-node model with every op asked for would otherwise wait out the
    timeout twice per picture: 18 overruns, ~9 minutes, for nine pictures).
    """

    def __init__(self) -> None:
        self.smallest: int | None = None
        self._lock = threading.Lock()

    def too_big(self, boxes: int) -> bool:
        """True when a picture with at most ``boxes`` boxes already overran."""
        return self.smallest is not None and boxes >= self.smallest

    def overran(self, boxes: int) -> None:
        """Record that a picture of ``boxes`` boxes overran."""
        with self._lock:
            self.smallest = boxes if self.smallest is None else min(self.smallest, boxes)


#: Box ceiling at :data:`CEILING_TIMEOUT` seconds, and how it grows with the timeout
#: (see :func:`box_ceiling` for the measurements behind the three numbers).
CEILING_BOXES = 14_000
CEILING_TIMEOUT = 30.0
CEILING_EXPONENT = 1 / 3


def box_ceiling(timeout: float) -> int:
    """Most boxes freezeview hands to Graphviz when it may take ``timeout`` seconds.

    A picture above the ceiling is drawn at a coarser level without running ``dot``: it
    could not finish anyway, and waiting out the timeout first only costs the user time.
    The ceiling is deliberately generous: it sits where even the easiest big graphs
    measured would need one and a half to two times the timeout, so every picture that
    might finish still gets its chance (the timeout still catches the ones that do not;
    how hard a graph is to lay out varies more than tenfold at the same box count).

    Measured on the 2-core development machine (``benchmarks/bench_render.py --ceiling``,
    every op drawn, two runs): DenseNet-style chains, the easiest, took 1.1-1.8 s at 3.7k
    boxes, 11.6-16.0 s at 9.1k and 20.8-26.5 s at 10.9k: time grows about as boxes^3
    overall (dot is not smooth: boxes^1 to boxes^4.5 between neighbouring sizes), so
    14k boxes would take 45-55 s. ``nn.TransformerEncoder`` graphs, the hardest, took
    11-20 s at 1.5k boxes, and the 12-layer model's every-op pictures (8.3k-24k boxes)
    never finished within 30 s. Hence, with time ~ boxes^3,

        ceiling = CEILING_BOXES * (timeout / CEILING_TIMEOUT) ** CEILING_EXPONENT

    14,000 boxes at the default 30 s; eight times the timeout doubles it (``--timeout
    240``: 28,000), so a user who raises the timeout gets bigger pictures.

    Example::

        box_ceiling(30.0)   # 14000
        box_ceiling(240.0)  # 28000
    """
    return max(1, round(CEILING_BOXES * (timeout / CEILING_TIMEOUT) ** CEILING_EXPONENT))


#: Bends the ceiling allows per box of the box ceiling (see :func:`bend_ceiling`).
BENDS_PER_BOX = 0.75
#: Bends per box drawn above which a picture past the bend ceiling is not tried.
HOPELESS_BENDS_PER_BOX = 40


def bend_ceiling(boxes: int) -> int:
    """Most edge bends (:func:`edge_bends`) a picture handed to Graphviz may need, given
    the box ceiling in force: the two grow together with the timeout.

    An edge that spans ranks is laid out by ``dot`` as a chain of virtual boxes, one
    per rank crossed, and a value every layer of a deep stack reads spans them all:
    the bends grow as the square of the depth while the boxes grow linearly. Drawn one
    box per layer (level 2), ``nn.TransformerEncoder`` gave 167-229 boxes with 4.7k-5.4k
    bends at 48 layers, laid out in 1.7-3.3 s of CPU, and 215-277 boxes with 15.8k-19.9k
    bends (57-93 per box) at 96 layers, none finished within 30 s (one ran on past
    three minutes). Bends alone do not tell: the every-op pictures of a one-layer
    transformer (1,479 boxes, 21k bends, 14 per box) took 11-20 s, and DenseNet-style
    chains (10.9k boxes, 59k bends, 5 per box) 21-27 s. A picture is skipped only past
    both limits: this ceiling (10,500 bends at the 30 s timeout's 14,000-box ceiling)
    and :data:`HOPELESS_BENDS_PER_BOX` bends per box; the coarsest level is always tried.
    """
    return max(1, round(boxes * BENDS_PER_BOX))


def edge_bends(nodes: Iterable[str], edges: Iterable[tuple[str, str]]) -> int:
    """The virtual boxes ``dot`` needs for the edges of a picture, forecast.

    Boxes are ranked by the longest path from a source (back edges of cycles left out,
    as ``dot`` reverses them); an edge from rank ``r`` to rank ``s`` bends ``|s - r| - 1``
    times. Linear in the picture.
    """
    succ: dict[str, list[str]] = {node: [] for node in nodes}
    for tail, head in edges:
        if tail != head and tail in succ and head in succ:
            succ[tail].append(head)
    # Depth-first finishing order, reversed: a topological order of the acyclic part.
    finished: list[str] = []
    state: dict[str, bool] = {}  # False: on the stack, True: finished
    for root in succ:
        if root in state:
            continue
        state[root] = False
        stack = [(root, iter(succ[root]))]
        while stack:
            node, todo = stack[-1]
            for nxt in todo:
                if nxt not in state:
                    state[nxt] = False
                    stack.append((nxt, iter(succ[nxt])))
                    break
            else:
                stack.pop()
                state[node] = True
                finished.append(node)
    order = {node: i for i, node in enumerate(reversed(finished))}
    rank = dict.fromkeys(succ, 0)
    for node in reversed(finished):
        for nxt in succ[node]:
            if order[nxt] > order[node] and rank[nxt] <= rank[node]:
                rank[nxt] = rank[node] + 1
    return sum(
        max(0, abs(rank[nxt] - rank[node]) - 1) for node, heads in succ.items() for nxt in heads
    )


#: Bends (:func:`edge_bends`) from which Graphviz's placing of boxes across a rank is
#: capped (see :func:`position_limit`).
LONG_EDGE_BENDS = 2_000
#: The cap: network simplex iterations per box drawn (Graphviz's ``nslimit``).
POSITION_ITERATIONS_PER_BOX = 10.0


def position_limit(bends: int) -> float | None:
    """Graphviz's ``nslimit`` for a picture with ``bends`` edge bends, or None (no cap).

    ``dot`` places the boxes of each rank by network simplex on a graph that holds every
    virtual box of every long edge; Graphviz caps its iterations at ``nslimit`` times
    the boxes drawn. Uncapped, the x placement of ``nn.TransformerEncoder`` pictures
    drawn one box per layer was nearly all of their layout: 48 layers (167-229 boxes,
    4.7k-5.4k bends) 1.4-3.2 s of CPU, 96 layers 150 s. Capped at
    :data:`POSITION_ITERATIONS_PER_BOX` per box they took 0.6-0.8 s and 4.4 s, and drew
    the same boxes and ranks (the layer chain straight, the picture up to a tenth
    narrower). Pictures with fewer bends than :data:`LONG_EDGE_BENDS` finish their
    placing in far fewer iterations and are left as Graphviz draws them.
    """
    return POSITION_ITERATIONS_PER_BOX if bends >= LONG_EDGE_BENDS else None
