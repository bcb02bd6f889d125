"""DOT text as the ``graphviz`` package writes it, character for character, written fast.

:class:`DotWriter` is the subset of ``graphviz.Digraph`` freezeview uses; its quoting of
ids and labels is the package's (the reference), but the package's own ``Digraph``
spends about 20 µs per statement on argument checks and repeated quoting (4 µs here),
which was half of the time freezeview spent drawing a ResNet-50 export.
:class:`GraphAttrs` holds the graph-wide layout settings every picture is handed with.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass

from graphviz import quoting as _gv_quoting

__all__ = ["DotWriter", "GraphAttrs"]


@dataclass(frozen=True)
class GraphAttrs:
    """Graph-wide layout settings (``freezeview.engine.draw.pictures.render``
    says why these defaults were chosen)."""

    rankdir: str = "TB"
    newrank: bool = False
    ordering: str = ""
    splines: str = ""
    fontname: str = "Helvetica"
    #: Graphviz's ``nslimit``: network simplex iterations per box when placing boxes
    #: across ranks (None: Graphviz's own, unlimited; see ``ceiling.position_limit``)
    nslimit: float | None = None


# -- DOT text ---------------------------------------------------------------------------
#
# The rules of graphviz.quoting.quote (graphviz 0.20+), checked against the package by
# tests/engine/draw/test_dot.py on awkward strings: a valid DOT id (not a keyword) or an HTML-like
# string ``<...>`` stays bare; anything else is double-quoted with unescaped quotes
# escaped. The rare strings the package warns about (an odd number of trailing
# backslashes) go through the package itself, warning included.
_ID_RE = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*|-?(\.[0-9]+|[0-9]+(\.[0-9]*)?))$")
_HTML_RE = re.compile(r"<.*>$", re.DOTALL)
_KEYWORDS = frozenset({"node", "edge", "graph", "digraph", "subgraph", "strict"})
_QUOTES_RE = re.compile(r"(?P<escaped_backslashes>(?:\\{2})*)\\?(?P<literal_quote>\")")
# Attribute names and values repeat endlessly (colours, shapes, styles): quoted once.
_QUOTED: dict[str, str] = {}
_QUOTED_MAX = 4096


def _quote(text: str) -> str:
    """``graphviz.quoting.quote(text)``, the same result."""
    hit = _QUOTED.get(text)
    if hit is not None:
        return hit
    if _HTML_RE.match(text):
        quoted = text
    elif not _ID_RE.match(text) or text.lower() in _KEYWORDS:
        if text.endswith(("\\", "\\\n")):
            return _gv_quoting.quote(text)  # may warn, as the package does
        escaped = (
            _QUOTES_RE.sub(r"\g<escaped_backslashes>\\\g<literal_quote>", text)
            if '"' in text
            else text
        )
        quoted = f'"{escaped}"'
    else:
        quoted = text
    if len(text) <= 40 and len(_QUOTED) < _QUOTED_MAX:
        _QUOTED[text] = quoted
    return quoted


def _quote_edge(name: str) -> str:
    """``graphviz.quoting.quote_edge(name)``: ``node[:port[:compass]]``."""
    node, _, rest = name.partition(":")
    parts = [_quote(node)]
    if rest:
        port, _, compass = rest.partition(":")
        parts.append(_quote(port))
        if compass:
            parts.append(compass)
    return ":".join(parts)


def _pair(name: str, value: str) -> str:
    """``name=value``, quoted; the short pairs every node repeats are built once."""
    if len(value) > 40:
        return f"{_quote(name)}={_quote(value)}"
    key = (name, value)
    hit = _PAIRS.get(key)
    if hit is None:
        hit = f"{_quote(name)}={_quote(value)}"
        if len(_PAIRS) < _QUOTED_MAX:
            _PAIRS[key] = hit
    return hit


_PAIRS: dict[tuple[str, str], str] = {}


def _a_list(label: str | None, attrs: Mapping[str, str | None]) -> str:
    """``graphviz.quoting.a_list``: ``label`` first, then the attributes sorted by name."""
    out = [f"label={_quote(label)}"] if label is not None else []
    pairs = _PAIRS
    # Looked up here first: every node and edge of a picture passes through with 2-10
    # pairs, nearly all of them built already.
    out += [pairs.get((k, v)) or _pair(k, v) for k, v in sorted(attrs.items()) if v is not None]
    return " ".join(out)


def _attr_list(label: str | None, attrs: Mapping[str, str | None]) -> str:
    content = _a_list(label, attrs)
    return f" [{content}]" if content else ""


class DotWriter:
    """The subset of ``graphviz.Digraph`` freezeview uses, writing the same DOT text.

    Args:
        name: the graph's (or subgraph's) name.
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self.body: list[str] = []

    def node(self, name: str, label: str | None = None, **attrs: str) -> None:
        """A node statement (``label`` first, other attributes sorted, as graphviz does)."""
        self.body.append(f"\t{_quote(name)}{_attr_list(label, attrs)}\n")

    def edge(self, tail: str, head: str, label: str | None = None, **attrs: str) -> None:
        """An edge statement ``tail -> head``."""
        self.body.append(
            f"\t{_quote_edge(tail)} -> {_quote_edge(head)}{_attr_list(label, attrs)}\n"
        )

    def attr(self, kw: str | None = None, **attrs: str) -> None:
        """A graph attribute statement, or a ``node``/``edge``/``graph`` default one."""
        if not attrs:
            return
        if kw is None:
            self.body.append(f"\t{_a_list(None, attrs)}\n")
        else:
            self.body.append(f"\t{kw}{_attr_list(None, attrs)}\n")

    def subgraph(self, graph: DotWriter) -> None:
        """Add ``graph`` as a subgraph (its statements indented one tab more)."""
        self.body += [f"\t{line}" for line in graph.lines(subgraph=True)]

    def lines(self, *, subgraph: bool = False) -> list[str]:
        """The statements, head and closing brace included."""
        name = _quote(self.name) + " " if self.name else ""
        head = f"subgraph {name}{{\n" if subgraph else f"digraph {name}{{\n"
        return [head, *self.body, "}\n"]

    @property
    def source(self) -> str:
        """The DOT text."""
        return "".join(self.lines())
