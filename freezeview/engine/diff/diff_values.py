"""What a structural diff found: the :class:`GraphDiff` of two snapshots and its facts.

:func:`~freezeview.engine.diff.diff.diff_snapshots` makes them; the pictures, the reports
and the app read them. Torch-free values, so the app's screen can hold them too.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from ..graph import GraphSnapshot, NodeSnapshot

__all__ = ["DiffFacts", "GraphDiff", "NodeInfo", "diff_facts", "notable_kind_changes"]


@dataclass(frozen=True, slots=True)
class NodeInfo:
    """Facts about one node that the diff and the renderer both need.

    Attributes:
        node: the snapshot node.
        parent: id of the ``prim::If``/``prim::Loop`` whose block holds it, or None.
        block: index of that block in its parent (0 for the then-branch / loop body).
        depth: number of enclosing blocks.
        attribute: for ``prim::GetAttr``, the dotted attribute path read from ``self``
            (``conv.weight``); for a folded constant, the attribute it came from.
    """

    node: NodeSnapshot
    parent: int | None
    block: int
    depth: int
    attribute: str | None


@dataclass
class GraphDiff:
    """The difference between two snapshots of a graph.

    Attributes:
        before: the earlier snapshot.
        after: the later snapshot.
        matched: before node id -> after node id, for every node found in both
            (changed ones included).
        added: ids (in ``after``) of nodes with no counterpart before.
        removed: ids (in ``before``) of nodes with no counterpart after.
        changed: ids (in ``after``) of matched nodes that differ, with one short text
            per difference (``"input 2: conv.weight -> conv.weight_fused_bn"``).
        replaced: removed ``prim::GetAttr`` id (before) -> added ``prim::Constant`` id
            (after) holding the same attribute: where freezing inlined an attribute.
    """

    before: GraphSnapshot
    after: GraphSnapshot
    matched: dict[int, int]
    added: frozenset[int]
    removed: frozenset[int]
    changed: dict[int, tuple[str, ...]]
    replaced: dict[int, int] = field(default_factory=dict)
    _before_info: dict[int, NodeInfo] = field(default_factory=dict, repr=False, compare=False)
    _after_info: dict[int, NodeInfo] = field(default_factory=dict, repr=False, compare=False)

    @property
    def is_empty(self) -> bool:
        """True when nothing was added, removed or changed."""
        return not (self.added or self.removed or self.changed)

    @property
    def before_info(self) -> dict[int, NodeInfo]:
        """:func:`index_nodes` of ``before`` (computed once)."""
        return self._before_info

    @property
    def after_info(self) -> dict[int, NodeInfo]:
        """:func:`index_nodes` of ``after`` (computed once)."""
        return self._after_info

    def status(self, after_id: int) -> str:
        """``added``, ``changed`` or ``same`` for a node of ``after``."""
        if after_id in self.added:
            return "added"
        if after_id in self.changed:
            return "changed"
        return "same"

    def counts(self) -> dict[str, int]:
        """Number of added, removed, changed and unchanged (``same``) nodes."""
        return {
            "added": len(self.added),
            "removed": len(self.removed),
            "changed": len(self.changed),
            "same": len(self.matched) - len(self.changed),
        }

    def kind_counts(self) -> dict[str, Counter[str]]:
        """Per status (``added``/``removed``/``changed``), how many nodes of each kind."""
        a, b = self._after_info, self._before_info
        return {
            "added": Counter(a[i].node.kind for i in self.added),
            "removed": Counter(b[i].node.kind for i in self.removed),
            "changed": Counter(a[i].node.kind for i in self.changed),
        }

    def summary(self) -> str:
        """One line for people: ``+2 added, -5 removed, ~1 changed (aten::batch_norm -1)``."""
        if self.is_empty:
            return "no change"
        c = self.counts()
        kinds = self.kind_counts()
        delta: Counter[str] = Counter()
        delta.update(kinds["added"])
        delta.subtract(kinds["removed"])
        notable = notable_kind_changes(delta)
        text = f"+{c['added']} added, -{c['removed']} removed, ~{c['changed']} changed"
        return f"{text} ({', '.join(notable)})" if notable else text


#: What :func:`diff_snapshots` found, without the snapshots: matched, added, removed,
#: changed, replaced (see :class:`GraphDiff`). Plain ints and strings, cheap to pickle.
DiffFacts = tuple[
    dict[int, int], frozenset[int], frozenset[int], dict[int, tuple[str, ...]], dict[int, int]
]


def diff_facts(diff: GraphDiff) -> DiffFacts:
    """The findings of ``diff`` alone, for a forked helper to send back (forked.py)."""
    return (diff.matched, diff.added, diff.removed, diff.changed, diff.replaced)


def notable_kind_changes(delta: Counter[str], most: int = 4) -> list[str]:
    """The node kinds whose count moved most (``"aten::batch_norm -1"``), constants aside.

    Args:
        delta: node kind -> change in count (after minus before).
        most: how many to name.
    """
    ranked = sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
    return [f"{kind} {n:+d}" for kind, n in ranked if n and kind != "prim::Constant"][:most]
