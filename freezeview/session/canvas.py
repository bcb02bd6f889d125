"""A laid-out graph drawn with the terminal's characters (no Textual here).

:class:`Canvas` turns a :class:`~freezeview.engine.draw.terminal.values.GraphLayout` (boxes,
edge routes and cluster frames in cells, from Graphviz) into rows of characters with a
style code per cell; the graph view (:mod:`freezeview.ui.widgets.graph_view`) crops the
rows the terminal shows and maps the codes to colours. Drawing order: cluster frames,
then edges (the cells of every route merged, so crossings and joins get the right
box-drawing character), then boxes over them, then the arrow tips on the head boxes'
frames and the joins on the tail boxes' frames.

The colours follow the SVGs: added green, changed amber, removed red (ghosts dashed),
kept attributes with a heavy purple frame, inputs and outputs blue, module boxes with a
double frame.
"""

from __future__ import annotations

from ..engine.draw import BoxLayout, GraphLayout

__all__ = ["STYLE_NAMES", "Canvas"]

# Style codes, one per cell (the widget maps each to a rich Style).
BLANK, EDGE, EDGE_REMOVED, BOX, BOX_ADDED, BOX_CHANGED, BOX_REMOVED, BOX_KEPT, BOX_IO = range(9)
CLUSTER, CLUSTER_CHANGED, TEXT, TITLE, TEXT_GHOST, ARROW, ARROW_REMOVED = range(9, 16)

#: Style code -> the name the widget styles it by (component classes of the view).
STYLE_NAMES = (
    "blank",
    "edge",
    "edge-removed",
    "box",
    "box-added",
    "box-changed",
    "box-removed",
    "box-kept",
    "box-io",
    "cluster",
    "cluster-changed",
    "text",
    "title",
    "text-ghost",
    "arrow",
    "arrow-removed",
)

_UP, _DOWN, _LEFT, _RIGHT = 1, 2, 4, 8
_JOIN = {
    0: " ",
    _UP: "│",
    _DOWN: "│",
    _UP | _DOWN: "│",
    _LEFT: "─",
    _RIGHT: "─",
    _LEFT | _RIGHT: "─",
    _DOWN | _RIGHT: "╭",
    _DOWN | _LEFT: "╮",
    _UP | _RIGHT: "╰",
    _UP | _LEFT: "╯",
    _UP | _DOWN | _RIGHT: "├",
    _UP | _DOWN | _LEFT: "┤",
    _DOWN | _LEFT | _RIGHT: "┬",
    _UP | _LEFT | _RIGHT: "┴",
    _UP | _DOWN | _LEFT | _RIGHT: "┼",
}
# Frames: (top-left, top, top-right, side, bottom-left, bottom-right) per kind.
_FRAMES = {
    "op": ("╭", "─", "╮", "│", "╰", "╯"),
    "scope": ("╔", "═", "╗", "║", "╚", "╝"),
    "kept": ("┏", "━", "┓", "┃", "┗", "┛"),
    "ghost": ("╭", "┄", "╮", "┆", "╰", "╯"),
    "io": ("┌", "─", "┐", "│", "└", "┘"),
}
_CLUSTER_FRAME = ("┌", "╌", "┐", "╎", "└", "┘")
_ARROWS = {(0, 1): "▼", (0, -1): "▲", (1, 0): "▶", (-1, 0): "◀"}


def _direction(a: tuple[int, int], b: tuple[int, int]) -> int:
    dx, dy = b[0] - a[0], b[1] - a[1]
    if dy > 0:
        return _DOWN
    if dy < 0:
        return _UP
    return _RIGHT if dx > 0 else _LEFT


def box_frame(box: BoxLayout) -> tuple[str, ...]:
    """The frame characters of ``box`` (by role: module boxes double, ghosts dashed, ...)."""
    if box.role == "ghost" or (box.role == "scope" and box.status == "removed"):
        return _FRAMES["ghost"]
    if box.kept and box.role != "scope":
        return _FRAMES["kept"]
    if box.role == "scope":
        return _FRAMES["scope"]
    if box.role in ("input", "output"):
        return _FRAMES["io"]
    return _FRAMES["op"]


def box_style(box: BoxLayout) -> int:
    """The style code of ``box``'s frame (its diff status, or kept, or input/output)."""
    if box.role == "ghost" or box.status == "removed":
        return BOX_REMOVED
    if box.status == "added":
        return BOX_ADDED
    if box.status == "changed":
        return BOX_CHANGED
    if box.kept:
        return BOX_KEPT
    if box.role in ("input", "output"):
        return BOX_IO
    return BOX


