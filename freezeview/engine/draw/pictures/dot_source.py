"""A :class:`~freezeview.engine.draw.folding.drawing.Drawing` written as Graphviz DOT.

Every box gets an ``id`` (its drawing key) and a ``class`` (``fv-op fv-added``,
``fv-ghost fv-removed``, ``fv-attribute fv-kept`` ...), which Graphviz copies onto the
box's ``<g>`` element in SVG output, so the pictures can be styled, searched and checked
by tests; diff pictures carry the colour legend. With an :class:`~.overlay.Overlay`,
timed boxes are filled by their share of the forward's time (with the heat scale's
legend) and marked nodes outlined; without one the text is what it always was. The DOT
text itself is written by
:class:`~freezeview.engine.draw.dot.text.DotWriter`; running Graphviz is
:mod:`freezeview.engine.draw.pictures.render`'s job.
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

from ..dot.text import DotWriter, GraphAttrs
from ..folding.drawing import Box, Cluster, Drawing
from .overlay import HEAT_SCALE, OUTLINE, Overlay, band_label, heat_band

__all__ = ["COLOURS", "LEGEND", "dot_source"]

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


def _escape(text: str) -> str:
    # DOT labels treat backslash sequences as layout escapes; user text must not.
    return text.replace("\\", "\\\\")


def _label(node: Box) -> str:
    lines = [node.title, *node.rows]
    return "\\n".join(_escape(line) for line in lines)


def _node_attrs(node: Box, overlay: Overlay | None = None) -> dict[str, str]:
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
    if overlay is not None:
        _overlaid(attrs, node, overlay)
    return attrs


def _overlaid(attrs: dict[str, str], node: Box, overlay: Overlay) -> None:
    """``attrs`` with the overlay's heat fill, time tooltip and outline (in place)."""
    text = overlay.time_text(node) if overlay.heat else ""
    if text:
        attrs["tooltip"] = (_escape(text) + "\n" + attrs["tooltip"])[:1500]
    share = overlay.share(node) if overlay.heat and node.role != "ghost" else None
    if share is not None:
        band = heat_band(share)
        _upper, fill, ink = HEAT_SCALE[band]
        attrs["fillcolor"] = fill
        attrs["fontcolor"] = ink
        attrs["class"] += f" fv-heat fv-heat-{band}"
        if node.status in ("added", "changed"):
            # The fill is the time's now: what the step did stays on the border.
            attrs["penwidth"] = f"{max(float(attrs['penwidth']), 2.5):g}"
    if overlay.marks(node):
        attrs["color"], attrs["penwidth"] = OUTLINE
        attrs["class"] += " fv-moved"
        moved = "the numbers move here: the first node whose value differs"
        attrs["tooltip"] = (moved + "\n" + attrs["tooltip"])[:1500]


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
    drawing: Drawing,
    prefix: str,
    overlay: Overlay | None = None,
) -> None:
    """Add the nodes, clusters and edges of ``drawing`` to ``parent``."""
    children: dict[tuple[str, ...], list[tuple[str, ...]]] = {}
    for path in drawing.clusters:
        children.setdefault(path[:-1], []).append(path)
    nodes_in: dict[tuple[str, ...], list[Box]] = {}
    for node in drawing.nodes.values():
        path = node.cluster
        # A node whose cluster was dropped sits in the nearest cluster that exists.
        while path and path not in drawing.clusters:
            path = path[:-1]
        nodes_in.setdefault(path, []).append(node)
    counter = [0]

    def emit(graph: DotWriter, path: tuple[str, ...]) -> None:
        for node in nodes_in.get(path, []):
            graph.node(node.key, **_node_attrs(node, overlay))
        for child in children.get(path, []):
            counter[0] += 1
            name = f"cluster_{prefix}{counter[0]}"
            sub = DotWriter(name=name)
            sub.attr(**_cluster_attrs(drawing.clusters[child], name))
            emit(sub, child)
            graph.subgraph(sub)

    emit(parent, ())
    for edge in drawing.edges:
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


def _legend(graph: DotWriter, prefix: str = "", *, heat: bool = False) -> None:
    sub = DotWriter(name=f"cluster_{prefix}legend")
    sub.attr(label="legend", style="rounded", color="#d0d7de", fontcolor="#57606a", id="legend")
    previous = None
    for status, text in LEGEND:
        fill, border = COLOURS[status]
        if heat and status in ("added", "changed"):
            # Under the heat overlay an op's fill is its time's: what the step did to it
            # is the border.
            fill, text = "#ffffff", f"{text} (border)"
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


def _heat_legend(graph: DotWriter, overlays: Sequence[Overlay]) -> None:
    """The heat scale's bands (and the outline's meaning), with the clocks that timed."""
    clocks = ", ".join(dict.fromkeys(o.clock for o in overlays if o.heat and o.clock))
    sub = DotWriter(name="cluster_heat_legend")
    label = "share of the forward's time" + (f" ({clocks})" if clocks else "")
    sub.attr(label=label, style="rounded", color="#d0d7de", fontcolor="#57606a", id="heat-legend")
    keys: list[str] = []
    if any(o.heat for o in overlays):
        for band, (_upper, fill, ink) in enumerate(HEAT_SCALE):
            key = f"heat_legend_{band}"
            sub.node(
                key,
                label=band_label(band),
                shape="box",
                style="filled,rounded",
                fillcolor=fill,
                fontcolor=ink,
                color="#57606a",
                id=key,
                **{"class": f"fv-legend fv-heat-legend fv-heat-{band}"},
            )
            keys.append(key)
    if any(o.outlined for o in overlays):
        key = "heat_legend_moved"
        sub.node(
            key,
            label="numbers move here",
            shape="box",
            style="filled,rounded",
            fillcolor="#ffffff",
            color=OUTLINE[0],
            penwidth=OUTLINE[1],
            id=key,
            **{"class": "fv-legend fv-moved-legend"},
        )
        keys.append(key)
    for tail, head in itertools.pairwise(keys):
        sub.edge(tail, head, style="invis")
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
    drawings: Sequence[tuple[str, Drawing]],
    *,
    title: str = "",
    legend: bool = False,
    attrs: GraphAttrs | None = None,
    overlays: Sequence[Overlay | None] = (),
) -> str:
    """The DOT text for one or more drawings.

    Args:
        drawings: ``(caption, drawing)`` pairs. One drawing fills the picture; several (a
            side-by-side before/after) each get a top-level cluster with their caption.
        title: the picture's caption.
        legend: add the diff colour legend.
        attrs: graph-wide layout settings.
        overlays: per drawing, the times and marks drawn over its boxes (None or
            missing: none); with any, the heat scale's legend is added.

    Returns:
        The DOT source text.
    """
    graph = _new_graph(title, attrs or GraphAttrs())
    over = [overlays[i] if i < len(overlays) else None for i in range(len(drawings))]
    if len(drawings) == 1:
        _fill(graph, drawings[0][1], "", over[0])
    else:
        for index, (caption, drawing) in enumerate(drawings):
            name = f"cluster_side{index}"
            sub = DotWriter(name=name)
            sub.attr(
                label=_escape(caption), style="rounded", color="#d0d7de", id=name, fontsize="14"
            )
            _fill(sub, drawing, f"s{index}_", over[index])
            graph.subgraph(sub)
    given = [o for o in over if o is not None and (o.heat or o.outlined)]
    if legend:
        _legend(graph, heat=any(o.heat for o in given))
    if given:
        _heat_legend(graph, given)
    return graph.source
