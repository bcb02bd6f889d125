"""Render graph snapshots and diffs as pictures (SVG, PNG or DOT) with Graphviz.

Rendering is where users of freezeview wait (DESIGN.md: freezing takes 0.05-0.25 s,
a naive picture of the same graph minutes), so it is built to stay fast at any size:

- constants, constant lists and submodule reads are drawn inside their users, and
  module scopes are clusters (:mod:`freezeview.engine.collapse`);
- above a node budget the picture is collapsed to one box per submodule, at the finest
  level that fits the budget; ``expand`` opens chosen scopes down to their ops;
- ``dot`` runs in a subprocess with a timeout. If it overruns, freezeview draws the
  next coarser level instead and says so in :attr:`RenderResult.notes`; output files
  are written only from a finished layout, atomically, so nothing partial is left.
- a picture far above what ``dot`` lays out within the timeout (``RenderOptions.max_boxes``,
  by default :func:`box_ceiling` of the timeout) is not handed to ``dot`` at all: it
  goes straight to the coarser level an overrun would have given, with a note.

Layout engine and settings were chosen by measurement (``benchmarks/bench_render.py``,
figures in docs/notes/render.md): plain ``dot`` with module clusters. On the fully
expanded inlined ResNet-50-style graph (1,462 boxes) it took 0.45 s, against 1.26 s with
``newrank=true`` and 1.05 s with ``newrank`` plus ``ordering=out``; on collapsed
pictures all settings tie (0.08 s). ``sfdp`` (0.55 s) ignores clusters and loses the
top-to-bottom data flow, so freezeview collapses big graphs instead of switching engine.
The settings stay selectable through :class:`GraphAttrs` and ``RenderOptions.engine``.

Graphviz is run directly with :mod:`subprocess` rather than ``graphviz.pipe`` because
the package offers no timeout, and a run that never finishes is exactly the failure
this module has to survive.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import atomic
from .collapse import (
    ViewGraph,
    box_prefix,
    build_view,
    count_at_level,
    drawn_scope_counts,
    drawn_scopes,
    levels,
    opened_scopes,
)
from .diff import GraphDiff
from .errors import FreezeviewError, OutputError
from .render_dot import GraphAttrs, dot_source
from .snapshot import GraphSnapshot

__all__ = [
    "FORMATS",
    "DotTimeoutError",
    "GraphvizMissingError",
    "Overruns",
    "Picture",
    "RenderOptions",
    "RenderResult",
    "auto_level",
    "box_ceiling",
    "changed_splits",
    "diff_picture",
    "find_dot",
    "level_name",
    "render_diff",
    "render_picture",
    "render_side_by_side",
    "render_snapshot",
    "run_dot",
    "side_by_side_picture",
    "snapshot_picture",
]

#: Output formats: ``dot`` writes the DOT text and needs no Graphviz.
FORMATS = ("svg", "png", "dot")

INSTALL_HINT = (
    "Graphviz's `dot` program is not installed; install it (Debian/Ubuntu: "
    "`apt-get install graphviz`, macOS: `brew install graphviz`) to draw pictures."
)


class GraphvizMissingError(FreezeviewError):
    """``dot`` is not on PATH (or not at the configured path)."""

    exit_code = 1


class DotTimeoutError(FreezeviewError):
    """Graphviz did not finish a layout within the time allowed."""

    exit_code = 1


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


@dataclass(frozen=True)
class RenderOptions:
    """How to draw.

    Attributes:
        level: collapse level: ``"auto"`` (finest level within ``budget``), an int box
            depth (1: one box per child of the root module) or None for every op.
        budget: most boxes drawn at the automatic level.
        expand: scopes opened down to their ops whatever the level (``layer3.1``).
        constants: ``fold`` (rows inside their users), ``hide-trivial`` (folded, and
            None/bools/small ints left out) or ``nodes`` (one node each; slow).
        edge_labels: label edges whose type carries a shape.
        reasons: attribute path -> why freezing kept it, for the kept-attribute tooltips.
        engine: Graphviz layout program (``dot``; ``sfdp`` for experiments).
        timeout: seconds one Graphviz run may take before freezeview falls back.
        max_boxes: most boxes handed to Graphviz; a picture above it is drawn at the
            coarser level an overrun would give, without running Graphviz. None (the
            default): :func:`box_ceiling` of ``timeout``, so raising the timeout raises it.
        dot_command: path of the Graphviz executable; default: ``engine`` on PATH.
        graph: graph-wide layout settings.
        modules: dotted paths of the model's submodules
            (:func:`~freezeview.engine.collapse.module_paths`); with them, modules torch
            names by a ModuleList index alone (``0.self_attn``) are drawn under their
            real path (``layers.0.self_attn``), which is also what ``expand`` takes.
        open_changed: at the automatic level, a diff picture opens the module boxes
            where something changed, one level at a time and most changes first, for
            as long as the picture stays within ``budget``.
        overruns: shared by the pictures of one run (an export passes one) so that a
            picture at least as big as one that overran is drawn coarser at once.
    """

    level: int | str | None = "auto"
    budget: int = 300
    expand: tuple[str, ...] = ()
    constants: str = "fold"
    edge_labels: bool = True
    reasons: Mapping[str, str] | None = None
    engine: str = "dot"
    timeout: float = 30.0
    max_boxes: int | None = None
    dot_command: str | None = None
    graph: GraphAttrs = field(default_factory=GraphAttrs)
    modules: frozenset[str] | None = None
    open_changed: bool = True
    overruns: Overruns | None = None

    @property
    def ceiling(self) -> int:
        """The box ceiling in force: ``max_boxes``, or :func:`box_ceiling` of ``timeout``."""
        return self.max_boxes if self.max_boxes is not None else box_ceiling(self.timeout)


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


@dataclass
class RenderResult:
    """What :func:`render_picture` wrote and how long each part took.

    Attributes:
        path: the file written.
        format: ``svg``, ``png`` or ``dot``.
        level: the collapse level finally drawn.
        requested_level: the level first tried.
        nodes: boxes drawn.
        edges: edges drawn.
        build_seconds: freezeview's time choosing the level and building views and DOT
            (all attempts).
        dot_seconds: Graphviz's time (all attempts, the overrun ones included).
        write_seconds: time writing the file.
        size: bytes written.
        notes: sentences for the user (fallbacks taken).
        split: module boxes opened one level because something in them changed.
        views: the view graphs drawn, whose node keys are the SVG elements' ids (the
            review page describes each box from them).
    """

    path: Path
    format: str
    level: int | None
    requested_level: int | None
    nodes: int
    edges: int
    build_seconds: float
    dot_seconds: float
    write_seconds: float
    size: int
    notes: list[str] = field(default_factory=list)
    split: tuple[str, ...] = ()
    views: list[ViewGraph] = field(default_factory=list, repr=False)

    @property
    def total_seconds(self) -> float:
        """Build + Graphviz + write time."""
        return self.build_seconds + self.dot_seconds + self.write_seconds


def level_name(level: int | None) -> str:
    """``"every op"`` or ``"scopes 2 deep"``, for messages."""
    return "every op" if level is None else f"one box per module {level} level(s) deep"


def find_dot(options: RenderOptions) -> str:
    """Path of the Graphviz program to run.

    Raises:
        GraphvizMissingError: it is not installed.
    """
    command = options.dot_command or options.engine
    found = shutil.which(command)
    if found is None:
        raise GraphvizMissingError(INSTALL_HINT)
    return found


def run_dot(source: str, fmt: str, options: RenderOptions) -> bytes:
    """Lay out and render DOT ``source``; return the output bytes.

    Args:
        source: DOT text.
        fmt: ``svg`` or ``png``.
        options: engine, timeout and the program's path.

    Returns:
        The rendered bytes.

    Raises:
        GraphvizMissingError: the program is not installed.
        DotTimeoutError: it did not finish within ``options.timeout`` (it is killed).
        OutputError: it failed (its first error line is quoted).
    """
    command = find_dot(options)
    try:
        done = subprocess.run(
            [command, f"-K{options.engine}", f"-T{fmt}"],
            input=source.encode("utf-8"),
            capture_output=True,
            timeout=options.timeout,
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise DotTimeoutError(f"Graphviz did not finish within {options.timeout:g} s.") from exc
    except OSError as exc:
        raise GraphvizMissingError(f"cannot run {command}: {exc.strerror or exc}.") from exc
    if done.returncode != 0 or not done.stdout:
        first = (done.stderr.decode("utf-8", "replace").strip().splitlines() or ["no output"])[0]
        raise OutputError(f"Graphviz failed to draw the picture ({first[:200]}).")
    return done.stdout


def auto_level(
    scopes: Sequence[str] | Mapping[str, int],
    candidates: Sequence[int | None],
    options: RenderOptions,
) -> int | None:
    """The finest of ``candidates`` whose box count fits ``options.budget``.

    ``scopes``: the scope of every drawn op, or scope -> count. Explicitly expanded
    scopes are drawn in full and do not count against the budget.
    """
    fitting = candidates[0] if candidates else None
    counts = Counter(scopes)
    for level in candidates:
        if count_at_level(counts, level, options.expand) <= options.budget:
            fitting = level
        else:
            break
    return fitting


def _drawn_scopes(snapshot: GraphSnapshot, options: RenderOptions) -> Counter[str]:
    # Counted per scope: a few hundred entries where a list would hold every op.
    return drawn_scope_counts(snapshot, options.constants, modules=options.modules)


def _coarser(
    level: int | None,
    candidates: list[int | None],
    scopes: Mapping[str, int],
    expand: Sequence[str],
) -> int | bool | None:
    """The next level worth trying after ``level`` overran, or False when none is left."""
    current = count_at_level(scopes, level, expand)
    order = [c for c in candidates if c is not None]
    if level is not None:
        order = [c for c in order if c < level]
    # Skip levels that would draw nearly as many boxes: they would overrun too.
    for candidate in reversed(order):
        if count_at_level(scopes, candidate, expand) <= current * 0.6:
            return candidate
    return order[0] if order and (level is None or order[0] < level) else False


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


def render_picture(
    make: Callable[[int | None], Picture],
    path: str | os.PathLike[str],
    *,
    fmt: str,
    options: RenderOptions,
    level: int | None,
    candidates: list[int | None],
    scopes: Sequence[str] | Mapping[str, int],
    split: tuple[str, ...] = (),
) -> RenderResult:
    """Draw ``make(level)`` into ``path``, falling back to coarser levels on overrun.

    A level with more boxes than ``options.ceiling`` is not handed to Graphviz: the next
    coarser level is taken at once, as after an overrun, with a note (the coarsest level
    is always tried).

    Args:
        make: builds the picture for a level.
        path: the file to write (atomically).
        fmt: one of :data:`FORMATS`.
        options: drawing options (timeout, engine...).
        level: the level to try first.
        candidates: the levels that exist for this graph, coarsest first.
        scopes: scopes of the drawn nodes, or scope -> count (to pick fallback levels
            that are really smaller).
        split: the boxes ``make`` opens at ``level`` (recorded in the result; a fallback
            level opens none).

    Returns:
        A :class:`RenderResult`.

    Raises:
        GraphvizMissingError: ``dot`` is missing (``fmt`` other than ``dot``).
        DotTimeoutError: even the coarsest level overran.
    """
    if fmt not in FORMATS:
        raise OutputError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}.")
    notes: list[str] = []
    build = dot_time = 0.0
    current: int | None = level
    memo = options.overruns if fmt != "dot" else None
    ceiling = options.ceiling if fmt != "dot" else None
    counts = Counter(scopes)
    while True:
        # An earlier picture of this run overran with no more boxes than this one will
        # have: building it and waiting out the timeout again would only cost the user
        # time, so the coarser level is taken at once (the count is known beforehand).
        boxes = count_at_level(counts, current, options.expand)
        known = memo is not None and memo.too_big(boxes)
        nxt: int | bool | None = None
        capped = False
        if not known and ceiling is not None and boxes > ceiling:
            # Far beyond what Graphviz lays out within the timeout: skip the run it
            # could not finish. The coarsest level is always tried, since the ceiling
            # is a forecast and only the timeout is a measurement.
            nxt = _coarser(current, candidates, counts, options.expand)
            capped = nxt is not False
        picture = None if known or capped else make(current)
        if picture is not None:
            build += picture.build_seconds
            if fmt == "dot":
                data = picture.source.encode("utf-8")
                break
            start = time.perf_counter()
            try:
                data = run_dot(picture.source, fmt, options)
                dot_time += time.perf_counter() - start
                break
            except DotTimeoutError:
                dot_time += time.perf_counter() - start
                # Remembered by the same count later pictures are checked with (drawn
                # pictures hold an input/output box or two more): recording the drawn
                # count let the very same picture wait out the timeout again.
                if memo is not None:
                    memo.overran(boxes)
                boxes = picture.nodes
        if not capped:
            nxt = _coarser(current, candidates, counts, options.expand)
        if nxt is False:
            raise DotTimeoutError(
                f"Graphviz did not finish drawing {Path(path).name} within "
                f"{options.timeout:g} s even with {level_name(current)}; nothing was written.",
                hint="Raise the timeout or draw fewer scopes expanded.",
            ) from None
        assert not isinstance(nxt, bool)
        if capped:
            notes.append(
                f"{Path(path).name}: {level_name(current)} would be {boxes:,} boxes, above "
                f"the {ceiling:,}-box ceiling for a {options.timeout:g} s timeout, so freezeview "
                f"drew {level_name(nxt)} without running Graphviz; raise the timeout or the "
                "ceiling (--timeout, --max-boxes) to try it anyway."
            )
        else:
            notes.append(
                f"{Path(path).name}: Graphviz did not finish within {options.timeout:g} s "
                f"with {level_name(current)} ({boxes} boxes"
                + ("; a picture that size had already overrun" if known else "")
                + f"); drew {level_name(nxt)} instead."
            )
        current = nxt
    assert picture is not None
    start = time.perf_counter()
    atomic.write_bytes(path, data)
    write = time.perf_counter() - start
    return RenderResult(
        path=Path(path),
        format=fmt,
        level=current,
        requested_level=level,
        nodes=picture.nodes,
        edges=picture.edges,
        build_seconds=build,
        dot_seconds=dot_time,
        write_seconds=write,
        size=len(data),
        notes=notes,
        split=split if current == level else (),
        views=picture.views,
    )


def _plan(
    snapshot: GraphSnapshot, options: RenderOptions
) -> tuple[int | None, list[int | None], Counter[str]]:
    start_scopes = _drawn_scopes(snapshot, options)
    candidates = levels(snapshot, options.constants, options.modules)
    if options.level == "auto":
        level = auto_level(start_scopes, candidates, options)
    elif isinstance(options.level, str):
        raise ValueError(f"unknown level {options.level!r}")
    else:
        level = options.level
    return level, candidates, start_scopes


def changed_splits(
    diff: GraphDiff,
    scopes: Sequence[str] | Mapping[str, int],
    level: int | None,
    options: RenderOptions,
) -> tuple[str, ...]:
    """Module boxes of a diff picture worth opening one level, within the budget.

    At ``level`` every module box where something was added, removed or changed is a
    candidate; the boxes with the most changes are opened first, and each opened box's
    changed sub-boxes become candidates in turn, as long as the whole picture stays
    within ``options.budget`` boxes. A reviewer thus sees, at the default level, how
    far down freezing acted, not only that it did.

    Args:
        diff: the diff drawn.
        scopes: the scope of every drawn op (after-graph and ghosts), or scope -> count,
            as the level was chosen from.
        level: the collapse level drawn.
        options: budget, expanded scopes, constants mode and module paths.

    Returns:
        The scopes to open (``build_view(split=...)``), in the order they were opened.
    """
    if level is None:
        return ()
    changed_ids = set(diff.added) | set(diff.changed)
    changed = drawn_scopes(diff.after, options.constants, changed_ids, options.modules)
    changed += drawn_scopes(diff.before, options.constants, diff.removed, options.modules)
    if not changed:
        return ()
    per_scope = Counter(changed)
    all_scopes = Counter(scopes)
    for scope in per_scope:
        all_scopes.setdefault(scope, 0)  # counted for the order of opening, drawn 0 times
    expand = options.expand
    opened: list[str] = []
    tried: set[str] = set()
    # Where each scope's ops go at the current opening, recomputed only when a box is
    # opened: opening box B moves only the scopes that were in B (a scope's box is the
    # first prefix not yet opened), so each candidate's count is the current count
    # with B's scopes redistributed. The same numbers as count_at_level on every
    # candidate, without walking every scope of a 17k-node graph per candidate.
    split = tuple(opened)
    now_open = opened_scopes(expand, split)
    box_of = {scope: box_prefix(scope, level, expand, now_open) for scope in all_scopes}
    while True:
        # Changes per box at the current opening; the busiest untried box goes first.
        boxes: Counter[str] = Counter()
        for scope, n in per_scope.items():
            box = box_of[scope]
            if box is not None and box not in tried:
                boxes[box] += n
        if not boxes:
            return split
        box = min(boxes, key=lambda b: (-boxes[b], b))
        tried.add(box)
        if _count_opening(all_scopes, box_of, box, level, expand, now_open) <= options.budget:
            opened.append(box)
            split = tuple(opened)
            now_open = opened_scopes(expand, split)
            box_of = {
                scope: box_prefix(scope, level, expand, now_open) if b == box else b
                for scope, b in box_of.items()
            }


def _count_opening(
    counts: Mapping[str, int],
    box_of: Mapping[str, str | None],
    box: str,
    level: int | None,
    expand: Sequence[str],
    now_open: set[str],
) -> int:
    """``count_at_level`` of the current opening plus ``box`` (see :func:`changed_splits`)."""
    opened = now_open | {box}
    ops = 0
    boxes: set[str] = set()
    for scope, n in counts.items():
        if not n:
            continue
        b = box_of[scope]
        if b == box:
            b = box_prefix(scope, level, expand, opened)
        if b is None:
            ops += n
        else:
            boxes.add(b)
    return ops + len(boxes)


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
    options = options or RenderOptions()
    start = time.perf_counter()
    level, candidates, scopes = _plan(snapshot, options)
    planned = time.perf_counter() - start
    result = render_picture(
        lambda lv: snapshot_picture(snapshot, options, lv, title=title),
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes,
    )
    # Choosing the level and the boxes to open is view building too.
    result.build_seconds += planned
    return result


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
    options = options or RenderOptions()
    start = time.perf_counter()
    scopes = _drawn_scopes(diff.after, options) + _ghost_scopes(diff, options)
    candidates = _merge_levels(
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

    planned = time.perf_counter() - start
    result = render_picture(
        make,
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes,
        split=split,
    )
    # Choosing the level and the boxes to open is view building too.
    result.build_seconds += planned
    return result


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
    options = options or RenderOptions()
    start = time.perf_counter()
    level_a, cand_a, scopes_a = _plan(diff.after, options)
    _level_b, cand_b, scopes_b = _plan(diff.before, options)
    candidates = _merge_levels(cand_a, cand_b)
    level = level_a
    if options.level == "auto":
        level = auto_level(scopes_a + scopes_b, candidates, options)
    planned = time.perf_counter() - start
    result = render_picture(
        lambda lv: side_by_side_picture(diff, options, lv, title=title),
        path,
        fmt=fmt,
        options=options,
        level=level,
        candidates=candidates,
        scopes=scopes_a + scopes_b,
    )
    # Choosing the level and the boxes to open is view building too.
    result.build_seconds += planned
    return result


def _ghost_scopes(diff: GraphDiff, options: RenderOptions) -> Counter[str]:
    return drawn_scope_counts(diff.before, options.constants, diff.removed, options.modules)


def _merge_levels(a: list[int | None], b: list[int | None]) -> list[int | None]:
    ints = sorted({x for x in (*a, *b) if x is not None})
    return [*ints, None]
