"""The IR pane's text view: highlighted IR, ``.code`` or a diff, with a line cursor,
marked lines (an attribute's readers and writers) and search matches.

Why not ``TextArea`` or ``Static(Syntax(...))``: ``TextArea`` highlights through
tree-sitter grammars and there is none for TorchScript IR, and a ``Static`` renders every
line up front, which stalls the event loop on frozen-graph printouts of thousands of
lines. This widget uses Textual's line API (``ScrollView.render_line``): a document is kept
as its plain lines, and a line is shortened (:func:`display_line`), lexed by Pygments
and turned into a strip only when it is drawn (a small cache keeps the recent ones).
Showing a graph of any size costs one ``splitlines``: no whole-document pass ever runs on
the event loop, and the screen process holds the text, not a highlighted copy of it.
IR, unified diffs and TorchScript's ``.code`` lex line by line.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

from pygments.lexer import Lexer
from pygments.lexers import DiffLexer, PythonLexer
from rich.cells import cell_len
from rich.segment import Segment
from rich.style import Style
from rich.syntax import Syntax
from rich.text import Text
from textual.binding import Binding
from textual.geometry import Size
from textual.message import Message
from textual.reactive import reactive
from textual.scroll_view import ScrollView
from textual.strip import Strip

from ...session import demangle
from ..lexer import TorchScriptIRLexer

__all__ = ["IRView", "display_line", "highlight_line", "highlight_lines", "lexer_for"]

_THEME = Syntax.get_theme("monokai")
# Up to this many lines, a document's width is measured as drawn (every line shortened
# as shown, a pass that grows with the document); a longer one's is bounded by its raw
# lines, so showing it costs no such pass.
_EXACT_WIDTH_LINES = 2000
# Big documents whose lines are kept: the loaded model's and the last two shown.
_KEPT_SPLITS = 3
# Drawn lines kept (whole, and as shown at a scroll offset): some twenty screens. Each
# is a Textual Strip with caches of its own, in reference cycles: once dropped, only the
# screen's deep collection at a run's start frees them, and it walks every one kept
# (so each one more lengthens that walk, at every run).
_FULL_STRIPS = 1000
_SHOWN_STRIPS = 600
# A kept document: its text, lines, width, and drawn lines by mode.
_Split = tuple[str, list[str], int, dict[str, dict[int, Strip]]]


def lexer_for(mode: str) -> Lexer:
    """The Pygments lexer for a view mode: ``ir``, ``code`` or ``diff``."""
    if mode == "code":
        return PythonLexer(stripnl=False, ensurenl=False)
    if mode == "diff":
        return DiffLexer(stripnl=False, ensurenl=False)
    return TorchScriptIRLexer(stripnl=False, ensurenl=False)


# `# /home/builder/venv/lib/python3.11/site-packages/torch/nn/modules/conv.py:560:15`
# at the end of IR lines: the directories belong to the machine that built the model and
# push the code out of view; the inspector shows the full location of the selected line.
_SOURCE_COMMENT_RE = re.compile(r"# [^#\n]*/(?P<file>[^/#\n]+:\d+:\d+)$", re.MULTILINE)


def display_text(text: str) -> str:
    """The IR pane's version of ``text``: no type mangling, source comments as ``file:line``.

    Lines are neither added nor removed, so line numbers still match the graph's nodes.
    """
    return _SOURCE_COMMENT_RE.sub(r"# \g<file>", demangle(text))


def display_line(line: str) -> str:
    """One line of :func:`display_text` (the same change, made to one line)."""
    return _SOURCE_COMMENT_RE.sub(r"# \g<file>", demangle(line))


_LEXERS: dict[str, Lexer] = {}


def highlight_line(line: str, mode: str) -> Text:
    """One line as the IR pane draws it: :func:`display_line`, with the syntax colours
    of ``mode`` (``ir``, ``code`` or ``diff``; any other mode is plain text)."""
    if mode not in ("ir", "code", "diff"):
        return Text(display_line(line))
    lexer = _LEXERS.get(mode)
    if lexer is None:
        lexer = _LEXERS[mode] = lexer_for(mode)
    text = Text()
    # With its newline: lexers match whole lines (a diff's ``+...\n``).
    for token, value in lexer.get_tokens(display_line(line) + "\n"):
        if value != "\n":
            text.append(value.rstrip("\n"), _THEME.get_style_for_token(token))
    return text


def highlight_lines(text: str, mode: str) -> list[Text]:
    """Lex ``text`` once and split it into one rich ``Text`` per line.

    Blocking: the app calls it from a thread worker for large documents.
    """
    text = display_text(text)
    lines: list[Text] = [Text()]
    for token, value in lexer_for(mode).get_tokens(text):
        style = _THEME.get_style_for_token(token)
        parts = value.split("\n")
        for i, part in enumerate(parts):
            if i:
                lines.append(Text())
            if part:
                lines[-1].append(part, style)
    if len(lines) > 1 and not lines[-1].plain:
        lines.pop()
    return lines


class IRView(ScrollView, can_focus=True):
    """Scrollable, highlighted text with a cursor line, marked lines and search."""

    BINDINGS = [
        Binding("up", "cursor_up", "Up", show=False),
        Binding("down", "cursor_down", "Down", show=False),
        Binding("pageup", "page_up", "Page up", show=False),
        Binding("pagedown", "page_down", "Page down", show=False),
        Binding("home", "cursor_home", "Top", show=False),
        Binding("end", "cursor_end", "Bottom", show=False),
    ]

    DEFAULT_CSS = """
    IRView { background: $surface; }
    """

    #: Line (from 0) under the cursor; the inspector shows the node printed on it.
    cursor_line: reactive[int] = reactive(0)

    class CursorMoved(Message):
        """The cursor moved to another line."""

        def __init__(self, view: IRView, line: int) -> None:
            super().__init__()
            self.view = view
            self.line = line

    def __init__(self, *, id: str | None = None, classes: str | None = None) -> None:
        super().__init__(id=id, classes=classes)
        # The document's lines as given; coloured ones when the caller lexed them.
        self._raw: list[str] = []
        # id(text) -> (text, its lines, its width, its drawn lines by mode), for the last
        # few big documents.
        self._splits: dict[int, _Split] = {}
        self._lines: list[Text] | None = None
        self._marked: frozenset[int] = frozenset()
        self._matches: list[int] = []
        self._cache: dict[tuple[int, int, int, bool, bool, bool], Strip] = {}
        # Whole-line strips, rendered once per document and mode (rendering a long IR
        # line through rich costs far more than cropping it; a big document's stay with
        # its lines, so the loaded model's IR shown again on r draws at once); cropping
        # and overlays are per frame.
        self._full: dict[int, Strip] = {}
        self.mode = "ir"
        #: The document's text, as given to :meth:`set_document`.
        self.document = ""
        #: True when the lines carry syntax colours: always, as each is drawn.
        self.highlighted = False

    # -- content -------------------------------------------------------------------
    @property
    def line_count(self) -> int:
        """Number of lines in the document."""
        return len(self._raw)

    def plain_lines(self) -> list[str]:
        """The document's lines as shown, without colours (tests; a whole-document pass)."""
        if self._lines is not None:
            return [line.plain for line in self._lines]
        return [display_line(line) for line in self._raw]

    def set_document(self, text: str, mode: str, lines: list[Text] | None = None) -> None:
        """Show ``text``: each line as :func:`display_line` gives it (no per-clone type
        mangling, short source comments), coloured for ``mode`` when it is drawn.

        ``lines``: the same lines already highlighted (:func:`highlight_lines`), shown
        as they are.
        """
        same = text == self.document and mode == self.mode
        self.document = text
        self.mode = mode
        self._raw, width, drawn = self._split(text)
        self._full = drawn.setdefault(mode, {})
        self._lines = lines if lines is not None and len(lines) == len(self._raw) else None
        self.highlighted = True
        self._cache.clear()
        self.virtual_size = Size(width + 1, len(self._raw))
        if not same:
            self._matches = []
            self._marked = frozenset(m for m in self._marked if m < len(self._raw))
            self.cursor_line = min(self.cursor_line, max(0, len(self._raw) - 1))
        self.refresh()

    def _split(self, text: str) -> tuple[list[str], int, dict[str, dict[int, Strip]]]:
        """The document's lines, width and drawn lines by mode; the last few documents'
        are kept (a re-run shows the loaded model's IR again, on ``r``: kept, a big one is
        neither split nor drawn again while the user waits)."""
        kept = self._splits.get(id(text))
        if kept is not None and kept[0] is text:
            self._splits[id(text)] = self._splits.pop(id(text))  # the most recent now
            return kept[1], kept[2], kept[3]
        raw = text.splitlines()
        if len(raw) <= _EXACT_WIDTH_LINES:
            width = max((cell_len(display_line(line)) for line in raw), default=0)
        else:  # source comments are shortened when drawn: the raw width is an upper bound
            width = max(map(len, raw), default=0)
        drawn: dict[str, dict[int, Strip]] = {}
        if len(raw) > _EXACT_WIDTH_LINES:  # only big documents are worth keeping
            while len(self._splits) >= _KEPT_SPLITS:
                self._splits.pop(next(iter(self._splits)))
            self._splits[id(text)] = (text, raw, width, drawn)
        return raw, width, drawn

    def _styled(self, index: int) -> Text:
        """Line ``index`` as drawn (lexed now unless the caller gave it lexed)."""
        if self._lines is not None:
            return self._lines[index]
        return highlight_line(self._raw[index], self.mode)

    def mark_lines(self, lines: Iterable[int]) -> None:
        """Highlight these lines (an attribute's readers and writers)."""
        self._marked = frozenset(lines)
        self._cache.clear()
        self.refresh()

    @property
    def marked_lines(self) -> frozenset[int]:
        """Lines currently marked."""
        return self._marked

    # -- search --------------------------------------------------------------------
    def search(self, query: str) -> list[int]:
        """Mark the lines containing ``query`` (case-insensitive); return them."""
        q = query.lower()
        # Lines are searched as given, and as shown where showing changes them (a
        # demangled type name); a shortened source comment is part of the given line.
        self._matches = [
            i
            for i, line in enumerate(self._raw)
            if q and (q in line.lower() or ("mangle" in line and q in display_line(line).lower()))
        ]
        self._cache.clear()
        self.refresh()
        return self._matches

    @property
    def matches(self) -> list[int]:
        """Lines matching the last search."""
        return self._matches

    def next_match(self, forward: bool = True) -> int | None:
        """Move the cursor to the next (or previous) search match."""
        if not self._matches:
            return None
        cur = self.cursor_line
        if forward:
            target = next((m for m in self._matches if m > cur), self._matches[0])
        else:
            target = next((m for m in reversed(self._matches) if m < cur), self._matches[-1])
        self.cursor_line = target
        return target

    # -- cursor --------------------------------------------------------------------
    def validate_cursor_line(self, value: int) -> int:
        return max(0, min(value, max(0, len(self._raw) - 1)))

    def watch_cursor_line(self, old: int, new: int) -> None:
        self._cache.clear()
        self.scroll_to_line(new)
        self.refresh()
        self.post_message(self.CursorMoved(self, new))

    def scroll_to_line(self, line: int) -> None:
        """Scroll so that ``line`` is visible (centred when it was off screen)."""
        top = self.scroll_offset.y
        height = max(1, self.size.height)
        if not top <= line < top + height:
            self.scroll_to(y=max(0, line - height // 2), animate=False)

    def action_cursor_up(self) -> None:
        self.cursor_line -= 1

    def action_cursor_down(self) -> None:
        self.cursor_line += 1

    def action_page_up(self) -> None:
        self.cursor_line -= max(1, self.size.height - 1)

    def action_page_down(self) -> None:
        self.cursor_line += max(1, self.size.height - 1)

    def action_cursor_home(self) -> None:
        self.cursor_line = 0

    def action_cursor_end(self) -> None:
        self.cursor_line = len(self._raw) - 1

    def on_click(self, event: object) -> None:
        y = getattr(event, "y", None)
        if isinstance(y, int):
            self.cursor_line = self.scroll_offset.y + y

    # -- drawing -------------------------------------------------------------------
    def render_line(self, y: int) -> Strip:
        scroll_x, scroll_y = self.scroll_offset
        index = y + scroll_y
        width = self.size.width
        base = self.rich_style
        if index >= len(self._raw):
            return Strip.blank(width, base)
        cursor = index == self.cursor_line and self.has_focus
        key = (index, scroll_x, width, cursor, index in self._marked, index in self._matches)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        full = self._full.get(index)
        if full is None:
            text = self._styled(index)
            full = Strip(list(text.render(self.app.console, end="")), text.cell_len)
            if len(self._full) > _FULL_STRIPS:
                self._full.clear()
            self._full[index] = full
        strip = full.crop_extend(scroll_x, scroll_x + width, base)
        overlay = None
        if key[5]:
            overlay = self.get_component_rich_style("irview--match")
        elif key[4]:
            overlay = self.get_component_rich_style("irview--marked")
        if cursor or (index == self.cursor_line and not self.has_focus and self._raw):
            cursor_style = self.get_component_rich_style(
                "irview--cursor" if cursor else "irview--cursor-blur"
            )
            overlay = cursor_style if overlay is None else overlay + cursor_style
        if overlay is not None:
            strip = Strip([Segment(s.text, (s.style or Style()) + overlay) for s in strip], width)
        if len(self._cache) > _SHOWN_STRIPS:
            self._cache.clear()
        self._cache[key] = strip
        return strip

    COMPONENT_CLASSES = {
        "irview--cursor",
        "irview--cursor-blur",
        "irview--marked",
        "irview--match",
    }

    def on_focus(self) -> None:
        self._cache.clear()
        self.refresh()

    def on_blur(self) -> None:
        self._cache.clear()
        self.refresh()