class Canvas:
    """Rows of characters and style codes for a whole laid-out graph.

    Made where the layout is made (the engine process, beside dot), so the screen's
    process only unpickles rows of text; plain values, no Textual.

    Args:
        layout: the graph laid out in cells.

    Attributes:
        rows: one string per row, ``width`` characters each.
        styles: one style code per character, per row.
    """

    def __init__(self, layout: GraphLayout) -> None:
        self.layout = layout
        self.width = max(1, layout.width)
        self.height = max(1, layout.height)
        self.chars: list[list[str]] = [[" "] * self.width for _ in range(self.height)]
        self._codes: list[bytearray] = [bytearray(self.width) for _ in range(self.height)]
        for frame in layout.clusters:
            self._cluster(frame.x, frame.y, frame.w, frame.h, frame.label, frame.status)
        crossed = self._edges()
        # A frame's label goes where no edge crosses its top line, and is drawn over
        # the edges where every place is crossed: a label is never cut by an edge.
        for frame in layout.clusters:
            self._cluster_label(frame.x, frame.y, frame.w, frame.label, frame.status, crossed)
        for box in layout.boxes.values():
            self._box(box)
        self._ends()
        self.rows: list[str] = ["".join(row) for row in self.chars]
        self.styles: list[bytes] = [bytes(row) for row in self._codes]
        del self.chars, self._codes

    # -- drawing ---------------------------------------------------------------------
    def _put(self, x: int, y: int, char: str, style: int) -> None:
        if 0 <= y < self.height and 0 <= x < self.width:
            self.chars[y][x] = char
            self._codes[y][x] = style

    def _text(self, x: int, y: int, text: str, style: int, limit: int) -> None:
        for i, char in enumerate(text[: max(0, limit)]):
            self._put(x + i, y, char, style)

    def _cluster(self, x: int, y: int, w: int, h: int, label: str, status: str) -> None:
        style = CLUSTER_CHANGED if status != "same" else CLUSTER
        tl, top, tr, side, bl, br = _CLUSTER_FRAME
        for i in range(x + 1, x + w - 1):
            self._put(i, y, top, style)
            self._put(i, y + h - 1, top, style)
        for j in range(y + 1, y + h - 1):
            self._put(x, j, side, style)
            self._put(x + w - 1, j, side, style)
        self._put(x, y, tl, style)
        self._put(x + w - 1, y, tr, style)
        self._put(x, y + h - 1, bl, style)
        self._put(x + w - 1, y + h - 1, br, style)

    def _cluster_label(
        self, x: int, y: int, w: int, label: str, status: str, crossed: set[tuple[int, int]]
    ) -> None:
        style = CLUSTER_CHANGED if status != "same" else CLUSTER
        text = f" {label} "[: max(0, w - 4)]
        start = x + 2
        for at in range(x + 2, x + w - 2 - len(text) + 1):
            if not any((i, y) in crossed for i in range(at - 1, at + len(text) + 1)):
                start = at
                break
        self._text(start, y, text, style, x + w - 2 - start)

    def _edges(self) -> set[tuple[int, int]]:
        """Draw every edge; the cells they pass through."""
        masks: dict[tuple[int, int], int] = {}
        styles: dict[tuple[int, int], int] = {}
        for edge in self.layout.edges:
            cells = edge.cells
            style = EDGE_REMOVED if edge.status == "removed" else EDGE
            for i, cell in enumerate(cells):
                mask = 0
                if i > 0:
                    mask |= _direction(cell, cells[i - 1])
                if i + 1 < len(cells):
                    mask |= _direction(cell, cells[i + 1])
                masks[cell] = masks.get(cell, 0) | mask
                if styles.get(cell) != EDGE:  # a live edge wins over a removed one
                    styles[cell] = style
        dashed = {"│": "┆", "─": "┄"}
        for (x, y), mask in masks.items():
            char = _JOIN.get(mask, "┼")
            if styles[(x, y)] == EDGE_REMOVED:
                char = dashed.get(char, char)
            self._put(x, y, char, styles[(x, y)])
        return set(masks)

    def _box(self, box: BoxLayout) -> None:
        tl, top, tr, side, bl, br = box_frame(box)
        style = box_style(box)
        x, y, w, h = box.x, box.y, box.w, box.h
        for j in range(y + 1, y + h - 1):
            for i in range(x + 1, x + w - 1):
                self._put(i, j, " ", TEXT)
        for i in range(x + 1, x + w - 1):
            self._put(i, y, top, style)
            self._put(i, y + h - 1, top, style)
        for j in range(y + 1, y + h - 1):
            self._put(x, j, side, style)
            self._put(x + w - 1, j, side, style)
        self._put(x, y, tl, style)
        self._put(x + w - 1, y, tr, style)
        self._put(x, y + h - 1, bl, style)
        self._put(x + w - 1, y + h - 1, br, style)
        ghost = box.role == "ghost"
        for k, line in enumerate(box.lines):
            if k == 0:
                text_style = TEXT_GHOST if ghost else TITLE
            else:
                text_style = TEXT_GHOST if ghost else TEXT
            self._text(x + 2, y + 1 + k, line, text_style, w - 4)

    def _ends(self) -> None:
        """Arrow tips on the head boxes' frames, joins on the tail boxes' frames."""
        for edge in self.layout.edges:
            cells = edge.cells
            if len(cells) < 2:
                continue
            removed = edge.status == "removed"
            tip = cells[-1]
            step = (tip[0] - cells[-2][0], tip[1] - cells[-2][1])
            self._put(*tip, _ARROWS.get(step, "●"), ARROW_REMOVED if removed else ARROW)
            start = cells[0]
            tail = self.layout.boxes.get(edge.tail)
            if tail is None:
                continue
            out = _direction(start, cells[1])
            frame_side = _LEFT | _RIGHT if out in (_UP, _DOWN) else _UP | _DOWN
            char = _JOIN.get(out | frame_side, "┼")
            if box_frame(tail) is _FRAMES["scope"]:
                char = {"┬": "╤", "┴": "╧", "├": "╟", "┤": "╢"}.get(char, char)
            elif box_frame(tail) is _FRAMES["kept"]:
                char = {"┬": "┯", "┴": "┷", "├": "┠", "┤": "┨"}.get(char, char)
            self._put(*start, char, box_style(tail))

    # -- reading ---------------------------------------------------------------------
    def row_text(self, y: int) -> str:
        """Row ``y`` as plain text."""
        return self.rows[y] if 0 <= y < self.height else ""

    def text(self) -> str:
        """The whole canvas as plain text (tests, the tmux check)."""
        return "\n".join(self.row_text(y).rstrip() for y in range(self.height))
