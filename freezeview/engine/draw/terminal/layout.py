"""A snapshot (or a diff) laid out by Graphviz on a grid of terminal cells.

The app's graph view draws the same boxes as the SVGs
(:func:`~freezeview.engine.draw.folding.build.build_drawing`, the same levels and module
folding, the same opened boxes in a diff) with the terminal's characters. Graphviz does
the layout: every box is handed to ``dot`` as a fixed-size rectangle measured in cells
(one column is :data:`COL_PT` points wide, one row :data:`ROW_PT` points high, the shape
of a terminal cell), and ``dot -Tjson0`` gives back where each box and cluster goes and
the route of each edge. Those are turned into cells here: boxes keep at least one free
column and row between them (``nodesep``/``ranksep`` are two cells, so rounding cannot
make two frames touch), and each edge becomes a 4-connected path of cells that starts on
its tail box's frame and ends on its head box's frame.

A picture ``dot`` cannot lay out within the timeout, or fails on (Graphviz's layout bugs
hit some graphs and not others), falls back as the SVGs do (``folding.plan.coarser_level``:
the next level with markedly fewer boxes), and when even the coarsest overruns or fails
the layout is empty and its note says so in one sentence.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Sequence
from typing import Any

from ...diff import GraphDiff
from ...graph import GraphSnapshot
from ..dot.run import DotFailedError, DotTimeoutError, run_dot
from ..dot.text import DotWriter
from ..folding.build import build_drawing
from ..folding.drawing import Box, Drawing
from ..folding.plan import (
    RenderOptions,
    auto_level,
    changed_splits,
    coarser_level,
    ghost_scopes,
    level_name,
    merge_levels,
    scopes_drawn,
)
from ..folding.prepared import levels
from ..folding.scopes import count_at_level
from .fit import compact_lines, fold_columns
from .values import BoxLayout, ClusterLayout, EdgeLayout, GraphLayout

__all__ = ["COL_PT", "ROW_PT", "TERMINAL_BUDGET", "box_lines", "layout_dot", "layout_graph"]

#: Points per terminal column and per row: a cell is about twice as high as it is wide,
#: so dot's routes keep their proportions on screen.
COL_PT = 8.0
ROW_PT = 16.0
#: Boxes at the automatic level of the graph view (a terminal shows fewer than an SVG).
TERMINAL_BUDGET = 120
#: Longest label line, and most label lines, in a box.
MAX_LINE = 34
MAX_LINES = 4
#: dot's edge routing. Its own splines, followed cell by cell; ``splines=ortho`` would map
#: straight onto box-drawing characters, but Graphviz 2.43 stops on a frozen ResNet-50 at
#: module level with "newtrap: Trapezoid-table overflow".
SPLINES = "spline"
# A cluster frame keeps its boxes one row and two columns inside it.
_CLUSTER_MARGIN_PT = 16


def box_lines(node: Box) -> tuple[str, ...]:
    """The label lines of ``node`` in the terminal: its title, then its rows, clipped."""
    lines = [node.title, *node.rows]
    if len(lines) > MAX_LINES:
        lines = [*lines[: MAX_LINES - 1], f"… {len(lines) - MAX_LINES + 1} more"]
    return tuple(_clip(line) for line in lines)


def _clip(text: str, width: int = MAX_LINE) -> str:
    text = text.replace("\n", " ").replace("\t", " ")
    return text if len(text) <= width else text[: width - 1] + "…"


def _box_size(lines: Sequence[str]) -> tuple[int, int]:
    """Width and height in cells: a frame, one column of padding, the lines."""
    return max(7, max((len(x) for x in lines), default=0) + 4), len(lines) + 2


def _lines_of(node: Box, rows: int | None) -> tuple[str, ...]:
    """A box's label lines: one line when the layout is fitted to ``rows`` rows."""
    if rows is None:
        return box_lines(node)
    return tuple(_clip(line) for line in compact_lines(node))


