"""A snapshot prepared for drawing, computed once and reused by every picture of it.

Folding decisions, each op's effective scope, the drawn edges (grouped by the pair of
scopes they join) and the ops gathered by scope depend on the snapshot alone, not on
the level or the boxes a picture opens: an export draws each snapshot several times,
so they are kept per snapshot (:func:`prepare_snapshot`) while it lives. Counting boxes per
level (:func:`drawn_scope_counts`, :func:`levels`) reads them too.
"""

from __future__ import annotations

import threading
from collections import Counter, OrderedDict
from collections.abc import Container, Iterable
from dataclasses import dataclass, field
from functools import cached_property

from ...diff import NodeInfo, index_nodes
from ...graph import GraphSnapshot
from .rows import Folder
from .scopes import scope_depth, scopes_by_producer

__all__ = ["drawn_scope_counts", "drawn_scopes", "forget_prepared", "levels"]


@dataclass(slots=True)
class ScopeOps:
    """The drawn ops of one effective scope (see :attr:`PreparedSide.ops_by_scope`).

    Attributes:
        ids: their node ids, in walk order.
        kinds: op kind -> ``[count, id of the first]`` (value reads and
            constants are not ops here, as in a module box's tooltip).
        reads: attribute paths of the ``prim::GetAttr`` value reads among them.
    """

    ids: list[int] = field(default_factory=list)
    kinds: dict[str, list[int]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)


