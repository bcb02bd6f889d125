"""The matching: which nodes of two snapshots are the same node, and what changed in them.

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

:func:`~freezeview.engine.diff.diff.diff_snapshots` is the way in (it keeps recent sides and
diffs); this module holds the algorithm.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import cached_property

from ..graph import GraphSnapshot, NodeSnapshot, demangle
from ..plumbing import plural
from .diff_values import DiffFacts, GraphDiff, NodeInfo

# Kinds whose value freezeview draws inside the node that reads it rather than as a
# node of its own (see render.py); a difference in one of them is a change of the user.
FOLDABLE_KINDS = frozenset({"prim::Constant", "prim::ListConstruct", "prim::TupleConstruct"})

# Inputs freezeview draws inside the node that reads them (draw/folding/build.py).
_DRAWN_INSIDE = frozenset({"prim::Constant", "prim::GetAttr", *FOLDABLE_KINDS})

_SUFFIX_RE = re.compile(r"\.\d+$")


def _type_text(type_text: str) -> str:
    # The mangling number of a cloned type says nothing about the node. Most types
    # (``Tensor``, ``int``) hold none, and a diff reads every output type of 17k-node
    # graphs more than once: the regex only runs where it can match.
    return demangle(type_text) if "___torch_mangle_" in type_text else type_text


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


class DiffSide:
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
    # merely drawn (draw/folding/build.py indexes every snapshot it draws through this class).
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


def graph_diff(b: DiffSide, a: DiffSide, facts: DiffFacts) -> GraphDiff:
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


def match_snapshots(b: DiffSide, a: DiffSide) -> GraphDiff:
    """Match the nodes of two prepared snapshots (see the module's docstring)."""
    before, after = b.snapshot, a.snapshot
    if before is after or (before.node_count == after.node_count and before.text == after.text):
        # The same printout is the same graph, node for node in walk order (a pass that
        # did nothing). Constants print as `<Tensor>`, so their summaries are still
        # compared below; the same object cannot differ from itself at all.
        same = dict(zip(b.order, a.order, strict=True))
        changed = {} if before is after else _changes(b, a, same)
        return graph_diff(b, a, (same, frozenset(), frozenset(), changed, {}))
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

    def signature(
        side: DiffSide, node_id: int, mapping: dict[int, int] | None
    ) -> tuple[object, ...]:
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
    return graph_diff(b, a, (matched, added, removed, changed, _replacements(b, a, added, removed)))


def _changes(
    b: DiffSide, a: DiffSide, matched: dict[int, int], identical: frozenset[int] = frozenset()
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
            reasons.append(f"{plural(len(old.inputs), 'input')} -> {len(new.inputs)}")
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
    b: DiffSide,
    a: DiffSide,
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


def _value_label(side: DiffSide, name: str) -> str:
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
    b: DiffSide, a: DiffSide, added: frozenset[int], removed: frozenset[int]
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