def layout_dot(drawing: Drawing, rows: int | None = None) -> tuple[str, dict[str, tuple[str, ...]]]:
    """DOT text laying out ``drawing`` with fixed-size boxes measured in cells.

    Args:
        drawing: the boxes, clusters and edges.
        rows: fit the picture to a pane this many rows high: one label line a box, the
            ranks folded into columns (:mod:`.fit`); None: full labels, one column.

    Returns:
        The DOT text, and each cluster's DOT name -> its path in ``drawing.clusters``.
    """
    graph = DotWriter(name="freezeview")
    graph.attr(
        rankdir="TB",
        splines=SPLINES,
        nodesep=f"{2 * COL_PT / 72:.4f}",
        ranksep=f"{2 * ROW_PT / 72:.4f}",
        fontname="Courier",
        fontsize=f"{COL_PT / 0.6:.2f}",
    )
    columns: dict[str, int] = {}
    if rows is not None:
        heights = {k: _box_size(_lines_of(n, rows))[1] for k, n in drawing.nodes.items()}
        pairs = [(e.tail, e.head) for e in drawing.edges]
        columns = fold_columns(heights, pairs, rows - 2, gap=3)
    graph.attr("node", shape="box", fixedsize="true", label="")
    graph.attr("edge", arrowhead="none")
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in drawing.clusters:
        children.setdefault(path[:-1], []).append(path)
    nodes_in: dict[tuple[str, ...], list[Box]] = {}
    for node in drawing.nodes.values():
        path = node.cluster
        while path and path not in drawing.clusters:
            path = path[:-1]
        nodes_in.setdefault(path, []).append(node)
    names: dict[str, tuple[str, ...]] = {}

    def emit(sub: DotWriter, path: tuple[str, ...]) -> None:
        # dot leans on the order nodes come in: the first column's first.
        for node in sorted(nodes_in.get(path, []), key=lambda n: columns.get(n.key, 0)):
            w, h = _box_size(_lines_of(node, rows))
            sub.node(node.key, width=f"{w * COL_PT / 72:.4f}", height=f"{h * ROW_PT / 72:.4f}")
        for child in children.get(path, []):
            name = f"cluster_{len(names) + 1}"
            names[name] = child
            inner = DotWriter(name=name)
            inner.attr(label=_clip(drawing.clusters[child].label), margin=str(_CLUSTER_MARGIN_PT))
            emit(inner, child)
            sub.subgraph(inner)

    emit(graph, ())
    for edge in drawing.edges:
        if edge.tail == edge.head:
            continue
        if columns.get(edge.tail, 0) != columns.get(edge.head, 0):
            # From one column's foot to the next one's head: not a rank constraint.
            graph.edge(edge.tail, edge.head, constraint="false")
        else:
            graph.edge(edge.tail, edge.head)
    return graph.source, names


def _points(pos: str) -> list[tuple[float, float]]:
    """The control points of an edge's ``pos`` (its first spline; arrow points skipped)."""
    first = pos.split(";")[0]
    out = []
    for token in first.split():
        if token.startswith(("e,", "s,")):
            continue
        x, _, y = token.partition(",")
        out.append((float(x), float(y)))
    return out


def _bezier(points: list[tuple[float, float]]) -> list[tuple[float, float]]:
    """Points along a piecewise cubic B-spline in dot's notation (p0 (c1 c2 p)*)."""
    if len(points) < 4:
        return points
    out = [points[0]]
    for i in range(0, len(points) - 3, 3):
        p0, c1, c2, p3 = points[i : i + 4]
        length = math.dist(p0, c1) + math.dist(c1, c2) + math.dist(c2, p3)
        steps = max(2, int(length / 4))
        for k in range(1, steps + 1):
            t = k / steps
            u = 1 - t
            x = u**3 * p0[0] + 3 * u * u * t * c1[0] + 3 * u * t * t * c2[0] + t**3 * p3[0]
            y = u**3 * p0[1] + 3 * u * u * t * c1[1] + 3 * u * t * t * c2[1] + t**3 * p3[1]
            out.append((x, y))
    return out


