"""Picture planning: how to draw, at which collapse level, with which boxes opened.

Before anything is drawn, freezeview counts the boxes each level would give (from the
scopes of the drawn ops, not from built drawings): the automatic level is the finest one
within the budget (:func:`auto_level`), a diff picture opens the boxes where freezing
acted while the budget allows (:func:`changed_splits`), and after an overrun the next
level worth trying is the one that draws markedly fewer boxes (``coarser_level``).
"""

from __future__ import annotations

import heapq
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ...diff import GraphDiff
from ...graph import GraphSnapshot
from ...plumbing import plural
from ..dot.ceiling import Overruns, box_ceiling
from ..dot.text import GraphAttrs
from .prepared import drawn_scope_counts, drawn_scopes, levels
from .scopes import box_prefix, count_at_level, opened_scopes

__all__ = ["RenderOptions", "auto_level", "changed_splits", "level_name"]


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
            (:func:`~freezeview.engine.draw.folding.scopes.module_paths`); with them, modules torch
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


def level_name(level: int | None) -> str:
    """``"every op"`` or ``"scopes 2 deep"``, for messages."""
    return "every op" if level is None else f"one box per module {plural(level, 'level')} deep"


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


def scopes_drawn(snapshot: GraphSnapshot, options: RenderOptions) -> Counter[str]:
    # Counted per scope: a few hundred entries where a list would hold every op.
    return drawn_scope_counts(snapshot, options.constants, modules=options.modules)


def coarser_level(
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


def plan_picture(
    snapshot: GraphSnapshot, options: RenderOptions
) -> tuple[int | None, list[int | None], Counter[str]]:
    start_scopes = scopes_drawn(snapshot, options)
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
        The scopes to open (``build_drawing(split=...)``), in the order they were opened.
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
    return _Openings(all_scopes, per_scope, level, options).run()


class _Openings:
    """:func:`changed_splits`'s state: where each scope's ops go at the current opening.

    Opening box B moves only the scopes that were in B (a scope's box is the first
    prefix not yet opened), so each candidate's count is the current count with B's
    scopes redistributed, and the busiest untried box comes off a heap. Each scope is
    looked at once per box it passes through, where counting every scope per candidate
    took 6 s on a 2,048-block conv stack (one box per block, each a candidate). The
    same boxes are opened in the same order as with ``count_at_level`` per candidate.
    """

    def __init__(
        self,
        counts: Mapping[str, int],
        changes: Mapping[str, int],
        level: int,
        options: RenderOptions,
    ) -> None:
        self.counts, self.changes, self.level = counts, changes, level
        self.budget, self.expand = options.budget, options.expand
        self.opened: list[str] = []
        self.now_open = opened_scopes(self.expand, ())
        self.members: dict[str, list[str]] = {}  # box -> the scopes in it
        self.live: Counter[str] = Counter()  # box -> how many of its scopes draw ops
        self.ops = 0  # ops drawn as themselves (in no box)
        self.busy: Counter[str] = Counter()  # box -> changes in it
        for scope, n in counts.items():
            self._place(scope, box_prefix(scope, level, self.expand, self.now_open), n)
        # The busiest box first, ties by name: (-changes, box) in a heap.
        self.heap = [(-n, box) for box, n in self.busy.items()]
        heapq.heapify(self.heap)

    def _place(self, scope: str, box: str | None, n: int) -> None:
        if box is None:
            self.ops += n
            return
        self.members.setdefault(box, []).append(scope)
        if n:
            self.live[box] += 1
        changed = self.changes.get(scope, 0)
        if changed:
            self.busy[box] += changed

    def run(self) -> tuple[str, ...]:
        """The boxes opened, in order."""
        tried: set[str] = set()
        while self.heap:
            minus, box = heapq.heappop(self.heap)
            if box in tried or -minus != self.busy.get(box):
                continue  # stale: the box was tried, or has more changes since
            tried.add(box)
            # Where the box's scopes go with it open, and the count of that picture.
            opened = self.now_open | {box}
            moved = [
                (scope, box_prefix(scope, self.level, self.expand, opened))
                for scope in self.members.get(box, ())
            ]
            ops = self.ops + sum(self.counts[s] for s, b in moved if b is None)
            new = {b for s, b in moved if b is not None and self.counts[s]}
            others = len(self.live) - (box in self.live)
            if ops + others + sum(1 for b in new if b not in self.live) > self.budget:
                continue
            self.opened.append(box)
            self.now_open = opened
            del self.members[box]
            self.live.pop(box, None)
            self.busy.pop(box, None)
            fresh: set[str] = set()
            for scope, b in moved:
                self._place(scope, b, self.counts[scope])
                if b is not None and self.changes.get(scope):
                    fresh.add(b)
            for b in sorted(fresh):
                heapq.heappush(self.heap, (-self.busy[b], b))
        return tuple(self.opened)


def ghost_scopes(diff: GraphDiff, options: RenderOptions) -> Counter[str]:
    return drawn_scope_counts(diff.before, options.constants, diff.removed, options.modules)


def merge_levels(a: list[int | None], b: list[int | None]) -> list[int | None]:
    ints = sorted({x for x in (*a, *b) if x is not None})
    return [*ints, None]
