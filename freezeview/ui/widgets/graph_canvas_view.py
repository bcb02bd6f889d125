"""The graph view's drawing surface: a scrollable window onto a :class:`Canvas`.

Only the rows on screen are turned into segments, from the canvas's characters and
style codes, so a pan or a zoom frame costs the same on a 20-box graph and a 500-box
one. The selected box's frame is drawn in the accent colour; search matches are
underlined. Panning is the scroll offset: keys (arrows, hjkl, page keys), the wheel
(shift+wheel sideways) and dragging with the mouse.
"""

from __future__ import annotations

from collections.abc import Sequence

from rich.segment import Segment
from rich.style import Style
from textual import events
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...session import STYLE_NAMES, BoxLayout, Canvas
from ..failures import Guarded, strict

__all__ = ["GraphCanvasView"]


class GraphCanvasView(Guarded, ScrollView, can_focus=True):
    """A scrollable window onto a drawn graph (keys are the graph view's)."""

    DEFAULT_CSS = """
    GraphCanvasView {
        background: $surface;
        /* Always there: a scrollbar appearing or going would lay the whole screen out
           again on a zoom (see show_canvas). */
        overflow: scroll scroll;
    }
    GraphCanvasView > .graphcanvas--edge { color: $text-muted; }
    GraphCanvasView > .graphcanvas--edge-removed { color: #cf222e; }
    GraphCanvasView > .graphcanvas--box { color: $text; }
    GraphCanvasView > .graphcanvas--box-added { color: #2da44e; text-style: bold; }
    GraphCanvasView > .graphcanvas--box-changed { color: #d4a72c; text-style: bold; }
    GraphCanvasView > .graphcanvas--box-removed { color: #cf222e; }
    GraphCanvasView > .graphcanvas--box-kept { color: #a371f7; text-style: bold; }
    GraphCanvasView > .graphcanvas--box-io { color: #58a6ff; }
    GraphCanvasView > .graphcanvas--cluster { color: $text-disabled; }
    GraphCanvasView > .graphcanvas--cluster-changed { color: #d4a72c 70%; }
    GraphCanvasView > .graphcanvas--text { color: $text-muted; }
    GraphCanvasView > .graphcanvas--title { color: $text; text-style: bold; }
    GraphCanvasView > .graphcanvas--text-ghost { color: #cf222e; text-style: italic; }
    GraphCanvasView > .graphcanvas--arrow { color: $text-muted; }
    GraphCanvasView > .graphcanvas--arrow-removed { color: #cf222e; }
    GraphCanvasView > .graphcanvas--selected { color: $accent; text-style: bold reverse; }
    GraphCanvasView > .graphcanvas--match { text-style: underline; }
    GraphCanvasView > .graphcanvas--message { color: $text-muted; text-style: italic; }
    """

    BINDINGS = [
        Binding("up,k", "pan(0, -2)", "Pan up", show=False, tooltip="Pan the graph up"),
        Binding("down,j", "pan(0, 2)", "Pan down", show=False, tooltip="Pan the graph down"),
        Binding("left,h", "pan(-4, 0)", "Pan left", show=False, tooltip="Pan the graph left"),
        Binding("right,l", "pan(4, 0)", "Pan right", show=False, tooltip="Pan the graph right"),
        Binding("pageup", "page(-1)", "Page up", show=False, tooltip="Pan a screen up"),
        Binding("pagedown", "page(1)", "Page down", show=False, tooltip="Pan a screen down"),
        Binding("home", "home", "Top", show=False, tooltip="Back to the top of the graph"),
    ]

    COMPONENT_CLASSES = {
        *(f"graphcanvas--{name}" for name in STYLE_NAMES),
        "graphcanvas--selected",
        "graphcanvas--match",
        "graphcanvas--message",
    }

    class Clicked(Message):
        """A cell of the canvas was clicked (``box`` is the box there, if any)."""

        def __init__(self, box: BoxLayout | None) -> None:
            super().__init__()
            self.box = box

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        self.canvas: Canvas | None = None
        #: What the view says while there is no canvas (loading, a fallback sentence).
        self.message = ""
        self.selected: BoxLayout | None = None
        self.matches: frozenset[str] = frozenset()
        # The heat overlay: each filled box's inside cells by row, as (x0, x1, style).
        self._heat_rows: dict[int, list[tuple[int, int, Style]]] = {}
        self._styles: list[Style] = []
        self._drag: tuple[int, int, float, float] | None = None

    # -- content -------------------------------------------------------------------
    def show_canvas(self, canvas: Canvas | None, message: str = "") -> None:
        """Show ``canvas`` (or, when None, ``message`` alone)."""
        self.canvas = canvas
        self.message = message
        self.selected = None
        self.matches = frozenset()
        self._heat_rows = {}
        size = Size(0, 0) if canvas is None else Size(canvas.width, canvas.height)
        # virtual_size is a layout reactive: assigning it makes Textual lay the whole
        # screen out again (every pane, a big model's IR among them) though
        # the canvas keeps the pane's size and only its scroll range changes. So it is
        # set quietly and the scrollbars follow; they reflow the screen only when one
        # of them appears or goes.
        self.set_reactive(GraphCanvasView.virtual_size, size)
        self._scroll_update(size)
        self.refresh()

    def set_heat(self, fills: Sequence[tuple[BoxLayout, Style]]) -> None:
        """Fill the inside of each box given with its style (the heat overlay); an
        empty sequence takes the overlay off."""
        if not fills and not self._heat_rows:
            return  # no overlay, none asked for: nothing to draw again
        rows: dict[int, list[tuple[int, int, Style]]] = {}
        for box, style in fills:
            if box.w < 3 or box.h < 3:
                continue
            for row in range(box.y + 1, box.y + box.h - 1):
                rows.setdefault(row, []).append((box.x + 1, box.x + box.w - 1, style))
        self._heat_rows = rows
        self.refresh()

    def select(self, box: BoxLayout | None, *, centre: bool = True) -> None:
        """Draw ``box`` as the selected one, scrolled into view (centred if off screen)."""
        self.selected = box
        if box is not None and centre:
            self.centre_on(box)
        self.refresh()

    def centre_on(self, box: BoxLayout) -> None:
        """Scroll so ``box`` is in view: centred when any part of it was off screen."""
        x0, y0 = self.scroll_offset
        w, h = self.size
        if not w or not h:
            # Not laid out yet (the view just opened): centred once it has a size, or
            # the box would be centred on the window's left edge, cut in half.
            self.call_after_refresh(self._centre_later, box)
            return
        inside = x0 <= box.x and box.x + box.w <= x0 + w and y0 <= box.y and box.y + box.h <= y0 + h
        if not inside:
            cx, cy = box.centre
            y = max(0, cy - h // 2)
            x = self._uncut(max(0, cx - w // 2), y, box)
            self.scroll_to(x=x, y=y, animate=False)

    def _centre_later(self, box: BoxLayout) -> None:
        if self.selected is box and self.size.width and self.size.height:
            self.centre_on(box)

    def _uncut(self, x: int, y: int, keep: BoxLayout) -> int:
        """A left edge for the window at ``x`` that cuts no box in view in two: moved
        left to the frame of a box it would cut, while ``keep`` stays whole in view."""
        canvas = self.canvas
        if canvas is None:
            return x
        w, h = self.size
        for _ in range(4):
            cut = [
                b
                for b in canvas.layout.boxes.values()
                if b.x < x < b.x + b.w and b.y < y + h and y < b.y + b.h
            ]
            if not cut:
                return x
            left = min(b.x for b in cut)
            if keep.x + keep.w > left + w:
                return x  # moving left would cut the selected box instead
            x = max(0, left)
        return x

    def on_mount(self) -> None:
        self._resolve_styles()

    def notify_style_update(self) -> None:
        super().notify_style_update()
        self._resolve_styles()

    def _resolve_styles(self) -> None:
        try:
            self._styles = [
                self.get_component_rich_style(f"graphcanvas--{name}") for name in STYLE_NAMES
            ]
        except Exception:  # not mounted yet
            self._styles = []

    # -- keys: panning ------------------------------------------------------------------
    def action_pan(self, dx: int, dy: int) -> None:
        """Move the window over the graph by (dx, dy) cells."""
        self.scroll_to(x=self.scroll_x + dx, y=self.scroll_y + dy, animate=False)

    def action_page(self, direction: int) -> None:
        """Move the window a screen up (-1) or down (1)."""
        self.action_pan(0, direction * max(1, self.size.height - 2))

    def action_home(self) -> None:
        """Back to the top of the graph, its first box in view."""
        canvas = self.canvas
        boxes = list(canvas.layout.boxes.values()) if canvas is not None else []
        if not boxes:
            self.scroll_to(x=0, y=0, animate=False)
            return
        first = min(boxes, key=lambda b: (b.y, b.x))
        x = max(0, first.x + first.w // 2 - self.size.width // 2)
        self.scroll_to(x=x, y=0, animate=False)

    # -- mouse: click selects, drag pans ---------------------------------------------
    def on_mouse_down(self, event: events.MouseDown) -> None:
        self._drag = (event.screen_x, event.screen_y, self.scroll_x, self.scroll_y)
        self.capture_mouse()

    def on_mouse_move(self, event: events.MouseMove) -> None:
        if self._drag is None or not event.button:
            return
        sx, sy, x0, y0 = self._drag
        self.scroll_to(x=x0 - (event.screen_x - sx), y=y0 - (event.screen_y - sy), animate=False)

    def on_mouse_up(self, event: events.MouseUp) -> None:
        drag = self._drag
        self._drag = None
        self.release_mouse()
        if drag is not None and (event.screen_x, event.screen_y) != drag[:2]:
            return  # a drag, not a click
        if self.canvas is not None:
            x = int(self.scroll_x) + event.x
            y = int(self.scroll_y) + event.y
            self.post_message(self.Clicked(self.canvas.layout.box_at(x, y)))

    # -- drawing -------------------------------------------------------------------
    def show_failure(self, text: str) -> None:
        """A handler or the drawing failed (ui/failures.py): the view says so."""
        self.show_canvas(None, text)

    def render_line(self, y: int) -> Strip:
        try:
            return self._render_row(y)
        except Exception as error:  # said on screen, logged (failures.py)
            if strict():
                raise
            # Said once: the canvas is dropped, the next frames draw the sentence.
            report = getattr(self.app, "report_failure", None)
            if report is None:
                raise
            self.call_later(report, error, "drawing the graph view", self)
            self.canvas = None
            self.message = "the graph could not be drawn: see the status line"
            return Strip.blank(self.size.width, self.rich_style)

    def _render_row(self, y: int) -> Strip:
        width = self.size.width
        base = self.rich_style
        canvas = self.canvas
        scroll_x, scroll_y = self.scroll_offset
        row = y + scroll_y
        if canvas is None or row >= canvas.height:
            if canvas is None and y == 1 and self.message:
                style = self.get_component_rich_style("graphcanvas--message")
                text = f" {self.message}"[:width]
                return Strip([Segment(text, style)], len(text)).extend_cell_length(width, base)
            return Strip.blank(width, base)
        if not self._styles:
            self._resolve_styles()
        chars = canvas.rows[row]
        codes = canvas.styles[row]
        end = min(canvas.width, scroll_x + width)
        segments: list[Segment] = []
        styles = self._styles
        selected = self.selected
        sel_style = self.get_component_rich_style("graphcanvas--selected") if selected else None
        x = scroll_x
        while x < end:
            code = codes[x]
            run_end = x + 1
            while run_end < end and codes[run_end] == code:
                run_end += 1
            style = base + styles[code] if code < len(styles) else base
            segments.append(Segment(chars[x:run_end], style))
            x = run_end
        strip = Strip(segments)
        for a, b, fill in self._heat_rows.get(row, ()):
            strip = _restyled(strip, a - scroll_x, b - scroll_x, fill)
        if selected is not None and sel_style is not None:
            strip = self._overlay_selected(strip, row, scroll_x, selected, sel_style)
        used = max(0, end - scroll_x)
        return strip.extend_cell_length(width, base) if used < width else strip

    @staticmethod
    def _overlay_selected(
        strip: Strip, row: int, scroll_x: int, box: BoxLayout, style: Style
    ) -> Strip:
        """The selected box's frame cells on ``row`` restyled."""
        if not box.y <= row < box.y + box.h:
            return strip
        if row in (box.y, box.y + box.h - 1):
            spans = [(box.x, box.x + box.w)]
        else:
            spans = [(box.x, box.x + 1), (box.x + box.w - 1, box.x + box.w)]
        for a, b in spans:
            strip = _restyled(strip, a - scroll_x, b - scroll_x, style)
        return strip


def _restyled(strip: Strip, a: int, b: int, style: Style) -> Strip:
    """``strip`` with cells ``a`` to ``b`` (on screen) given ``style`` over their own."""
    if b <= 0 or a >= strip.cell_length:
        return strip
    a, b = max(0, a), min(strip.cell_length, b)
    left, middle, right = strip.divide([a, b, strip.cell_length])
    middle = Strip([Segment(s.text, (s.style or Style()) + style) for s in middle])
    return Strip.join([left, middle, right])