def _line(a: tuple[int, int], b: tuple[int, int]) -> list[tuple[int, int]]:
    """4-connected cells from ``a`` to ``b`` (``a`` excluded): along, then across."""
    (x0, y0), (x1, y1) = a, b
    out: list[tuple[int, int]] = []
    dx, dy = x1 - x0, y1 - y0
    n = max(abs(dx), abs(dy))
    if n == 0:
        return out
    x, y = x0, y0
    for k in range(1, n + 1):
        nx = x0 + round(dx * k / n)
        ny = y0 + round(dy * k / n)
        if nx != x and ny != y:
            # A diagonal step: go through the cell that keeps the line 4-connected,
            # vertically first (the graph flows down).
            out.append((x, ny))
        out.append((nx, ny))
        x, y = nx, ny
    return out


def _manhattan(
    a: tuple[int, int], b: tuple[int, int], vertical_first: bool
) -> list[tuple[int, int]]:
    """An L-shaped 4-connected path from ``a`` to ``b`` (``a`` excluded)."""
    (x0, y0), (x1, y1) = a, b
    out: list[tuple[int, int]] = []
    sx = 1 if x1 > x0 else -1
    sy = 1 if y1 > y0 else -1
    if vertical_first:
        out += [(x0, y) for y in range(y0 + sy, y1 + sy, sy)] if y1 != y0 else []
        out += [(x, y1) for x in range(x0 + sx, x1 + sx, sx)] if x1 != x0 else []
    else:
        out += [(x, y0) for x in range(x0 + sx, x1 + sx, sx)] if x1 != x0 else []
        out += [(x1, y) for y in range(y0 + sy, y1 + sy, sy)] if y1 != y0 else []
    return out


def _nearest_border(box: BoxLayout, cell: tuple[int, int]) -> tuple[tuple[int, int], bool]:
    """The cell of ``box``'s frame nearest ``cell``, and whether that side is a top or
    bottom one (the path then leaves it vertically)."""
    x = min(max(cell[0], box.x), box.x + box.w - 1)
    y = min(max(cell[1], box.y), box.y + box.h - 1)
    top, bottom = box.y, box.y + box.h - 1
    left, right = box.x, box.x + box.w - 1
    sides = [
        (abs(cell[1] - top) if cell[1] <= top else abs(y - top), (x, top), True),
        (abs(cell[1] - bottom) if cell[1] >= bottom else abs(y - bottom), (x, bottom), True),
        (abs(cell[0] - left) if cell[0] <= left else abs(x - left), (left, y), False),
        (abs(cell[0] - right) if cell[0] >= right else abs(x - right), (right, y), False),
    ]
    # Corners are never a route's end: an edge meets a box on a side.
    _, point, vertical = min(sides, key=lambda s: s[0])
    px, py = point
    if vertical:
        px = min(max(px, box.x + 1), box.x + box.w - 2)
    else:
        py = min(max(py, box.y + 1), box.y + box.h - 2)
    return (px, py), vertical


def _join(box: BoxLayout, cell: tuple[int, int]) -> list[tuple[int, int]]:
    """Cells from the frame of ``box`` nearest ``cell`` out to ``cell`` (both included):
    one step straight out of the side, then an L to ``cell``."""
    start, vertical = _nearest_border(box, cell)
    x, y = start
    if vertical:
        out = (x, y - 1) if y == box.y else (x, y + 1)
    else:
        out = (x - 1, y) if x == box.x else (x + 1, y)
    path = [start, out]
    if out != cell:
        path += _manhattan(out, cell, vertical)
    return path


