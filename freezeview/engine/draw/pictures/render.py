"""Pictures drawn by Graphviz and written to a file: SVG, PNG or DOT, of a snapshot, a diff
or both sides of a diff.

``start_snapshot``, ``start_diff`` and ``start_side_by_side`` choose the level a snapshot,
a diff or both sides are drawn at (:mod:`~freezeview.engine.draw.folding.plan`), build that
level's picture (:mod:`.picture`) and hand it to a
:class:`~freezeview.engine.draw.dot.queue.DotQueue` (or to Graphviz now); each returns a
:class:`PendingPicture` whose ``result()`` waits for the layout, draws coarser levels on
an overrun and writes the file. ``render_snapshot``, ``render_diff`` and
``render_side_by_side`` are the same, waited for.

Rendering is where users of freezeview wait (DESIGN.md: freezing takes 0.05-0.25 s,
a naive picture of the same graph minutes), so it is built to stay fast at any size:

- constants, constant lists and submodule reads are drawn inside their users, and
  module scopes are clusters (:mod:`freezeview.engine.draw.folding.build`);
- above a node budget the picture is collapsed to one box per submodule, at the finest
  level that fits the budget; ``expand`` opens chosen scopes down to their ops
  (:mod:`freezeview.engine.draw.folding.plan` chooses the level and the boxes to open);
- ``dot`` runs in a subprocess with a timeout (:mod:`freezeview.engine.draw.dot.run`). If
  it overruns, or fails (Graphviz has layout bugs: "Error: trouble in init_rank" on some
  graphs), freezeview draws the next coarser level instead and says so in
  :attr:`RenderResult.notes`; output files are written only from a finished layout,
  atomically, so nothing partial is left.
- a picture far above what ``dot`` lays out within the timeout (``RenderOptions.max_boxes``,
  by default :func:`~freezeview.engine.draw.dot.ceiling.box_ceiling` of the timeout) is
  not handed to ``dot`` at all: it goes straight to the coarser level an overrun would
  have given, with a note.

Layout engine and settings were chosen by measurement (``benchmarks/bench_render.py``,
figures in docs/notes/render.md): plain ``dot`` with module clusters; ``newrank`` and
``ordering=out`` were slower on big expanded graphs and tie on collapsed ones, and
``sfdp`` ignores clusters and loses the top-to-bottom data flow, so freezeview collapses
big graphs instead of switching engine. The settings stay selectable through
:class:`~freezeview.engine.draw.dot.text.GraphAttrs` and ``RenderOptions.engine``.
"""

from __future__ import annotations

import os
import time
from collections import Counter
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from ...diff import GraphDiff
from ...graph import GraphSnapshot
from ...plumbing import OutputError, atomic
from ..dot.ceiling import HOPELESS_BENDS_PER_BOX, bend_ceiling
from ..dot.queue import DotJob, DotQueue
from ..dot.run import DotFailedError, DotTimeoutError, run_dot
from ..folding.drawing import Drawing
from ..folding.plan import (
    RenderOptions,
    auto_level,
    changed_splits,
    coarser_level,
    ghost_scopes,
    level_name,
    merge_levels,
    plan_picture,
    scopes_drawn,
)
from ..folding.prepared import levels
from ..folding.scopes import count_at_level
from .overlay import Overlay
from .picture import Picture, diff_picture, side_by_side_picture, snapshot_picture
from .svg_fit import fit_to_window

__all__ = [
    "FORMATS",
    "LevelAttempts",
    "PendingPicture",
    "RenderResult",
    "level_attempts",
    "render_diff",
    "render_side_by_side",
    "render_snapshot",
    "start_diff",
    "start_side_by_side",
    "start_snapshot",
]

#: Output formats: ``dot`` writes the DOT text and needs no Graphviz.
FORMATS = ("svg", "png", "dot")


