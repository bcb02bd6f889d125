"""A graph laid out by Graphviz on a grid of terminal cells: the values.

:func:`~freezeview.engine.draw.terminal.layout.layout_graph` makes a :class:`GraphLayout` from a
snapshot (or a diff); the app's graph view draws it with the terminal's characters. The
values are plain and torch-free, so they cross from the engine process to the screen's.
Coordinates are cells: ``x`` a column, ``y`` a row, both from the top left corner.
"""

from __future__ import annotations

from dataclasses import dataclass, field

__all__ = ["BoxLayout", "ClusterLayout", "EdgeLayout", "GraphLayout"]


@dataclass(frozen=True)
class BoxLayout:
    """One box: where it is and what it says.

    Attributes:
        key: the drawing's box key (the SVG's element id for the same box).
        role: ``op``, ``attribute``, ``input``, ``output``, ``scope`` (a module box),
            ``ghost`` (a removed op, drawn where it was) or ``constant``.
        status: ``same``, ``added``, ``changed`` or ``removed``.
        kept: an attribute freezing kept (or a module box holding reads of one).
        x, y, w, h: the box's frame, borders included.
        lines: the label, one line per row inside the frame (title first).
        node_ids: the snapshot node ids the box stands for.
        ghost_ids: before-graph ids of the removed ops it stands for.
        scope: the module a ``scope`` box folds (what Enter opens), else its op's module.
        tooltip: the SVG's tooltip text (the inspector shows it for module boxes).
    """

    key: str
    role: str
    status: str
    kept: bool
    x: int
    y: int
    w: int
    h: int
    lines: tuple[str, ...]
    node_ids: tuple[int, ...] = ()
    ghost_ids: tuple[int, ...] = ()
    scope: str = ""
    tooltip: str = ""

    def contains(self, x: int, y: int) -> bool:
        """Whether cell (x, y) is inside the frame (borders included)."""
        return self.x <= x < self.x + self.w and self.y <= y < self.y + self.h

    def on_border(self, x: int, y: int) -> bool:
        """Whether cell (x, y) is on the frame itself."""
        if not self.contains(x, y):
            return False
        return x in (self.x, self.x + self.w - 1) or y in (self.y, self.y + self.h - 1)

    @property
    def centre(self) -> tuple[int, int]:
        """The middle cell."""
        return self.x + self.w // 2, self.y + self.h // 2


@dataclass(frozen=True)
class EdgeLayout:
    """One edge as dot routed it: a 4-connected path of cells.

    The first cell lies on the tail box's frame and the last one on the head box's
    frame (the arrow's tip); every cell in between is outside both boxes.
    """

    tail: str
    head: str
    cells: tuple[tuple[int, int], ...]
    status: str = "same"
    style: str = ""


@dataclass(frozen=True)
class ClusterLayout:
    """A module scope (or an ``If``/``Loop`` block) drawn as a frame around its boxes."""

    label: str
    kind: str
    status: str
    x: int
    y: int
    w: int
    h: int
    depth: int


@dataclass(frozen=True)
class GraphLayout:
    """A whole picture on the cell grid.

    Attributes:
        width, height: the canvas size in cells.
        boxes: the boxes, by key.
        edges: the edges.
        clusters: the frames, outermost first.
        level: the collapse level drawn (None: every op).
        levels: the levels this graph has, coarsest first, None (every op) last.
        expand: the modules opened down to their ops.
        diff: True when coloured by a diff against the step before.
        notes: sentences for the user (a coarser level taken because dot overran, ...).
        dot_seconds: Graphviz's time; build_seconds: freezeview's.
    """

    width: int
    height: int
    boxes: dict[str, BoxLayout]
    edges: tuple[EdgeLayout, ...]
    clusters: tuple[ClusterLayout, ...]
    level: int | None
    levels: tuple[int | None, ...]
    expand: tuple[str, ...] = ()
    diff: bool = False
    notes: tuple[str, ...] = ()
    dot_seconds: float = 0.0
    build_seconds: float = 0.0
    title: str = ""
    by_node: dict[int, str] = field(default_factory=dict)
    by_ghost: dict[int, str] = field(default_factory=dict)

    def box_of(self, node_id: int, *, ghost: bool = False) -> BoxLayout | None:
        """The box showing snapshot node ``node_id`` (its own or its module's box)."""
        key = (self.by_ghost if ghost else self.by_node).get(node_id)
        return self.boxes.get(key) if key is not None else None

    def box_at(self, x: int, y: int) -> BoxLayout | None:
        """The box covering cell (x, y), if any."""
        for box in self.boxes.values():
            if box.contains(x, y):
                return box
        return None