def _cut(
    path: list[tuple[int, int]], tail: BoxLayout, head: BoxLayout
) -> list[tuple[int, int]] | None:
    """``path`` from its last cell in ``tail`` to its first cell in ``head`` after it,
    or None when it does not reach both."""
    first = next((i for i, c in enumerate(path) if i > 0 and head.contains(*c)), None)
    if first is None:
        return None
    path = path[: first + 1]
    last = max((i for i, c in enumerate(path[:-1]) if tail.contains(*c)), default=None)
    if last is None:
        return None
    return path[last:]


def _route(
    samples: list[tuple[int, int]], tail: BoxLayout, head: BoxLayout
) -> tuple[tuple[int, int], ...]:
    """Cells from ``tail``'s frame to ``head``'s frame along ``samples`` (dot's route).

    Rounding to cells can leave dot's route a cell short of a frame (or a cell inside
    one): the route is joined to the nearest side where it falls short, then cut at
    the last cell in the tail box and the first cell in the head box after it. The
    path is 4-connected, so those two cells are on the frames.
    """
    path: list[tuple[int, int]] = []
    for cell in samples:
        if not path:
            path.append(cell)
        elif cell != path[-1]:
            path += _line(path[-1], cell)
    if not tail.contains(*path[0]):
        path = [*_join(tail, path[0])[:-1], *path]
    if not any(head.contains(*c) for c in path[1:]):
        path = [*path, *reversed(_join(head, path[-1])[:-1])]
    cut = _cut(path, tail, head)
    if cut is None:  # the route missed a box entirely: a straight join between them
        a, _ = _nearest_border(tail, head.centre)
        cut = _cut([*_join(tail, head.centre)[:-1], head.centre], tail, head) or [a]
    # Joins can cross the route: loops are cut out.
    clean: list[tuple[int, int]] = []
    seen: dict[tuple[int, int], int] = {}
    for cell in cut:
        if cell in seen:
            clean = clean[: seen[cell] + 1]
            seen = {c: i for i, c in enumerate(clean)}
            continue
        seen[cell] = len(clean)
        clean.append(cell)
    return tuple(clean)


def _parse(
    data: bytes, drawing: Drawing, clusters: dict[str, tuple[str, ...]], rows: int | None = None
) -> tuple[int, int, dict[str, BoxLayout], list[EdgeLayout], list[ClusterLayout]]:
    """Boxes, edges and cluster frames in cells from ``dot -Tjson0`` output."""
    doc: dict[str, Any] = json.loads(data)
    x0, y0, x1, y1 = (float(v) for v in doc.get("bb", "0,0,0,0").split(","))
    width = math.ceil((x1 - x0) / COL_PT) + 2
    height = math.ceil((y1 - y0) / ROW_PT) + 2

    def cell(x: float, y: float) -> tuple[float, float]:
        return (x - x0) / COL_PT + 1, (y1 - y) / ROW_PT + 1

    by_gvid: dict[int, dict[str, Any]] = {o["_gvid"]: o for o in doc.get("objects", [])}
    boxes: dict[str, BoxLayout] = {}
    frames: list[ClusterLayout] = []
    for obj in doc.get("objects", []):
        name = obj.get("name", "")
        if name in clusters and "bb" in obj:
            bx0, by0, bx1, by1 = (float(v) for v in obj["bb"].split(","))
            (cx0, cy0), (cx1, cy1) = cell(bx0, by1), cell(bx1, by0)
            path = clusters[name]
            cluster = drawing.clusters[path]
            frames.append(
                ClusterLayout(
                    label=cluster.label,
                    kind=cluster.kind,
                    status=cluster.status,
                    x=round(cx0),
                    y=round(cy0),
                    w=max(2, round(cx1) - round(cx0)),
                    h=max(2, round(cy1) - round(cy0)),
                    depth=len(path),
                )
            )
        elif name in drawing.nodes and "pos" in obj:
            node = drawing.nodes[name]
            lines = _lines_of(node, rows)
            w, h = _box_size(lines)
            px, _, py = obj["pos"].partition(",")
            cx, cy = cell(float(px), float(py))
            scope = node.title if node.role == "scope" else _op_scope(node)
            boxes[name] = BoxLayout(
                key=name,
                role=node.role,
                status=node.status,
                kept=node.kept,
                x=round(cx - w / 2),
                y=round(cy - h / 2),
                w=w,
                h=h,
                lines=lines,
                node_ids=tuple(node.node_ids),
                ghost_ids=tuple(node.ghost_ids),
                scope=scope,
                tooltip=node.tooltip,
            )
    frames.sort(key=lambda f: f.depth)
    edges: list[EdgeLayout] = []
    statuses = {(e.tail, e.head): e for e in drawing.edges}
    for edge in doc.get("edges", []):
        tail = by_gvid.get(edge["tail"], {}).get("name")
        head = by_gvid.get(edge["head"], {}).get("name")
        if tail not in boxes or head not in boxes or "pos" not in edge:
            continue
        samples = [
            (math.floor(cx), math.floor(cy))
            for cx, cy in (cell(x, y) for x, y in _bezier(_points(edge["pos"])))
        ]
        if not samples:
            continue
        cells = _route(samples, boxes[tail], boxes[head])
        source = statuses.get((tail, head))
        edges.append(
            EdgeLayout(
                tail,
                head,
                cells,
                status=source.status if source else "same",
                style=source.style if source else "",
            )
        )
    return width, height, boxes, edges, frames


