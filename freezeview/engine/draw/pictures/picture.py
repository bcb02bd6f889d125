"""Pictures: the DOT text of one snapshot, of a diff, or of both sides of a diff.

Each builds the drawings at a given level
(:func:`~freezeview.engine.draw.folding.build.build_drawing`) and writes them as DOT
(:func:`~.dot_source.dot_source`); choosing the level is
:mod:`~freezeview.engine.draw.folding.plan`'s, running Graphviz :mod:`.render`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

from ...diff import GraphDiff
from ...graph import GraphSnapshot
from ..dot.ceiling import edge_bends, position_limit
from ..dot.text import GraphAttrs
from ..folding.build import build_drawing
from ..folding.drawing import Drawing
from ..folding.plan import RenderOptions
from .dot_source import dot_source
from .overlay import Overlay

__all__ = ["Picture", "diff_picture", "side_by_side_picture", "snapshot_picture"]


@dataclass
class Picture:
    """DOT text ready for Graphviz, and what it holds.

    Attributes:
        source: the DOT text.
        level: the collapse level drawn (None: every op).
        nodes: boxes drawn.
        edges: edges drawn.
        build_seconds: time spent building the drawing and the DOT text.
        drawings: the drawings (one, or two side by side).
        bends: the virtual boxes ``dot`` needs for the long edges (:func:`edge_bends`).
    """

    source: str
    level: int | None
    nodes: int
    edges: int
    build_seconds: float
    drawings: list[Drawing]
    bends: int = 0


def _bends(drawings: Sequence[Drawing]) -> int:
    return sum(edge_bends(v.nodes, ((e.tail, e.head) for e in v.edges)) for v in drawings)


def _attrs(options: RenderOptions, bends: int) -> GraphAttrs:
    """The picture's graph settings: Graphviz's placing capped for many long edges,
    unless the caller chose its own ``nslimit``."""
    if options.graph.nslimit is not None:
        return options.graph
    limit = position_limit(bends)
    return options.graph if limit is None else replace(options.graph, nslimit=limit)


def _one_drawing(
    drawing: Drawing,
    options: RenderOptions,
    level: int | None,
    title: str,
    legend: bool,
    overlay: Overlay | None,
    start: float,
) -> Picture:
    """The picture of one drawing (its DOT, counts and build time since ``start``)."""
    bends = _bends([drawing])
    source = dot_source(
        [("", drawing)],
        title=title,
        legend=legend,
        attrs=_attrs(options, bends),
        overlays=(overlay,),
    )
    elapsed = time.perf_counter() - start
    return Picture(source, level, len(drawing.nodes), len(drawing.edges), elapsed, [drawing], bends)


def snapshot_picture(
    snapshot: GraphSnapshot,
    options: RenderOptions,
    level: int | None,
    *,
    title: str = "",
    overlay: Overlay | None = None,
) -> Picture:
    """DOT for one snapshot at ``level`` (kept attributes marked from ``options.reasons``;
    ``overlay``: times and marks over its boxes)."""
    start = time.perf_counter()
    drawing = build_drawing(
        snapshot,
        level=level,
        expand=options.expand,
        constants=options.constants,
        reasons=options.reasons,
        edge_labels=options.edge_labels,
        modules=options.modules,
    )
    return _one_drawing(drawing, options, level, title, bool(options.reasons), overlay, start)


def _diff_drawing(
    diff: GraphDiff, options: RenderOptions, level: int | None, side: str, **extra: Any
) -> Drawing:
    """One side of ``diff`` as a drawing, with the picture options every drawing shares."""
    return build_drawing(
        diff.after if side == "after" else diff.before,
        level=level,
        expand=options.expand,
        constants=options.constants,
        diff=diff,
        side=side,
        edge_labels=options.edge_labels,
        modules=options.modules,
        **extra,
    )


def diff_picture(
    diff: GraphDiff,
    options: RenderOptions,
    level: int | None,
    *,
    title: str = "",
    split: Sequence[str] = (),
    overlay: Overlay | None = None,
) -> Picture:
    """DOT for the after-graph of ``diff`` coloured by status, removed ops as ghosts.

    ``split`` names module boxes drawn one level finer (see :func:`changed_splits`);
    ``overlay``: times and marks over the boxes (its ``ghost_times`` for the ghosts).
    """
    start = time.perf_counter()
    drawing = _diff_drawing(diff, options, level, "after", reasons=options.reasons, split=split)
    return _one_drawing(drawing, options, level, title, True, overlay, start)


def side_by_side_picture(
    diff: GraphDiff,
    options: RenderOptions,
    level: int | None,
    *,
    title: str = "",
    overlays: Sequence[Overlay | None] = (),
) -> Picture:
    """DOT with the before-graph and the after-graph next to each other, both coloured
    (``overlays``: the before side's, then the after side's)."""
    start = time.perf_counter()
    before = _diff_drawing(diff, options, level, "before", key_prefix="b_")
    after = _diff_drawing(
        diff, options, level, "after", ghosts=False, reasons=options.reasons, key_prefix="a_"
    )
    bends = _bends([before, after])
    source = dot_source(
        [("before", before), ("after", after)],
        title=title,
        legend=True,
        attrs=_attrs(options, bends),
        overlays=overlays,
    )
    nodes = len(before.nodes) + len(after.nodes)
    edges = len(before.edges) + len(after.edges)
    elapsed = time.perf_counter() - start
    return Picture(source, level, nodes, edges, elapsed, [before, after], bends)
