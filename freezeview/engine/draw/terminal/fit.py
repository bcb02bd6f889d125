"""The graph view fitted to its pane: compact boxes, and long chains folded into columns.

At a module level a model is mostly one long chain of boxes (a ResNet-50: the stem's
ops, ``layer1`` ... ``layer4``, the head), and laid out top to bottom it is many
screens high however small its boxes are. When the app's graph view says how big its pane is,
:func:`~freezeview.engine.draw.terminal.layout.layout_dot` draws each box with its title line
alone (a module box: its name and op count) and folds the picture into columns: the
boxes' ranks (the longest path from an input) are stacked from the top until the next
rank would pass the pane's height, and the next rank starts a new column to the right.
Edges between columns are handed to dot with ``constraint=false``, so dot ranks each
column from the top again and routes those edges from one column's foot to the next
column's head.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from ..folding.drawing import Box

__all__ = ["compact_lines", "fold_columns"]


def compact_lines(node: Box) -> tuple[str, ...]:
    """The one label line of ``node`` in a fitted layout: its title, and for a module box
    its first row (the op count, or the diff's counts)."""
    if node.role == "scope" and node.rows:
        return (f"{node.title} · {node.rows[0]}",)
    return (node.title,)


def fold_columns(
    heights: Mapping[str, int], edges: Iterable[tuple[str, str]], rows: int, gap: int
) -> dict[str, int]:
    """Each box's column when the picture is folded to ``rows`` rows.

    Args:
        heights: box key -> its height in rows.
        edges: (tail, head) keys; a cycle (module boxes feeding each other) is broken
            where it is met.
        rows: the pane's height.
        gap: rows between two ranks.

    Returns:
        Box key -> column (0 for every box when the picture fits unfolded).
    """
    succ: dict[str, list[str]] = {k: [] for k in heights}
    indegree = dict.fromkeys(heights, 0)
    for tail, head in edges:
        if tail != head and tail in succ and head in succ:
            succ[tail].append(head)
            indegree[head] += 1
    rank = dict.fromkeys(heights, 0)
    ready = [k for k in heights if indegree[k] == 0]
    done: set[str] = set()
    pending = list(heights)
    while len(done) < len(heights):
        if not ready:  # a cycle: its first box left starts again from its known rank
            ready = [next(k for k in pending if k not in done)]
        key = ready.pop()
        if key in done:
            continue
        done.add(key)
        for head in succ[key]:
            rank[head] = max(rank[head], rank[key] + 1)
            indegree[head] -= 1
            if indegree[head] == 0:
                ready.append(head)
    tallest: dict[int, int] = {}
    for key, r in rank.items():
        tallest[r] = max(tallest.get(r, 0), heights[key])
    column_of_rank: dict[int, int] = {}
    column, used = 0, 0
    for r in sorted(tallest):
        need = tallest[r] + (gap if used else 0)
        if used and used + need > rows:
            column, used = column + 1, 0
            need = tallest[r]
        used += need
        column_of_rank[r] = column
    return {key: column_of_rank[r] for key, r in rank.items()}
