"""Write a :class:`~freezeview.engine.draw.collapse_values.ViewGraph` as Graphviz DOT.

The DOT text is the ``graphviz`` package's, character for character (its quoting of
ids and labels is the reference), written by :class:`DotWriter`: the package's own
``Digraph`` spends about 20 µs per statement on argument checks and repeated quoting
(4 µs here), which was half of the time freezeview spent drawing a ResNet-50 export.
Running Graphviz is :mod:`freezeview.engine.draw.render`'s job. Every node gets an ``id``
(its view key) and a ``class`` (``fv-op fv-added``, ``fv-ghost fv-removed``,
``fv-attribute fv-kept`` ...), which Graphviz copies onto the node's ``<g>`` element in
SVG output, so the pictures can be styled, searched and checked by tests.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from graphviz import quoting as _gv_quoting

from .collapse_values import Cluster, ViewGraph, ViewNode

__all__ = ["COLOURS", "LEGEND", "DotWriter", "GraphAttrs", "dot_source"]

#: (fill, border) per status. Chosen to read on white and in greyscale print.
COLOURS: dict[str, tuple[str, str]] = {
    "same": ("#f6f8fa", "#57606a"),
    "added": ("#c9f2cf", "#1a7f37"),
    "changed": ("#ffe3a3", "#b7791f"),
    "removed": ("#ffe1e1", "#cf222e"),
    "kept": ("#eadcff", "#6d28d9"),
    "io": ("#dbeafe", "#1d4ed8"),
}

#: Legend entries of diff pictures: (status, text).
LEGEND: tuple[tuple[str, str], ...] = (
    ("added", "added"),
    ("changed", "changed"),
    ("removed", "removed (ghost)"),
    ("kept", "kept attribute"),
)

_SHAPES = {
    "op": "box",
    "attribute": "note",
    "constant": "box",
    "input": "invhouse",
    "output": "house",
    "scope": "box3d",
    "ghost": "box",
}


@dataclass(frozen=True)
class GraphAttrs:
    """Graph-wide layout settings (see render.py for why these defaults were chosen)."""

    rankdir: str = "TB"
    newrank: bool = False
    ordering: str = ""
    splines: str = ""
    fontname: str = "Helvetica"
    #: Graphviz's ``nslimit``: network simplex iterations per box when placing boxes
    #: across ranks (None: Graphviz's own, unlimited; see ``box_ceiling.position_limit``)
    nslimit: float | None = None


# -- DOT text ---------------------------------------------------------------------------
#
# The rules of graphviz.quoting.quote (graphviz 0.20+), checked against the package by
# tests/test_render.py on awkward strings: a valid DOT id (not a keyword) or an HTML-like
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


def _escape(text: str) -> str:
    # DOT labels treat backslash sequences as layout escapes; user text must not.
    return text.replace("\\", "\\\\")


def _label(node: ViewNode) -> str:
    lines = [node.title, *node.rows]
    return "\\n".join(_escape(line) for line in lines)


def _node_attrs(node: ViewNode) -> dict[str, str]:
    fill, border = COLOURS.get(node.status, COLOURS["same"])
    style = ["filled"]
    penwidth = "1"
    if node.role in ("op", "scope", "ghost", "constant"):
        style.append("rounded")
    if node.role in ("input", "output"):
        fill, border = COLOURS["io"]
    if node.role == "attribute" and node.kept and node.status == "same":
        fill, border = COLOURS["kept"]
    if node.kept:
        penwidth = "2.5"
    if node.role == "ghost":
        style.append("dashed")
    if node.role == "scope" and node.status != "same":
        penwidth = "2"
    if node.role == "scope" and node.status == "removed":
        style.append("dashed")
    classes = [f"fv-{node.role}", f"fv-{node.status}"]
    if node.kept:
        classes.append("fv-kept")
    attrs = {
        "id": node.key,
        "class": " ".join(classes),
        "label": _label(node),
        "shape": _SHAPES.get(node.role, "box"),
        "style": ",".join(style),
        "fillcolor": fill,
        "color": border,
        "penwidth": penwidth,
        "tooltip": _escape(node.tooltip)[:1500] or node.title,
    }
    if node.role == "ghost":
        attrs["fontcolor"] = COLOURS["removed"][1]
    return attrs


def _cluster_attrs(cluster: Cluster, name: str) -> dict[str, str]:
    if cluster.kind == "block":
        attrs = {"label": _escape(cluster.label), "style": "dotted", "color": "#8c959f"}
    else:
        attrs = {
            "label": _escape(cluster.label),
            "style": "rounded,dashed",
            "color": "#afb8c1",
            "fontcolor": "#57606a",
        }
    if cluster.status != "same":
        attrs.update(color=COLOURS["changed"][1], penwidth="2", fontcolor=COLOURS["changed"][1])
    attrs["id"] = name
    attrs["class"] = f"fv-cluster fv-{cluster.status}"
    return attrs


def _fill(
    parent: DotWriter,
    view: ViewGraph,
    prefix: str,
) -> None:
    """Add the nodes, clusters and edges of ``view`` to ``parent``."""
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in view.clusters:
        children.setdefault(path[:-1], []).append(path)
    nodes_in: dict[tuple[str, ...], list[ViewNode]] = {}
    for node in view.nodes.values():
        path = node.cluster
        # A node whose cluster was dropped sits in the nearest cluster that exists.
        while path and path not in view.clusters:
            path = path[:-1]
        nodes_in.setdefault(path, []).append(node)
    counter = [0]

    def emit(graph: DotWriter, path: tuple[str, ...]) -> None:
        for node in nodes_in.get(path, []):
            graph.node(node.key, **_node_attrs(node))
        for child in children.get(path, []):
            counter[0] += 1
            name = f"cluster_{prefix}{counter[0]}"
            sub = DotWriter(name=name)
            sub.attr(**_cluster_attrs(view.clusters[child], name))
            emit(sub, child)
            graph.subgraph(sub)

    emit(parent, ())
    for edge in view.edges:
        attrs: dict[str, str] = {}
        if edge.label:
            attrs["label"] = _escape(edge.label)
        if edge.tooltip:
            attrs["tooltip"] = _escape(edge.tooltip)
        style = [edge.style] if edge.style else []
        if edge.status == "removed":
            attrs["color"] = COLOURS["removed"][1]
            style.append("dashed")
        elif edge.style == "dashed":
            attrs["color"] = "#8c959f"
        if edge.count > 1:
            attrs["penwidth"] = str(min(1 + edge.count / 4, 4))
        if style:
            attrs["style"] = ",".join(dict.fromkeys(style))
        parent.edge(edge.tail, edge.head, **attrs)


def _legend(graph: DotWriter, prefix: str = "") -> None:
    sub = DotWriter(name=f"cluster_{prefix}legend")
    sub.attr(label="legend", style="rounded", color="#d0d7de", fontcolor="#57606a", id="legend")
    previous = None
    for status, text in LEGEND:
        fill, border = COLOURS[status]
        key = f"{prefix}legend_{status}"
        sub.node(
            key,
            label=text,
            shape="note" if status == "kept" else "box",
            style="filled,rounded,dashed" if status == "removed" else "filled,rounded",
            fillcolor=fill,
            color=border,
            id=key,
            **{"class": "fv-legend"},
        )
        if previous:
            sub.edge(previous, key, style="invis")
        previous = key
    graph.subgraph(sub)


def _new_graph(title: str, attrs: GraphAttrs) -> DotWriter:
    graph = DotWriter(name="freezeview")
    graph_attrs = {
        "rankdir": attrs.rankdir,
        "fontname": attrs.fontname,
        "fontsize": "12",
        "nodesep": "0.2",
        "ranksep": "0.3",
        "labelloc": "t",
        "label": _escape(title),
        "tooltip": _escape(title) or "freezeview",
    }
    if attrs.newrank:
        graph_attrs["newrank"] = "true"
    if attrs.ordering:
        graph_attrs["ordering"] = attrs.ordering
    if attrs.splines:
        graph_attrs["splines"] = attrs.splines
    if attrs.nslimit is not None:
        graph_attrs["nslimit"] = f"{attrs.nslimit:g}"
    graph.attr(**graph_attrs)
    graph.attr("node", fontname=attrs.fontname, fontsize="10", margin="0.08,0.03", height="0.3")
    graph.attr("edge", fontname=attrs.fontname, fontsize="8", arrowsize="0.6", color="#57606a")
    return graph


def dot_source(
    views: Sequence[tuple[str, ViewGraph]],
    *,
    title: str = "",
    legend: bool = False,
    attrs: GraphAttrs | None = None,
) -> str:
    """The DOT text for one or more views.

    Args:
        views: ``(caption, view)`` pairs. One view fills the picture; several (a
            side-by-side before/after) each get a top-level cluster with their caption.
        title: the picture's caption.
        legend: add the diff colour legend.
        attrs: graph-wide layout settings.

    Returns:
        The DOT source text.
    """
    graph = _new_graph(title, attrs or GraphAttrs())
    if len(views) == 1:
        _fill(graph, views[0][1], "")
    else:
        for index, (caption, view) in enumerate(views):
            name = f"cluster_side{index}"
            sub = DotWriter(name=name)
            sub.attr(
                label=_escape(caption), style="rounded", color="#d0d7de", id=name, fontsize="14"
            )
            _fill(sub, view, f"s{index}_")
            graph.subgraph(sub)
    if legend:
        _legend(graph)
    return graph.source