def _op_scope(node: Box) -> str:
    for part in reversed(node.cluster):
        if part.startswith("s:"):
            return part[2:]
    return ""


def _drawing(
    snapshot: GraphSnapshot,
    diff: GraphDiff | None,
    level: int | None,
    options: RenderOptions,
    split: Sequence[str],
) -> Drawing:
    """The drawing the SVG of the same picture draws (edge labels left out)."""
    return build_drawing(
        snapshot,
        level=level,
        expand=options.expand,
        constants=options.constants,
        diff=diff,
        side="after",
        reasons=options.reasons,
        edge_labels=False,
        split=split,
        modules=options.modules,
    )


def layout_graph(
    snapshot: GraphSnapshot,
    *,
    diff: GraphDiff | None = None,
    level: int | str | None = "auto",
    options: RenderOptions | None = None,
    title: str = "",
    rows: int | None = None,
) -> GraphLayout:
    """Lay ``snapshot`` out on a grid of terminal cells (coloured by ``diff`` if given).

    Args:
        snapshot: the graph; with ``diff``, it must be ``diff.after``.
        diff: colour added, changed and removed ops (removed ones as ghosts).
        level: ``"auto"`` (the finest level within ``options.budget`` boxes, and in a
            diff the boxes where something changed opened, as in the SVGs), an int box
            depth, or None for every op.
        options: drawing options (``expand``, ``reasons``, ``modules``, ``timeout``,
            ``overruns``); by default a budget of :data:`TERMINAL_BUDGET` boxes.
        title: a caption for the layout.
        rows: the graph view's pane height: a module level drawn without cluster frames is
            fitted to it (one label line a box, long chains folded into columns,
            :mod:`.fit`); other pictures are drawn in full whatever it is.

    Returns:
        A :class:`GraphLayout`; empty, with a note, when dot could not lay out even
        the coarsest level within the timeout, or failed on it.

    Raises:
        GraphvizMissingError: ``dot`` is not installed.
    """
    options = options or RenderOptions(budget=TERMINAL_BUDGET)
    start = time.perf_counter()
    scopes = scopes_drawn(snapshot, options)
    candidates = levels(snapshot, options.constants, options.modules)
    if diff is not None:
        scopes = scopes + ghost_scopes(diff, options)
        candidates = merge_levels(
            candidates, levels(diff.before, options.constants, options.modules)
        )
    if level == "auto":
        chosen = auto_level(scopes, candidates, options)
    elif isinstance(level, str):
        raise ValueError(f"unknown level {level!r}")
    else:
        chosen = level
    split: tuple[str, ...] = ()
    if diff is not None and level == "auto" and options.open_changed:
        split = changed_splits(diff, scopes, chosen, options)
    notes: list[str] = []
    build = time.perf_counter() - start
    dot_time = 0.0
    current = chosen
    memo = options.overruns
    failed: DotFailedError | None = None
    while True:
        boxes = count_at_level(scopes, current, options.expand)
        nxt = coarser_level(current, list(candidates), scopes, options.expand)
        # The coarsest level is always tried: the ceiling is a forecast, the timeout
        # the measurement, and a bigger picture that overran may have been harder.
        known = memo is not None and memo.too_big(boxes) and nxt is not False
        too_big = not known and boxes > options.ceiling and nxt is not False
        if not known and not too_big:
            t0 = time.perf_counter()
            drawing = _drawing(snapshot, diff, current, options, split if current == chosen else ())
            # Module boxes alone (no cluster frames, which folding would tear apart).
            fit = rows if current is not None and not drawing.clusters else None
            source, clusters = layout_dot(drawing, fit)
            build += time.perf_counter() - t0
            t0 = time.perf_counter()
            try:
                data = run_dot(source, "json0", options)
            except DotTimeoutError:
                if memo is not None:
                    memo.overran(boxes)
            except DotFailedError as exc:
                # A layout bug of Graphviz on this graph, not its size (nothing to
                # remember for other pictures): another level is another graph.
                failed = exc
            else:
                dot_time += time.perf_counter() - t0
                t0 = time.perf_counter()
                width, height, placed, edges, frames = _parse(data, drawing, clusters, fit)
                build += time.perf_counter() - t0
                # A ghost's node ids are the before-graph's (the op it stands for was
                # removed): they go by ghost, never for the drawn graph's node of that id.
                by_node = {
                    i: b.key for b in placed.values() if b.role != "ghost" for i in b.node_ids
                }
                by_ghost = {i: b.key for b in placed.values() for i in _ghost_ids(b)}
                return GraphLayout(
                    width=width,
                    height=height,
                    boxes=placed,
                    edges=tuple(edges),
                    clusters=tuple(frames),
                    level=current,
                    levels=tuple(candidates),
                    expand=tuple(options.expand),
                    diff=diff is not None,
                    notes=tuple(notes),
                    dot_seconds=dot_time,
                    build_seconds=build,
                    title=title,
                    by_node=by_node,
                    by_ghost=by_ghost,
                )
            dot_time += time.perf_counter() - t0
        if too_big:
            why = f"{boxes:,} boxes are above the {options.ceiling:,}-box ceiling"
        elif failed is not None:
            why = f"Graphviz failed ({failed.dot_error or 'no output'})"
        else:
            why = f"Graphviz did not finish within {options.timeout:g} s ({boxes:,} boxes)"
        # g's SVGs wait longer than the graph view, which helps a slow picture, not a failing one.
        after = "." if failed is not None else "; g writes the SVGs, whose timeout is longer."
        failed = None
        if nxt is False:
            notes.append(
                f"{why} even with {level_name(current)}, so the graph view has nothing to "
                f"draw{after}"
            )
            return GraphLayout(
                width=0,
                height=0,
                boxes={},
                edges=(),
                clusters=(),
                level=current,
                levels=tuple(candidates),
                expand=tuple(options.expand),
                diff=diff is not None,
                notes=tuple(notes),
                dot_seconds=dot_time,
                build_seconds=build,
                title=title,
            )
        assert not isinstance(nxt, bool)
        notes.append(f"{why} with {level_name(current)}; drew {level_name(nxt)} instead.")
        current = nxt


def _ghost_ids(box: BoxLayout) -> tuple[int, ...]:
    """The before-graph ids a box stands for: a scope box's removed ops, or a ghost's own."""
    return box.ghost_ids or (box.node_ids if box.role == "ghost" else ())
