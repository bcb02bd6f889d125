"""Pictures: the DOT text of one snapshot, of a diff, or of both sides of a diff.

Each builds the view graphs at a given level (:func:`~freezeview.engine.draw.collapse.build_view`)
and writes them as DOT (:func:`~freezeview.engine.draw.render_dot.dot_source`); choosing the
level is :mod:`~freezeview.engine.draw.render_plan`'s, running Graphviz
:mod:`~freezeview.engine.draw.render`'s.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..diff import GraphDiff
from ..graph import GraphSnapshot
from .collapse import build_view
from .collapse_values import ViewGraph
from .render_dot import dot_source
from .render_plan import RenderOptions

__all__ = ["Picture", "diff_picture", "side_by_side_picture", "snapshot_picture"]


@dataclass
class Picture:
    """DOT text ready for Graphviz, and what it holds.

    Attributes:
        source: the DOT text.
        level: the collapse level drawn (None: every op).
        nodes: boxes drawn.
        edges: edges drawn.
        build_seconds: time spent building the view and the DOT text.
        views: the view graphs drawn (one, or two side by side).
    """

    source: str
    level: int | None
    nodes: int
    edges: int
    build_seconds: float
    views: list[ViewGraph]


def snapshot_picture(
    snapshot: GraphSnapshot, options: RenderOptions, level: int | None, *, title: str = ""
) -> Picture:
    """DOT for one snapshot at ``level`` (kept attributes marked from ``options.reasons``)."""
    start = time.perf_counter()
    view = build_view(
        snapshot,
        level=level,
        expand=options.expand,
        constants=options.constants,
        reasons=options.reasons,
        edge_labels=options.edge_labels,
        modules=options.modules,
    )
    source = dot_source(
        [("", view)], title=title, legend=bool(options.reasons), attrs=options.graph
    )
    return Picture(
        source, level, len(view.nodes), len(view.edges), time.perf_counter() - start, [view]
    )


def _diff_view(
    diff: GraphDiff, options: RenderOptions, level: int | None, side: str, **extra: Any
) -> ViewGraph:
    """One side of ``diff`` as a drawable view, with the picture options every view shares."""
    return build_view(
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
) -> Picture:
    """DOT for the after-graph of ``diff`` coloured by status, removed ops as ghosts.

    ``split`` names module boxes drawn one level finer (see :func:`changed_splits`).
    """
    start = time.perf_counter()
    view = _diff_view(diff, options, level, "after", reasons=options.reasons, split=split)
    source = dot_source([("", view)], title=title, legend=True, attrs=options.graph)
    return Picture(
        source, level, len(view.nodes), len(view.edges), time.perf_counter() - start, [view]
    )


def side_by_side_picture(
    diff: GraphDiff, options: RenderOptions, level: int | None, *, title: str = ""
) -> Picture:
    """DOT with the before-graph and the after-graph next to each other, both coloured."""
    start = time.perf_counter()
    before = _diff_view(diff, options, level, "before", key_prefix="b_")
    after = _diff_view(
        diff, options, level, "after", ghosts=False, reasons=options.reasons, key_prefix="a_"
    )
    source = dot_source(
        [("before", before), ("after", after)], title=title, legend=True, attrs=options.graph
    )
    nodes = len(before.nodes) + len(after.nodes)
    edges = len(before.edges) + len(after.edges)
    return Picture(source, level, nodes, edges, time.perf_counter() - start, [before, after])