@dataclass
class RenderResult:
    """What drawing a picture wrote and how long each part took.

    Attributes:
        path: the file written.
        format: ``svg``, ``png`` or ``dot``.
        level: the collapse level finally drawn.
        requested_level: the level first tried.
        nodes: boxes drawn.
        edges: edges drawn.
        build_seconds: freezeview's time choosing the level and building drawings and DOT
            (all attempts).
        dot_seconds: Graphviz's time (all attempts, the overrun ones included).
        write_seconds: time writing the file.
        size: bytes written.
        notes: sentences for the user (fallbacks taken).
        split: module boxes opened one level because something in them changed.
        drawings: the drawings drawn, whose box keys are the SVG elements' ids (the
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
    drawings: list[Drawing] = field(default_factory=list, repr=False)

    @property
    def total_seconds(self) -> float:
        """Build + Graphviz + write time."""
        return self.build_seconds + self.dot_seconds + self.write_seconds


class _AlreadyOverran(DotTimeoutError):
    """Not run: by the time its turn came, a picture this size had overrun."""


@dataclass(frozen=True)
class _Attempt:
    """A picture to lay out, and whether an overrun since it was built makes that moot."""

    picture: Picture
    overran_meanwhile: Callable[[], bool]
    #: remembers the overrun at once, for pictures queued behind this one
    overran: Callable[[], None]


@dataclass(frozen=True)
class _DotOutcome:
    """What one Graphviz run gave the picture it drew: its output or its error."""

    data: bytes
    seconds: float
    error: DotTimeoutError | DotFailedError | None = None


#: :func:`level_attempts`' generator: yields pictures to lay out, is sent how Graphviz did.
LevelAttempts = Generator[_Attempt, _DotOutcome, RenderResult]


def level_attempts(
    make: Callable[[int | None], Picture],
    path: str | os.PathLike[str],
    *,
    fmt: str,
    options: RenderOptions,
    level: int | None,
    candidates: list[int | None],
    scopes: Sequence[str] | Mapping[str, int],
    split: tuple[str, ...] = (),
) -> LevelAttempts:
    """Draw ``make(level)`` into ``path``, falling back to coarser levels on overrun: the
    levels one at a time, yielding each picture to lay out and sent how Graphviz did on
    it; returns the result once a picture was written.

    A level with more boxes than ``options.ceiling`` is not handed to Graphviz: the next
    coarser level is taken at once, as after an overrun, with a note (the coarsest level
    is always tried). A level Graphviz fails on (its layout bugs hit some graphs and not
    others) falls back the same way.

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

    Who runs Graphviz (here and now, or a :class:`DotQueue` in the background) is the
    driver's choice (:class:`PendingPicture`); the levels tried are the same either way.
    """
    if fmt not in FORMATS:
        raise OutputError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}.")
    notes: list[str] = []
    build = dot_time = 0.0
    current: int | None = level
    memo = options.overruns if fmt != "dot" else None
    ceiling = options.ceiling if fmt != "dot" else None
    counts = Counter(scopes)
    failed: DotFailedError | None = None
    while True:
        # An earlier picture of this run overran with no more boxes than this one will
        # have: building it and waiting out the timeout again would only cost the user
        # time, so the coarser level is taken at once (the count is known beforehand).
        boxes = count_at_level(counts, current, options.expand)
        # Never the coarsest level, though: it is always tried (its picture is the last
        # chance, and the smallest picture that overran may have been a harder graph).
        coarsest = coarser_level(current, candidates, counts, options.expand) is False
        known = memo is not None and memo.too_big(boxes) and not coarsest
        nxt: int | bool | None = None
        capped = False
        if not known and ceiling is not None and boxes > ceiling:
            # Far beyond what Graphviz lays out within the timeout: skip the run it
            # could not finish. The coarsest level is always tried, since the ceiling
            # is a forecast and only the timeout is a measurement.
            nxt = coarser_level(current, candidates, counts, options.expand)
            capped = nxt is not False
        picture = None if known or capped else make(current)
        bends = 0
        if picture is not None and ceiling is not None and not coarsest:
            # Long edges: boxes few enough, but edges spanning most of the picture
            # (a value every layer of a deep stack reads), which Graphviz lays out as
            # chains of virtual boxes. Far past what it finishes in time: no run.
            bends = picture.bends
            if bends > bend_ceiling(ceiling) and bends > HOPELESS_BENDS_PER_BOX * picture.nodes:
                nxt = coarser_level(current, candidates, counts, options.expand)
                capped = nxt is not False
                if capped:
                    build += picture.build_seconds
                    boxes, picture = picture.nodes, None
        if picture is not None:
            build += picture.build_seconds
            if fmt == "dot":
                data = picture.source.encode("utf-8")
                break
            checked = boxes

            def overran_meanwhile(checked: int = checked, last: bool = coarsest) -> bool:
                # Laid out later than built (in the background): a picture this size
                # may have overrun meanwhile; never the coarsest level (see above).
                return memo is not None and not last and memo.too_big(checked)

            def record(checked: int = checked) -> None:
                if memo is not None:
                    memo.overran(checked)

            outcome = yield _Attempt(picture, overran_meanwhile, record)
            dot_time += outcome.seconds
            if outcome.error is None:
                data = outcome.data
                break
            if isinstance(outcome.error, _AlreadyOverran):
                known = True
                failed = None
            elif isinstance(outcome.error, DotTimeoutError):
                # Remembered by the same count later pictures are checked with (drawn
                # pictures hold an input/output box or two more): recording the drawn
                # count let the very same picture wait out the timeout again.
                if memo is not None:
                    memo.overran(boxes)
                boxes = picture.nodes
                failed = None
            else:
                # A layout bug on this graph, not its size: nothing to remember for
                # other pictures; another level is another graph.
                failed = outcome.error
        if not capped:
            nxt = coarser_level(current, candidates, counts, options.expand)
        if nxt is False and failed is not None:
            raise DotFailedError(
                f"Graphviz failed to draw {Path(path).name} ({failed.dot_error}) even with "
                f"{level_name(current)}; nothing was written.",
                dot_error=failed.dot_error,
                hint="Draw other levels or scopes (--level, --expand).",
            ) from None
        if nxt is False:
            raise DotTimeoutError(
                f"Graphviz did not finish drawing {Path(path).name} within "
                f"{options.timeout:g} s even with {level_name(current)}; nothing was written.",
                hint="Raise the timeout or draw fewer scopes expanded.",
            ) from None
        assert not isinstance(nxt, bool)
        if failed is not None:
            notes.append(
                f"{Path(path).name}: Graphviz failed with {level_name(current)} "
                f"({failed.dot_error}); drew {level_name(nxt)} instead."
            )
            failed = None
        elif capped and bends:
            notes.append(
                f"{Path(path).name}: {level_name(current)} has edges that cross its whole "
                f"height ({bends:,} bends for {boxes:,} boxes), which Graphviz could not lay "
                f"out within {options.timeout:g} s, so freezeview drew {level_name(nxt)} "
                "without running Graphviz; raise the timeout or the ceiling (--timeout, "
                "--max-boxes) to try it anyway."
            )
        elif capped:
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
    if fmt == "svg":
        data = fit_to_window(data)  # whole in a browser, not its top-left corner
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
        drawings=picture.drawings,
    )


class PendingPicture:
    """A picture whose first level is built and handed to Graphviz, maybe still drawing.

    :meth:`result` waits for Graphviz, draws the coarser levels an overrun or a failure
    calls for, writes the file and returns its :class:`RenderResult`. The
    ``start_*`` functions (in this module) make one; the ``render_*`` functions are
    ``start_*(...).result()``.
    """

    def __init__(
        self,
        attempts: LevelAttempts,
        dots: DotQueue,
        fmt: str,
        options: RenderOptions,
        planned: float = 0.0,
    ) -> None:
        self._attempts = attempts
        self._dots = dots
        self._fmt = fmt
        self._options = options
        self._planned = planned
        self._done: RenderResult | None = None
        self._job: DotJob | None = None
        self._next(None)

    def _next(self, outcome: _DotOutcome | None) -> None:
        """Send ``outcome`` on, and hand the next picture asked for to Graphviz."""
        try:
            attempt = next(self._attempts) if outcome is None else self._attempts.send(outcome)
        except StopIteration as stop:
            self._done = stop.value
            self._job = None
            return
        source, fmt, options = attempt.picture.source, self._fmt, self._options
        skip, overran = attempt.overran_meanwhile, attempt.overran

        def run() -> bytes:
            if skip():
                raise _AlreadyOverran("a picture that size had already overrun")
            try:
                # run_dot is looked up when the job runs (tests stand in for it).
                return run_dot(source, fmt, options)
            except DotTimeoutError:
                overran()  # now, not when the export collects this picture
                raise

        self._job = self._dots.submit(run)

    def result(self) -> RenderResult:
        """The picture written (after Graphviz finished; coarser levels drawn as needed).

        Raises:
            GraphvizMissingError: ``dot`` is missing (a format other than ``dot``).
            DotTimeoutError: even the coarsest level overran.
            DotFailedError: Graphviz failed at the coarsest level too (nothing is written).
        """
        while self._done is None:
            job = self._job
            assert job is not None
            try:
                data = self._dots.wait(job)
            except (DotTimeoutError, DotFailedError) as exc:
                self._next(_DotOutcome(b"", job.seconds, exc))
            else:
                self._next(_DotOutcome(data, job.seconds))
        # Choosing the level and the boxes to open is drawing work too (counted once).
        result = self._done
        result.build_seconds += self._planned
        self._planned = 0.0
        return result


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
    overlay: Overlay | None = None,
) -> PendingPicture:
    """:func:`render_snapshot`, its Graphviz run handed to ``dots`` (None: run it now);
    ``overlay``: the times and marks drawn over its boxes (:mod:`.overlay`)."""
    options = options or RenderOptions()
    start = time.perf_counter()
    level, candidates, scopes = plan_picture(snapshot, options)
    attempts = level_attempts(
        lambda lv: snapshot_picture(snapshot, options, lv, title=title, overlay=overlay),
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
    overlay: Overlay | None = None,
) -> PendingPicture:
    """:func:`render_diff`, its Graphviz run handed to ``dots`` (None: run it now);
    ``overlay``: the times and marks drawn over its boxes (:mod:`.overlay`)."""
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
        chosen = split if lv == level else ()
        return diff_picture(diff, options, lv, title=title, split=chosen, overlay=overlay)

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
    overlays: Sequence[Overlay | None] = (),
) -> PendingPicture:
    """:func:`render_side_by_side`, its Graphviz run handed to ``dots`` (None: run it now);
    ``overlays``: the before side's and the after side's (:mod:`.overlay`)."""
    options = options or RenderOptions()
    start = time.perf_counter()
    level_a, cand_a, scopes_a = plan_picture(diff.after, options)
    _level_b, cand_b, scopes_b = plan_picture(diff.before, options)
    candidates = merge_levels(cand_a, cand_b)
    level = level_a
    if options.level == "auto":
        level = auto_level(scopes_a + scopes_b, candidates, options)
    attempts = level_attempts(
        lambda lv: side_by_side_picture(diff, options, lv, title=title, overlays=overlays),
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
