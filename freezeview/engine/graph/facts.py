"""Facts read off a graph snapshot for the app's IR pane and inspector: which IR line is
which node, which lines touch an attribute, and what an operator's schema says about
writes and aliases.

Everything here works on :class:`~freezeview.engine.graph.snapshot.GraphSnapshot` values (no
torch graph needed), so the app can answer for any step, long after torch rewrote the
graph in place.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING

from .schema_text import schema_args, schema_effects_text

if TYPE_CHECKING:
    from .snapshot_values import GraphSnapshot, NodeSnapshot

__all__ = [
    "NodeFacts",
    "attribute_node_ids",
    "line_index",
    "node_facts",
    "schema_effects",
]

_KIND_RE = re.compile(r"(?<![\w:])([A-Za-z_]\w*::\w+)[(\[]")
_SUFFIX_RE = re.compile(r"\.\d+$")


def line_index(snapshot: GraphSnapshot) -> tuple[dict[int, int], dict[int, int]]:
    """Map IR text lines to nodes and back.

    torch prints nodes in the same pre-order as :meth:`GraphSnapshot.walk`, one header
    line each, so a single forward scan pairs them: a line belongs to the next unmatched
    node when it prints that node's kind.

    Returns:
        (line number -> node id, node id -> line number), line numbers from 0.
    """
    nodes = list(snapshot.walk())
    by_line: dict[int, int] = {}
    by_node: dict[int, int] = {}
    i = 0
    for lineno, line in enumerate(snapshot.text.splitlines()):
        if i >= len(nodes):
            break
        code = line.split(" # ", 1)[0]
        match = _KIND_RE.search(code)
        if match is None or match.group(1) != nodes[i].kind:
            continue
        by_line[lineno] = nodes[i].id
        by_node[nodes[i].id] = lineno
        i += 1
    return by_line, by_node


def attribute_node_ids(snapshot: GraphSnapshot, path: str) -> set[int]:
    """Nodes that read or write attribute ``path`` (or anything under it) in ``snapshot``.

    Readers are ``prim::GetAttr`` chains from ``self`` ending at the path, and, in a
    frozen graph, the constants freezing folded from it; writers are ``prim::SetAttr``
    on it and nodes whose schema writes a value read from it (``aten::add_``).
    """
    values = snapshot.attribute_paths()

    def hit(p: str | None) -> bool:
        return bool(p) and (p == path or p.startswith(path + "."))  # type: ignore[union-attr]

    ids: set[int] = set()
    touched: set[str] = set()
    for node in snapshot.walk():
        if node.kind == "prim::GetAttr" and node.outputs and hit(values.get(node.outputs[0].name)):
            ids.add(node.id)
            touched.add(node.outputs[0].name)
        elif node.kind == "prim::SetAttr" and node.inputs:
            base = values.get(node.inputs[0])
            name = node.attribute("name") or ""
            if base is not None and hit(f"{base}.{name}" if base else name):
                ids.add(node.id)
        elif node.constant is not None and node.constant.attribute:
            attr = _SUFFIX_RE.sub("", node.constant.attribute)
            if hit(attr):
                ids.add(node.id)
                touched.update(node.output_names)
    for node in snapshot.walk():
        written = schema_effects(node.schema)[0] if node.schema else ()
        if any(i < len(node.inputs) and node.inputs[i] in touched for i in written):
            ids.add(node.id)
    return ids


def schema_effects(schema: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """What an operator schema says about memory.

    ``aten::add_(Tensor(a!) self, Tensor other, Scalar alpha=1) -> Tensor(a!)`` writes
    argument 0 and its output aliases argument 0. Read from the schema's text, as
    ``torch._C.parse_schema`` reads it: the app's screen process does not import torch.

    Returns:
        (indices of arguments written, (output index, argument index) alias pairs).
    """
    return schema_effects_text(schema)


@dataclass(frozen=True)
class NodeFacts:
    """What the inspector says about one IR node.

    Attributes:
        node: the node.
        inputs: (value name, type, producing node's kind or ``"graph input"``).
        outputs: (value name, type, kinds of the nodes that read it).
        writes: names of the inputs this node writes (from its schema).
        aliases: (output name, input name) pairs: the output may be a view of the input.
        writers: for each input and output, the other nodes that write it or a value it
            may alias, as (value name, writer line).
        attribute: the attribute this node reads, writes or was folded from, if any.
        read_as: for an int constant its users read as a dtype, a layout or a memory
            format, each such name and where (``torch.quint8 (dtype of
            aten::quantize_per_tensor)``).
    """

    node: NodeSnapshot
    inputs: tuple[tuple[str, str, str], ...]
    outputs: tuple[tuple[str, str, tuple[str, ...]], ...]
    writes: tuple[str, ...]
    aliases: tuple[tuple[str, str], ...]
    writers: tuple[tuple[str, str], ...]
    attribute: str | None
    read_as: tuple[str, ...] = ()


def _alias_groups(snapshot: GraphSnapshot) -> dict[str, str]:
    """Union-find over values joined by schema alias annotations (views, in-place ops)."""
    parent: dict[str, str] = {}

    def find(x: str) -> str:
        while parent.get(x, x) != x:
            parent[x] = parent.get(parent[x], parent[x])
            x = parent[x]
        return x

    for node in snapshot.walk():
        if not node.schema:
            continue
        for out_i, arg_i in schema_effects(node.schema)[1]:
            if out_i < len(node.outputs) and arg_i < len(node.inputs):
                a, b = find(node.outputs[out_i].name), find(node.inputs[arg_i])
                if a != b:
                    parent[a] = b
    return {name: find(name) for name in list(parent)}


def node_facts(snapshot: GraphSnapshot, node_id: int) -> NodeFacts:
    """Inputs, outputs, writes and aliases of node ``node_id`` in ``snapshot``."""
    node = snapshot.node(node_id)
    producers = snapshot.producers()
    consumers = snapshot.consumers()
    groups = _alias_groups(snapshot)
    inputs = []
    args = schema_args(node.schema) if node.schema else ()
    for index, name in enumerate(node.inputs):
        info = snapshot.value(name)
        src = producers.get(name)
        where = src.kind if src else "graph input"
        if src is not None and src.constant is not None and index < len(args):
            # An int passed as a dtype (layout, memory format) is named, as torch means it.
            named = src.constant.name_as(args[index][0])
            where = f"{where} {named}" if named else where
        inputs.append((name, info.type if info else "?", where))
    outputs = []
    for out in node.outputs:
        users = tuple(dict.fromkeys(n.kind for n in consumers.get(out.name, [])))
        outputs.append((out.name, out.type, users))
    written_idx, alias_pairs = schema_effects(node.schema) if node.schema else ((), ())
    writes = tuple(node.inputs[i] for i in written_idx if i < len(node.inputs))
    aliases = tuple(
        (node.outputs[o].name, node.inputs[a])
        for o, a in alias_pairs
        if o < len(node.outputs) and a < len(node.inputs)
    )
    mine = {name: groups.get(name, name) for name in (*node.inputs, *node.output_names)}
    writers: list[tuple[str, str]] = []
    for other in snapshot.walk():
        if other.id == node.id or not other.schema:
            continue
        for i in schema_effects(other.schema)[0]:
            if i >= len(other.inputs):
                continue
            target = groups.get(other.inputs[i], other.inputs[i])
            for name, group in mine.items():
                if group == target:
                    writers.append((name, other.line))
    attribute = None
    values = snapshot.attribute_paths()
    if node.kind == "prim::GetAttr" and node.outputs:
        attribute = values.get(node.outputs[0].name)
    elif node.kind == "prim::SetAttr" and node.inputs:
        base = values.get(node.inputs[0])
        name = node.attribute("name") or ""
        attribute = (f"{base}.{name}" if base else name) if base is not None else None
    elif node.constant is not None and node.constant.attribute:
        attribute = node.constant.attribute
    read_as: list[str] = []
    if node.constant is not None and node.constant.names:
        for out in node.outputs:
            for user in consumers.get(out.name, []):
                user_args = schema_args(user.schema) if user.schema else ()
                for i, value in enumerate(user.inputs):
                    if value == out.name and i < len(user_args):
                        type_, arg = user_args[i]
                        named = node.constant.name_as(type_)
                        if named:
                            read_as.append(f"{named} ({arg} of {user.kind})")
    return NodeFacts(
        node=node,
        inputs=tuple(inputs),
        outputs=tuple(outputs),
        writes=writes,
        aliases=aliases,
        writers=tuple(dict.fromkeys(writers)),
        attribute=attribute,
        read_as=tuple(dict.fromkeys(read_as)),
    )
