"""What freezeview draws: the values a drawing is made of.

A :class:`Drawing` holds boxes (:class:`Box`), edges (:class:`BoxEdge`) and
clusters (:class:`Cluster`); :func:`~.build.build_drawing` makes one from a snapshot,
:mod:`freezeview.engine.draw.pictures.dot_source` writes it as DOT and
:mod:`freezeview.engine.draw.terminal.layout` lays it out in terminal cells. They are
plain, torch-free values, so the app's screen can receive them from the engine process.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

__all__ = ["CONSTANT_MODES", "Box", "BoxEdge", "Cluster", "Drawing"]

#: How constants are shown: folded into their users as rows, folded but with trivial
#: ones (None, bools, small ints, short int lists) left out, or as nodes of their own.
CONSTANT_MODES = ("fold", "hide-trivial", "nodes")


@dataclass
class Box:
    """One box in the picture.

    Attributes:
        key: the DOT node id (also the ``id`` of its ``<g>`` element in the SVG).
        role: ``op``, ``attribute`` (a value read by ``prim::GetAttr``), ``constant``
            (only with ``constants="nodes"``), ``input``, ``output``, ``scope`` (a
            collapsed submodule) or ``ghost`` (a removed op drawn where it was).
        title: first label line (op kind, attribute path, scope name).
        rows: further label lines (folded inputs, counts).
        cluster: path of the clusters holding it (see :class:`Cluster`).
        status: ``same``, ``added``, ``changed`` or ``removed``.
        tooltip: text shown when hovering the node in an SVG viewer.
        node_ids: snapshot node ids it stands for (before-graph ids for ghosts).
        ghost_ids: for ``scope`` boxes in a diff, the before-graph ids of removed ops
            counted in the box.
        counts: for ``scope`` boxes, ``ops``/``added``/``removed``/``changed`` counts.
        kept: an attribute freezing kept (drawn to stand out).
    """

    key: str
    role: str
    title: str
    rows: list[str] = field(default_factory=list)
    cluster: tuple[str, ...] = ()
    status: str = "same"
    tooltip: str = ""
    node_ids: list[int] = field(default_factory=list)
    ghost_ids: list[int] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    kept: bool = False


@dataclass
class BoxEdge:
    """A drawn edge (one per pair of boxes; ``count`` values merged into it)."""

    tail: str
    head: str
    label: str = ""
    tooltip: str = ""
    status: str = "same"
    style: str = ""
    count: int = 1


@dataclass
class Cluster:
    """A cluster: a module scope or a block of a ``prim::If``/``prim::Loop``.

    Clusters are keyed by their path, a tuple of segments from the outermost one
    (``("s:layer1", "s:layer1.0", "b:57.0")``), so that the same scope nested in two
    different blocks gives two clusters and the nesting Graphviz needs is a prefix tree.
    """

    path: tuple[str, ...]
    label: str
    kind: str  # "scope" or "block"
    status: str = "same"


@dataclass
class Drawing:
    """What to draw: nodes, edges, clusters and what was folded away.

    Attributes:
        nodes: drawn boxes by key, in drawing order.
        edges: drawn edges.
        clusters: clusters by path.
        level: collapse level used (``None``: every op drawn).
        folded: snapshot ids drawn inside other nodes rather than as boxes.
        ghost_folded: before-graph ids folded into ghosts (diff pictures only).
        title: a caption for the picture.
    """

    nodes: dict[str, Box]
    edges: list[BoxEdge]
    clusters: dict[tuple[str, ...], Cluster]
    level: int | None
    folded: set[int] = field(default_factory=set)
    ghost_folded: set[int] = field(default_factory=set)
    title: str = ""
    scopes: dict[int, str] = field(default_factory=dict)
    ghost_scopes: dict[int, str] = field(default_factory=dict)

    def drawn_scopes(self) -> list[str]:
        """Effective scopes of every op this graph draws (ghosts included), for budgets."""
        out = [s for i, s in self.scopes.items() if i not in self.folded]
        out += [s for i, s in self.ghost_scopes.items()]
        return out

    def holder(self, node_id: int, *, ghost: bool = False) -> Box | None:
        """The box showing node ``node_id``: its own box or the scope box it is counted in.

        Args:
            node_id: a node id of the drawn graph, or of the before-graph with ``ghost``.
            ghost: look for a removed op (a ghost) instead.
        """
        for node in self.nodes.values():
            if node.role == "scope":
                if node_id in (node.ghost_ids if ghost else node.node_ids):
                    return node
            elif (node.role == "ghost") == ghost and node_id in node.node_ids:
                return node
        return None