class PreparedSide:
    """One snapshot prepared for drawing: folding, scopes and edges, computed once."""

    def __init__(
        self,
        snapshot: GraphSnapshot,
        info: dict[int, NodeInfo],
        folder: Folder,
        modules: frozenset[str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.info = info
        self.folder = folder
        self.scopes = scopes_by_producer(info, folder.producer, modules)

    @cached_property
    def levels(self) -> list[int | None]:
        """Collapse levels that make a difference, coarsest first, then None."""
        depth = max((scope_depth(s) for s in set(self.scopes.values())), default=0)
        return [*range(1, depth + 1), None]

    @cached_property
    def edges(self) -> list[tuple[int, int | str, str, str]]:
        """Every edge between drawn nodes, as ``(head id, tail, value, style)``.

        ``tail`` is a node id, or ``"i<k>"`` for graph input ``k``. What a drawing draws
        only depends on where each id ends up (its own box or a module box), so the
        walk over the graph is done once per snapshot, not once per picture.
        """
        return self._layout[0]

    @cached_property
    def edge_groups(self) -> dict[tuple[str, str, str], list[int]]:
        """Indices into :attr:`edges`, grouped by ``(input tail, tail scope, head scope)``.

        ``input tail`` is the ``"i<k>"`` of a graph input tail (its tail scope then
        ``""``), else ``""``. Every edge of a group joins the same two module boxes
        whenever both scopes are collapsed, so a collapsed picture counts a group in one
        step instead of edge by edge.
        """
        return self._layout[1]

    @cached_property
    def ops_by_scope(self) -> dict[str, ScopeOps]:
        """The drawn (not folded) ops of each effective scope, scopes in the order they
        first occur.

        A collapsed picture needs only each module box's totals, and a box is a union of
        scopes: gathering the ops by scope once per snapshot lets every picture of it
        place a few hundred scopes instead of visiting each of up to 17k nodes.
        """
        return self._layout[2]

    @cached_property
    def _layout(
        self,
    ) -> tuple[
        list[tuple[int, int | str, str, str]],
        dict[tuple[str, str, str], list[int]],
        dict[str, ScopeOps],
    ]:
        """:attr:`edges`, :attr:`edge_groups` and :attr:`ops_by_scope`, from one walk over
        the drawn nodes (each picture needs all three, and on a 17k-node graph the walk,
        one value-name lookup per input, is most of their cost).

        The walk goes backwards: every reader of a value comes after its producer in a
        snapshot (ids are walk positions), so by the time an op is reached it is known
        whether anything reads it, which is what its dotted edge depends on, without a
        first pass collecting every value name read. Edges and ids are turned round at
        the end.
        """
        info, scopes = self.info, self.scopes
        folded, get_producer = self.folder.folded, self.folder.producer.get
        inputs = {v.name: f"i{k}" for k, v in enumerate(self.snapshot.inputs)}
        owner_of, read = self._block_links()
        # What the walk gives back to front: edges, and per head scope the edge indices
        # by tail scope or by graph input (keyed by strings at hand rather than a tuple
        # built and hashed per edge).
        edges: list[tuple[int, int | str, str, str]] = []
        from_scopes: dict[str, dict[str, list[int]]] = {}
        from_inputs: dict[str, dict[str, list[int]]] = {}
        by_scope: dict[str, ScopeOps] = {}
        edges_append, read_add = edges.append, read.add

        def add(head_scope: str, tail: int | str, edge: tuple[int, int | str, str, str]) -> None:
            if isinstance(tail, str):
                groups, key = from_inputs.setdefault(head_scope, {}), tail
            else:
                groups, key = from_scopes.setdefault(head_scope, {}), scopes[tail]
            group = groups.get(key)
            if group is None:
                groups[key] = [len(edges)]
            else:
                group.append(len(edges))
            edges.append(edge)

        def tail_of(value: str) -> int | str | None:
            # Its producer (none when that is folded), else a graph input, else the
            # If/Loop whose block takes it.
            pid = get_producer(value)
            if pid is not None:
                read.add(pid)
                return None if pid in folded else pid
            return inputs.get(value) or owner_of.get(value)

        for node_id, i in reversed(info.items()):
            if node_id in folded:
                continue
            node = i.node
            scope = scopes[node_id]
            ops = by_scope.get(scope)
            if ops is None:
                ops = by_scope[scope] = ScopeOps()
            ops.ids.append(node_id)
            kind = node.kind
            if kind == "prim::GetAttr":
                ops.reads.append(i.attribute or node.attribute("name") or "?")
            elif kind != "prim::Constant":
                seen = ops.kinds.get(kind)
                if seen is None:
                    ops.kinds[kind] = [1, node_id]
                else:
                    seen[0] += 1
                    seen[1] = node_id  # walking backwards: the first so far
            # Ops that end a block without returning anything (prim::RaiseException)
            # get a dotted edge to the owner so the branch sits next to its If. A
            # folded node never reads a drawn one (it reads constants, `self` and
            # other folded nodes only), so the drawn readers walked so far are all.
            if i.parent is not None and node_id not in read:
                add(scopes[i.parent], node_id, (i.parent, node_id, "", "dotted"))
            # Values returned by a block flow into the If/Loop that owns it.
            for block in reversed(node.blocks) if node.blocks else ():
                for value in reversed(block.outputs):
                    tail = tail_of(value)
                    if tail is not None:
                        add(scope, tail, (node_id, tail, value, "dashed"))
            # The hot loop (one pass per input of up to 17k nodes), so the common case,
            # a drawn producer, is written out here rather than through tail_of and add.
            head_groups = from_scopes.get(scope)
            if head_groups is None:
                head_groups = from_scopes[scope] = {}
            for value in reversed(node.inputs):
                pid = get_producer(value)
                if pid is None:
                    tail = inputs.get(value) or owner_of.get(value)
                    if tail is not None:
                        add(scope, tail, (node_id, tail, value, ""))
                    continue
                read_add(pid)
                if pid in folded:
                    continue
                group = head_groups.get(scopes[pid])
                if group is None:
                    head_groups[scopes[pid]] = [len(edges)]
                else:
                    group.append(len(edges))
                edges_append((node_id, pid, value, ""))
        return _turned(edges, from_scopes, from_inputs, by_scope)

    def _block_links(self) -> tuple[dict[str, int], set[int]]:
        """Block parameter -> the If/Loop owning it, and the ids of the nodes whose values
        a block or the graph returns (they are read, though by no node's inputs)."""
        get_producer = self.folder.producer.get
        owner_of: dict[str, int] = {}
        returned = [*self.snapshot.outputs]
        owners = [(node_id, i.node) for node_id, i in self.info.items() if i.node.blocks]
        for node_id, node in owners:
            for block in node.blocks:
                returned += block.outputs
                for v in block.inputs:
                    owner_of[v.name] = node_id
        read = {pid for pid in map(get_producer, returned) if pid is not None}
        return owner_of, read

    @cached_property
    def output_tails(self) -> list[tuple[int | str, str]]:
        """``(tail, value)`` for each graph output, as in :attr:`edges`."""
        inputs = {v.name: f"i{k}" for k, v in enumerate(self.snapshot.inputs)}
        out: list[tuple[int | str, str]] = []
        for value in self.snapshot.outputs:
            pid = self.folder.producer.get(value)
            if pid is not None and pid not in self.folder.folded:
                out.append((pid, value))
            elif pid is None and value in inputs:
                out.append((inputs[value], value))
        return out


# Snapshots are immutable: folding decisions, scopes and edges are reused across the
# several pictures an export draws of one snapshot (a reference keeps each id unique;
# the lock because the app draws from worker threads).
_prepared_cache: OrderedDict[
    tuple[int, str, frozenset[str] | None], tuple[GraphSnapshot, PreparedSide]
] = OrderedDict()
_prepared_lock = threading.Lock()


def forget_prepared(*snapshots: GraphSnapshot) -> None:
    """Drop the prepared snapshots kept for reuse: those of ``snapshots``, or all (the
    app, when a re-run replaces every step: a big model's prepared snapshots hold
    hundreds of MB; an export, once its pictures are drawn)."""
    with _prepared_lock:
        if not snapshots:
            _prepared_cache.clear()
            return
        gone = {id(snapshot) for snapshot in snapshots}
        for key in [k for k, (snap, _) in _prepared_cache.items() if id(snap) in gone]:
            del _prepared_cache[key]


def prepare_snapshot(
    snapshot: GraphSnapshot, constants: str, modules: frozenset[str] | None = None
) -> PreparedSide:
    key = (id(snapshot), constants, modules)
    with _prepared_lock:
        hit = _prepared_cache.get(key)
        if hit is not None and hit[0] is snapshot:
            _prepared_cache.move_to_end(key)
            return hit[1]
    info = index_nodes(snapshot)
    side = PreparedSide(snapshot, info, Folder(snapshot, info, constants), modules)
    with _prepared_lock:
        _prepared_cache[key] = (snapshot, side)
        while len(_prepared_cache) > 16:
            _prepared_cache.popitem(last=False)
    return side


def drawn_scopes(
    snapshot: GraphSnapshot,
    constants: str = "fold",
    ids: Iterable[int] | None = None,
    modules: frozenset[str] | None = None,
) -> list[str]:
    """The scope each drawn op of ``snapshot`` is placed in (for counting boxes per level).

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES` (what is folded).
        ids: only these node ids (e.g. a diff's removed nodes); default: all.
        modules: :func:`module_paths` of the model (real paths for ModuleList items).
    """
    side = prepare_snapshot(snapshot, constants, modules)
    chosen = side.info if ids is None else ids
    return [side.scopes[i] for i in chosen if i not in side.folder.folded]


def drawn_scope_counts(
    snapshot: GraphSnapshot,
    constants: str = "fold",
    ids: Iterable[int] | None = None,
    modules: frozenset[str] | None = None,
) -> Counter[str]:
    """:func:`drawn_scopes` counted: scope -> how many drawn ops it holds.

    What choosing a level needs (:func:`count_at_level` takes it as is); for a whole
    snapshot it comes from the ops already gathered by scope, not from a 17k-long list.

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES` (what is folded).
        ids: only these node ids (e.g. a diff's removed nodes); default: all.
        modules: :func:`module_paths` of the model (real paths for ModuleList items).
    """
    if ids is not None:
        return Counter(drawn_scopes(snapshot, constants, ids, modules))
    side = prepare_snapshot(snapshot, constants, modules)
    return Counter({scope: len(ops.ids) for scope, ops in side.ops_by_scope.items()})


def levels(
    snapshot: GraphSnapshot, constants: str = "fold", modules: frozenset[str] | None = None
) -> list[int | None]:
    """Collapse levels that make a difference for ``snapshot``, coarsest first, then None.

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES`.
        modules: :func:`module_paths` of the model, to count depth on real module paths.
    """
    return list(prepare_snapshot(snapshot, constants, modules).levels)


def _turned(
    edges: list[tuple[int, int | str, str, str]],
    from_scopes: dict[str, dict[str, list[int]]],
    from_inputs: dict[str, dict[str, list[int]]],
    by_scope: dict[str, ScopeOps],
) -> tuple[
    list[tuple[int, int | str, str, str]],
    dict[tuple[str, str, str], list[int]],
    dict[str, ScopeOps],
]:
    """What :attr:`PreparedSide._layout` gathered walking backwards, put in walk order."""
    edges.reverse()
    last = len(edges) - 1
    groups: dict[tuple[str, str, str], list[int]] = {}
    for head_scope, tails in from_scopes.items():
        for tail_scope, indices in tails.items():
            groups[("", tail_scope, head_scope)] = [last - k for k in reversed(indices)]
    for head_scope, tails in from_inputs.items():
        for tail, indices in tails.items():
            groups[(tail, "", head_scope)] = [last - k for k in reversed(indices)]
    for ops in by_scope.values():
        ops.ids.reverse()
        ops.reads.reverse()
    # Scopes in the order they first occur, as pictures place them.
    ordered = dict(sorted(by_scope.items(), key=lambda item: item[1].ids[0]))
    return edges, groups, ordered


def readers_of(
    edges: Iterable[tuple[int, int | str, str, str]], tails: Container[int]
) -> dict[str, list[int]]:
    """Value name -> ids of the nodes reading it, for the values of ``tails``, in walk
    order (what ``snapshot.consumers()`` gives for them).

    Taken from a snapshot's drawn edges: a folded node never reads a drawn one (it reads
    constants, ``self`` and other folded nodes only), so for drawn ``tails`` the heads
    of their plain edges are all their readers.
    """
    readers: dict[str, list[int]] = {}
    for head_id, tail, value, style in edges:
        if not style and tail in tails:
            found = readers.get(value)
            if found is None:
                readers[value] = [head_id]
            else:
                found.append(head_id)
    return readers
