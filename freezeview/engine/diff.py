"""Compare two graph snapshots: which nodes match, which were added, removed or changed.

Freezing and the folding passes rename values (``%weight.1`` becomes
``%self.conv.weight``, a fused weight becomes ``%self.conv.weight_fused_bn``) and
renumber everything, so freezeview cannot match nodes by value name or position. It
matches them the way a reviewer would, by what they are and where they sit:

1. **Structure.** Every node gets a hash of its kind, module scope, source line,
   attributes, constant value/provenance and the hashes of the nodes feeding it (graph
   inputs by position). Nodes whose whole upstream is identical match first.
2. **Neighbourhood.** The remaining nodes are grouped by a looser key (kind, scope,
   source line, nesting, the attribute a constant or ``prim::GetAttr`` stands for) and
   matched when they are alone in their group, or when their inputs come from nodes
   that already match; this is repeated until nothing more matches, so matches
   propagate downstream from the graph inputs.
3. **Order.** What is still ambiguous inside a group is paired in graph order.

A matched pair is *changed* when it sits in the same place but differs: other node
attributes or output types, another constant value (a fused weight), or an input that
freezeview draws inside the node (a constant, a constant list, an attribute read) that
is not the same as before. A re-wired edge alone (``relu`` now reading the conv because
the batch_norm between them was folded) is not a change of the node.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass, field
from functools import cached_property

from .forked import renewed_in_children
from .naming import demangle
from .snapshot_values import GraphSnapshot, NodeSnapshot
from .text_diff import line_opcodes, unified_ir_diff, unified_text_diff

__all__ = [
    "DiffFacts",
    "GraphDiff",
    "NodeInfo",
    "adopt_diff",
    "diff_facts",
    "diff_snapshots",
    "index_nodes",
    "line_opcodes",
    "unified_ir_diff",
    "unified_text_diff",
]

# Kinds whose value freezeview draws inside the node that reads it rather than as a
# node of its own (see render.py); a difference in one of them is a change of the user.
FOLDABLE_KINDS = frozenset({"prim::Constant", "prim::ListConstruct", "prim::TupleConstruct"})

# Inputs freezeview draws inside the node that reads them (render.py, collapse.py).
_DRAWN_INSIDE = frozenset({"prim::Constant", "prim::GetAttr", *FOLDABLE_KINDS})

_SUFFIX_RE = re.compile(r"\.\d+$")


def _type_text(type_text: str) -> str:
    # The mangling number of a cloned type says nothing about the node. Most types
    # (``Tensor``, ``int``) hold none, and a diff reads every output type of 17k-node
    # graphs more than once: the regex only runs where it can match.
    return demangle(type_text) if "___torch_mangle_" in type_text else type_text


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


# Snapshots are immutable, so what is computed from one can be reused while it lives.
# An export diffs every step against the next and draws each snapshot several times;
# keeping the last few prepared snapshots (with a reference, so ids stay unique)
# avoids redoing that work for 10k-node graphs. The app reads them from worker
# threads, hence the lock.
_CACHE_SIZE = 16
_side_cache: OrderedDict[int, tuple[GraphSnapshot, _Side]] = OrderedDict()
_cache_lock = renewed_in_children(threading.Lock())  # the forked helper diffs too


def _side_for(snapshot: GraphSnapshot) -> _Side:
    with _cache_lock:
        hit = _side_cache.get(id(snapshot))
        if hit is not None and hit[0] is snapshot:
            _side_cache.move_to_end(id(snapshot))
            return hit[1]
    side = _Side(snapshot)
    with _cache_lock:
        _side_cache[id(snapshot)] = (snapshot, side)
        while len(_side_cache) > _CACHE_SIZE:
            _side_cache.popitem(last=False)
    return side


# Diffs of the same two snapshots are asked for more than once in an export (its
# pictures, then the pipeline's step notes), so recent results are kept too.
_DIFF_CACHE_SIZE = 32
_diff_cache: OrderedDict[tuple[int, int], tuple[GraphSnapshot, GraphSnapshot, GraphDiff]] = (
    OrderedDict()
)


def index_nodes(snapshot: GraphSnapshot) -> dict[int, NodeInfo]:
    """Every node of ``snapshot`` by id, with its nesting and attribute path.

    Args:
        snapshot: the graph to index.

    Returns:
        Node id -> :class:`NodeInfo`, in walk order (shared; do not modify).
    """
    return _side_for(snapshot).info


def _index_nodes(snapshot: GraphSnapshot) -> dict[int, NodeInfo]:
    infos: dict[int, NodeInfo] = {}
    paths = snapshot.attribute_paths()

    def visit(nodes: Iterable[NodeSnapshot], parent: int | None, block: int, depth: int) -> None:
        for node in nodes:
            attribute = paths.get(node.outputs[0].name) if node.outputs else None
            if node.constant is not None and node.constant.attribute:
                attribute = node.constant.attribute
            infos[node.id] = NodeInfo(node, parent, block, depth, attribute)
            for index, sub in enumerate(node.blocks):
                visit(sub.nodes, node.id, index, depth + 1)

    visit(snapshot.block.nodes, None, 0, 0)
    return infos


def _constant_identity(node: NodeSnapshot) -> tuple[str, ...]:
    """What a constant *is*: kind, printed value and the full provenance name.

    The provenance name keeps folding suffixes (``conv.weight_fused_bn``), so a weight
    rewritten by a folding pass does not look identical to the original one.
    """
    assert node.constant is not None
    name = node.outputs[0].name if node.outputs else ""
    origin = _SUFFIX_RE.sub("", name[len("self.") :]) if name.startswith("self.") else ""
    c = node.constant
    return (c.kind, c.text, c.dtype or "", str(c.shape or ""), origin)


def _source_key(node: NodeSnapshot) -> tuple[str, int]:
    return (node.source.file, node.source.line) if node.source else ("", 0)


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

    def scope_counts(self) -> dict[str, Counter[str]]:
        """Per module scope, how many nodes were added, removed and changed.

        Removed nodes count in the scope they had before; the others in their scope after.
        """
        out: dict[str, Counter[str]] = {}
        for i in self.added:
            out.setdefault(self._after_info[i].node.scope, Counter())["added"] += 1
        for i in self.changed:
            out.setdefault(self._after_info[i].node.scope, Counter())["changed"] += 1
        for i in self.removed:
            out.setdefault(self._before_info[i].node.scope, Counter())["removed"] += 1
        return out

    def summary(self) -> str:
        """One line for people: ``+2 added, -5 removed, ~1 changed (aten::batch_norm -1)``."""
        if self.is_empty:
            return "no change"
        c = self.counts()
        kinds = self.kind_counts()
        delta: Counter[str] = Counter()
        delta.update(kinds["added"])
        delta.subtract(kinds["removed"])
        notable = [
            f"{kind} {n:+d}"
            for kind, n in sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
            if n and kind != "prim::Constant"
        ][:4]
        text = f"+{c['added']} added, -{c['removed']} removed, ~{c['changed']} changed"
        return f"{text} ({', '.join(notable)})" if notable else text


class _Side:
    """One snapshot prepared for matching."""

    def __init__(self, snapshot: GraphSnapshot) -> None:
        self.snapshot = snapshot
        self.info = _index_nodes(snapshot)
        self.order = list(self.info)
        # Value name -> id of the node defining it, and its position among that node's
        # outputs when it is not the first. Two flat maps of ints rather than one of
        # (id, index) pairs: a 17k-node graph's sides are kept while an export lasts,
        # and every pair would be one more object for the garbage collector to scan.
        self.producer: dict[str, int] = {}
        self.output_index: dict[str, int] = {}
        # Graph inputs and block parameters are matched by position.
        self.params: dict[str, str] = {v.name: f"in{i}" for i, v in enumerate(snapshot.inputs)}
        producer, output_index, params = self.producer, self.output_index, self.params
        self._sources: dict[int, tuple[tuple[str, object], ...]] = {}
        for node_id, info in self.info.items():
            node = info.node
            for index, out in enumerate(node.outputs):
                producer[out.name] = node_id
                if index:
                    output_index[out.name] = index
            for b, block in enumerate(node.blocks):
                for i, v in enumerate(block.inputs):
                    params[v.name] = f"p{node_id}.{b}.{i}"

    # The matching keys are only needed when the snapshot is diffed, not when it is
    # merely drawn (collapse.py indexes every snapshot it draws through this class).
    @cached_property
    def loose(self) -> dict[int, tuple[object, ...]]:
        """Node id -> the loose grouping key (kind, scope, source line, nesting...)."""
        # Nodes share their source locations (snapshot.py), so they share the
        # (file, line) pairs made of them too.
        where: dict[int, tuple[str, int]] = {}
        return {i: self._loose_key(info, where) for i, info in self.info.items()}

    @cached_property
    def inside_values(self) -> frozenset[str]:
        """Values produced by nodes drawn inside their users (constants, attribute reads)."""
        return frozenset(
            out.name
            for info in self.info.values()
            if info.node.kind in _DRAWN_INSIDE
            for out in info.node.outputs
        )

    @cached_property
    def strict(self) -> dict[int, int]:
        """Node id -> hash of the node and everything upstream of it."""
        return self._strict_hashes()

    def _loose_key(self, info: NodeInfo, where: dict[int, tuple[str, int]]) -> tuple[object, ...]:
        node = info.node
        source = where.get(id(node.source))
        if source is None:
            source = where[id(node.source)] = _source_key(node)
        parent_kind = self.info[info.parent].node.kind if info.parent is not None else ""
        if node.kind == "prim::Constant":
            assert node.constant is not None
            what: object = info.attribute or (node.constant.kind, node.constant.text)
        elif node.kind == "prim::GetAttr":
            what = info.attribute or node.attribute("name")
        else:
            what = ""
        return (node.kind, node.scope, source, info.depth, parent_kind, info.block, what)

    def _strict_hashes(self) -> dict[int, int]:
        # One pass in walk order (producers before users). This runs once per snapshot
        # over every node of 17k-node graphs, so the lookups are hoisted out of the loop.
        hashes: dict[int, int] = {}
        loose, producer, params = self.loose, self.producer, self.params
        output_index = self.output_index
        for node_id, info in self.info.items():
            node = info.node
            outputs = node.outputs
            if node.kind == "prim::Constant":
                types: tuple[str, ...] = ()
            elif len(outputs) == 1:
                types = (_type_text(outputs[0].type),)
            else:
                types = tuple(_type_text(v.type) for v in outputs)
            local = (
                loose[node_id],
                node.attributes,
                types,
                _constant_identity(node) if node.constant is not None else (),
            )
            ins: list[object] = []
            for name in node.inputs:
                upstream = hashes.get(producer.get(name, -1))
                ins.append(
                    (upstream, output_index.get(name, 0))
                    if upstream is not None
                    else params.get(name, "?")
                )
            hashes[node_id] = hash((local, tuple(ins)))
        return hashes

    def sources(self, node_id: int) -> tuple[tuple[str, object], ...]:
        """Where each input of a node comes from (:meth:`input_source`), remembered."""
        found = self._sources.get(node_id)
        if found is None:
            found = self._sources[node_id] = tuple(
                self.input_source(name) for name in self.info[node_id].node.inputs
            )
        return found

    def input_source(self, name: str) -> tuple[str, object]:
        """Where a value comes from: ('node', (id, output index)) or ('param', position)."""
        produced = self.producer.get(name)
        if produced is not None:
            return ("node", (produced, self.output_index.get(name, 0)))
        return ("param", self.params.get(name, "?"))


def diff_snapshots(before: GraphSnapshot, after: GraphSnapshot) -> GraphDiff:
    """Match the nodes of two snapshots of the same method and classify the differences.

    Args:
        before: the graph before a step (or before freezing).
        after: the graph after it.

    Returns:
        A :class:`GraphDiff`, shared with later calls for the same two snapshots (do not
        modify it). Diffing a snapshot against itself (or against a snapshot of an
        identical graph) reports nothing added, removed or changed.

    Example::

        d = diff_snapshots(snapshot_graph(g1), snapshot_graph(g2))
        print(d.summary())  # +0 added, -1 removed, ~1 changed (aten::batch_norm -1)
    """
    key = (id(before), id(after))
    with _cache_lock:
        hit = _diff_cache.get(key)
        if hit is not None and hit[0] is before and hit[1] is after:
            _diff_cache.move_to_end(key)
            return hit[2]
    result = _diff(before, after)
    _remember(before, after, result)
    return result


def _remember(before: GraphSnapshot, after: GraphSnapshot, result: GraphDiff) -> None:
    with _cache_lock:
        _diff_cache[(id(before), id(after))] = (before, after, result)
        while len(_diff_cache) > _DIFF_CACHE_SIZE:
            _diff_cache.popitem(last=False)


#: What :func:`diff_snapshots` found, without the snapshots: matched, added, removed,
#: changed, replaced (see :class:`GraphDiff`). Plain ints and strings, cheap to pickle.
DiffFacts = tuple[
    dict[int, int], frozenset[int], frozenset[int], dict[int, tuple[str, ...]], dict[int, int]
]


def diff_facts(diff: GraphDiff) -> DiffFacts:
    """The findings of ``diff`` alone, for a forked helper to send back (forked.py)."""
    return (diff.matched, diff.added, diff.removed, diff.changed, diff.replaced)


def adopt_diff(before: GraphSnapshot, after: GraphSnapshot, facts: DiffFacts) -> GraphDiff:
    """The :class:`GraphDiff` of ``before`` and ``after`` from facts found elsewhere.

    A forked copy of this process diffed the same two snapshots (node ids are the
    snapshots' own, so they mean the same here). The result is remembered as
    :func:`diff_snapshots`'s own would be, so later calls for the pair get it.
    """
    result = _graph_diff(_side_for(before), _side_for(after), facts)
    _remember(before, after, result)
    return result


def _graph_diff(b: _Side, a: _Side, facts: DiffFacts) -> GraphDiff:
    matched, added, removed, changed, replaced = facts
    return GraphDiff(
        before=b.snapshot,
        after=a.snapshot,
        matched=matched,
        added=added,
        removed=removed,
        changed=changed,
        replaced=replaced,
        _before_info=b.info,
        _after_info=a.info,
    )


def _diff(before: GraphSnapshot, after: GraphSnapshot) -> GraphDiff:
    b, a = _side_for(before), _side_for(after)
    if before is after or (before.node_count == after.node_count and before.text == after.text):
        # The same printout is the same graph, node for node in walk order (a pass that
        # did nothing). Constants print as `<Tensor>`, so their summaries are still
        # compared below; the same object cannot differ from itself at all.
        same = dict(zip(b.order, a.order, strict=True))
        changed = {} if before is after else _changes(b, a, same)
        return _graph_diff(b, a, (same, frozenset(), frozenset(), changed, {}))
    matched: dict[int, int] = {}
    rev: dict[int, int] = {}

    def pair(x: int, y: int) -> None:
        matched[x] = y
        rev[y] = x

    # 1. Identical upstream structure. Equal hashes in both graphs pair in graph order
    # (the hashes are kept in walk order).
    by_hash: dict[int, list[int]] = {}
    for node_id, strict in b.strict.items():
        by_hash.setdefault(strict, []).append(node_id)
    taken: dict[int, int] = {}
    for node_id, strict in a.strict.items():
        candidates = by_hash.get(strict)
        if not candidates:
            continue
        k = taken.get(strict, 0)
        if k < len(candidates):
            pair(candidates[k], node_id)
            taken[strict] = k + 1
    identical = frozenset(rev)

    # 2. Neighbourhood propagation inside groups of equal loose keys.
    pending: dict[tuple[object, ...], tuple[list[int], list[int]]] = {}
    for node_id in b.order:
        if node_id not in matched:
            pending.setdefault(b.loose[node_id], ([], []))[0].append(node_id)
    for node_id in a.order:
        if node_id not in rev:
            pending.setdefault(a.loose[node_id], ([], []))[1].append(node_id)

    def groups() -> list[tuple[list[int], list[int]]]:
        # Drop what matched since the last round; keep groups with both sides left.
        live = []
        for key, (olds, news) in list(pending.items()):
            olds[:] = [i for i in olds if i not in matched]
            news[:] = [i for i in news if i not in rev]
            if olds and news:
                live.append((olds, news))
            else:
                del pending[key]
        return live

    def signature(side: _Side, node_id: int, mapping: dict[int, int] | None) -> tuple[object, ...]:
        sig: list[object] = []
        for kind, where in side.sources(node_id):
            if kind == "node":
                assert isinstance(where, tuple)
                producer = where[0] if mapping is None else mapping.get(where[0])
                sig.append(("n", producer, where[1]) if producer is not None else ("?",))
            else:
                sig.append(("p", where))
        return tuple(sig)

    progress = True
    while progress:
        progress = False
        for olds, news in groups():
            if len(olds) == 1 and len(news) == 1:
                pair(olds[0], news[0])
                progress = True
                continue
            # Inputs expressed in after-ids: a before node and an after node whose
            # already-matched inputs coincide are the same node.
            old_sigs: dict[tuple[object, ...], list[int]] = {}
            for node_id in olds:
                sig = signature(b, node_id, matched)
                if ("?",) in sig:
                    continue
                old_sigs.setdefault(sig, []).append(node_id)
            if not old_sigs:
                continue
            for node_id in news:
                sig = signature(a, node_id, None)
                hits = old_sigs.get(sig)
                if hits and node_id not in rev:
                    pair(hits.pop(0), node_id)
                    progress = True

    # 3. Whatever is left in a group pairs in graph order.
    for olds, news in groups():
        for x, y in zip(olds, news, strict=False):
            pair(x, y)

    added = frozenset(i for i in a.order if i not in rev)
    removed = frozenset(i for i in b.order if i not in matched)
    changed = _changes(b, a, matched, identical)
    return _graph_diff(
        b, a, (matched, added, removed, changed, _replacements(b, a, added, removed))
    )


def _changes(
    b: _Side, a: _Side, matched: dict[int, int], identical: frozenset[int] = frozenset()
) -> dict[int, tuple[str, ...]]:
    """Why each matched node changed (after id -> reasons), for those that did.

    ``identical``: after ids matched by equal structural hashes, whose own kind,
    attributes, output types, constant value and input count are equal by construction;
    only what they draw inside them (constants, attribute reads) is compared.
    """
    changed: dict[int, tuple[str, ...]] = {}
    # Walk in after-graph order: producers come before their users, so a changed
    # constant is known before the node that draws it.
    rev = {y: x for x, y in matched.items()}
    b_inside, a_inside = b.inside_values, a.inside_values
    for after_id in a.order:
        before_id = rev.get(after_id)
        if before_id is None:
            continue
        old, new = b.info[before_id].node, a.info[after_id].node
        reasons: list[str] = []
        if after_id not in identical:
            reasons += _own_changes(old, new)
        if len(old.inputs) != len(new.inputs):
            reasons.append(f"{len(old.inputs)} inputs -> {len(new.inputs)}")
        elif not (b_inside.isdisjoint(old.inputs) and a_inside.isdisjoint(new.inputs)):
            for index, (x, y) in enumerate(zip(old.inputs, new.inputs, strict=True)):
                # Most inputs come from ops on both sides: never a change of this node.
                if x not in b_inside and y not in a_inside:
                    continue
                reason = _input_change(b, a, matched, changed, index, x, y)
                if reason:
                    reasons.append(reason)
        if reasons:
            changed[after_id] = tuple(reasons)
    return changed


def _own_changes(old: NodeSnapshot, new: NodeSnapshot) -> list[str]:
    """Differences of the node itself: constant value, attributes, output types."""
    if old.constant is not None and new.constant is not None:
        if _constant_identity(old) != _constant_identity(new):
            return [f"value {_constant_label(old)} -> {_constant_label(new)}"]
        return []
    reasons = []
    if old.attributes != new.attributes:
        reasons.append("attributes " + _attrs(old) + " -> " + _attrs(new))
    # Equal printed lines print the same output types, and equal printed types are
    # equal demangled types: demangle only when they differ.
    if (old.line != new.line or not old.line) and tuple(v.type for v in old.outputs) != tuple(
        v.type for v in new.outputs
    ):
        old_types = tuple(_type_text(v.type) for v in old.outputs)
        new_types = tuple(_type_text(v.type) for v in new.outputs)
        if old_types != new_types:
            reasons.append(f"type {', '.join(old_types)} -> {', '.join(new_types)}")
    return reasons


def _input_change(
    b: _Side,
    a: _Side,
    matched: dict[int, int],
    changed: dict[int, tuple[str, ...]],
    index: int,
    old_value: str,
    new_value: str,
) -> str | None:
    """Why input ``index`` counts as a change of its user, or None.

    Only inputs drawn inside the user (constants, constant lists, attribute reads)
    count; an edge from another op that was merely re-wired does not.
    """
    old_src, new_src = b.producer.get(old_value), a.producer.get(new_value)
    old_node = b.info[old_src].node if old_src is not None else None
    new_node = a.info[new_src].node if new_src is not None else None
    old_inside = old_node is not None and old_node.kind in _DRAWN_INSIDE
    new_inside = new_node is not None and new_node.kind in _DRAWN_INSIDE
    if not (old_inside or new_inside):
        return None
    assert old_src is None or old_node is not None
    same = (
        old_src is not None
        and new_src is not None
        and matched.get(old_src) == new_src
        and new_src not in changed
    )
    if same:
        return None
    return f"input {index}: {_value_label(b, old_value)} -> {_value_label(a, new_value)}"


def _value_label(side: _Side, name: str) -> str:
    produced = side.producer.get(name)
    if produced is None:
        return f"%{name}"
    info = side.info[produced]
    if info.node.kind == "prim::Constant":
        return _constant_label(info.node)
    if info.node.kind == "prim::GetAttr" and info.attribute:
        return f"self.{info.attribute}"
    return f"{info.node.kind}(%{name})"


def _constant_label(node: NodeSnapshot) -> str:
    assert node.constant is not None
    name = node.outputs[0].name if node.outputs else ""
    if name.startswith("self."):
        return f"{_SUFFIX_RE.sub('', name[len('self.') :])} {node.constant.text}"
    return node.constant.text


def _attrs(node: NodeSnapshot) -> str:
    return "[" + ", ".join(f"{k}={v}" for k, v in node.attributes) + "]"


def _replacements(
    b: _Side, a: _Side, added: frozenset[int], removed: frozenset[int]
) -> dict[int, int]:
    """Removed attribute reads whose attribute now arrives as an added constant."""
    constants: dict[str, int] = {}
    for node_id in sorted(added):
        info = a.info[node_id]
        if info.node.kind == "prim::Constant" and info.attribute:
            constants.setdefault(info.attribute, node_id)
    out: dict[int, int] = {}
    for node_id in sorted(removed):
        info = b.info[node_id]
        if info.node.kind == "prim::GetAttr" and info.attribute in constants:
            out[node_id] = constants[info.attribute]
    return out
