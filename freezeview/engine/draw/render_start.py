"""Start a picture: plan its level, build its DOT and hand it to Graphviz.

``start_snapshot``, ``start_diff`` and ``start_side_by_side`` choose the level a snapshot,
a diff or both sides are drawn at (:mod:`.render_plan`), build that level's picture
(:mod:`.render_pictures`) and hand it to a :class:`~.dot_queue.DotQueue` (or to Graphviz
now); each returns a :class:`~.render.PendingPicture` whose ``result()`` waits for the
layout, draws coarser levels on an overrun and writes the file. ``render_snapshot``,
``render_diff`` and ``render_side_by_side`` are the same, waited for.
"""

from __future__ import annotations

import os
import time

from ..diff import GraphDiff
from ..graph import GraphSnapshot
from .dot_queue import DotQueue
from .render import LevelAttempts, PendingPicture, RenderResult, level_attempts
from .render_pictures import Picture, diff_picture, side_by_side_picture, snapshot_picture
from .render_plan import (
    RenderOptions,
    auto_level,
    changed_splits,
    ghost_scopes,
    merge_levels,
    plan_picture,
    scopes_drawn,
)
from .view_prepared import levels

__all__ = [
    "render_diff",
    "render_side_by_side",
    "render_snapshot",
    "start_diff",
    "start_side_by_side",
    "start_snapshot",
]


def _planned_start(
    attempts: LevelAttempts,
    dots: DotQueue | None,
    fmt: str,
    options: RenderOptions,
    started: float,
) -> PendingPicture:
    planned = time.perf_counter() - started
    queue = dots if dots is not None else DotQueue(background=False)
    return PendingPicture(attempts, queue, fmt, options, planned)


def start_snapshot(
    snapshot: GraphSnapshot,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
    dots: DotQueue | None = None,
) -> PendingPicture:
    """:func:`render_snapshot`, its Graphviz run handed to ``dots`` (None: run it now)."""
    options = options or RenderOptions()
    start = time.perf_counter()
    level, candidates, scopes = plan_picture(snapshot, options)
    attempts = level_attempts(
        lambda lv: snapshot_picture(snapshot, options, lv, title=title),
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes,
    )
    return _planned_start(attempts, dots, fmt, options, start)


def render_snapshot(
    snapshot: GraphSnapshot,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
) -> RenderResult:
    """Draw one graph snapshot into ``path``.

    Args:
        snapshot: the graph.
        path: output file (written atomically).
        fmt: ``svg``, ``png`` or ``dot``.
        options: drawing options.
        title: caption.

    Returns:
        A :class:`RenderResult`.

    Example::

        render_snapshot(snapshot_graph(torch.jit.freeze(m).graph), "after.svg")
    """
    return start_snapshot(snapshot, path, fmt=fmt, options=options, title=title).result()


def start_diff(
    diff: GraphDiff,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
    dots: DotQueue | None = None,
) -> PendingPicture:
    """:func:`render_diff`, its Graphviz run handed to ``dots`` (None: run it now)."""
    options = options or RenderOptions()
    start = time.perf_counter()
    scopes = scopes_drawn(diff.after, options) + ghost_scopes(diff, options)
    candidates = merge_levels(
        levels(diff.after, options.constants, options.modules),
        levels(diff.before, options.constants, options.modules),
    )
    if options.level == "auto":
        level = auto_level(scopes, candidates, options)
    elif isinstance(options.level, str):
        raise ValueError(f"unknown level {options.level!r}")
    else:
        level = options.level
    split: tuple[str, ...] = ()
    if options.level == "auto" and options.open_changed:
        split = changed_splits(diff, scopes, level, options)

    def make(lv: int | None) -> Picture:
        return diff_picture(diff, options, lv, title=title, split=split if lv == level else ())

    attempts = level_attempts(
        make,
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes,
        split=split,
    )
    return _planned_start(attempts, dots, fmt, options, start)


def render_diff(
    diff: GraphDiff,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
) -> RenderResult:
    """Draw the after-graph of ``diff`` with added ops green, changed amber, removed as ghosts.

    The level is chosen on the after-graph plus the ghosts, so a step that removed most
    of the graph still fits the budget; at the automatic level, the boxes where things
    changed are then opened while the budget allows (:func:`changed_splits`).
    """
    return start_diff(diff, path, fmt=fmt, options=options, title=title).result()


def start_side_by_side(
    diff: GraphDiff,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
    dots: DotQueue | None = None,
) -> PendingPicture:
    """:func:`render_side_by_side`, its Graphviz run handed to ``dots`` (None: run it now)."""
    options = options or RenderOptions()
    start = time.perf_counter()
    level_a, cand_a, scopes_a = plan_picture(diff.after, options)
    _level_b, cand_b, scopes_b = plan_picture(diff.before, options)
    candidates = merge_levels(cand_a, cand_b)
    level = level_a
    if options.level == "auto":
        level = auto_level(scopes_a + scopes_b, candidates, options)
    attempts = level_attempts(
        lambda lv: side_by_side_picture(diff, options, lv, title=title),
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes_a + scopes_b,
    )
    return _planned_start(attempts, dots, fmt, options, start)


def render_side_by_side(
    diff: GraphDiff,
    path: str | os.PathLike[str],
    *,
    fmt: str = "svg",
    options: RenderOptions | None = None,
    title: str = "",
) -> RenderResult:
    """Draw before and after next to each other.

    Removed ops are red on the left, added ones green on the right, changed amber on both.
    """
    return start_side_by_side(diff, path, fmt=fmt, options=options, title=title).result()
