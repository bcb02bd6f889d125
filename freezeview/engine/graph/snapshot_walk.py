"""The torch walk: what freezeview asks torch about a graph, node by node.

Two walks live here. :class:`SnapshotBuilder` is the careful path: it asks torch for every
node's inputs, outputs, types, attributes and constant value and builds the snapshot
values directly (several Python round trips per value: seconds on a 17k-node graph).
:class:`Walked` is the cheap walk the fast path needs beside torch's printout (the
module scope and the schema of each node, which the printout does not carry; see
:mod:`~freezeview.engine.graph.snapshot_parse`). Constants are summarised without copying
tensor data (:func:`summarize_value`).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from .scalar_types import enum_names
from .snapshot_values import (
    BlockSnapshot,
    ConstantSummary,
    NodeSnapshot,
    ValueInfo,
    module_scope,
    parse_source_range,
)

__all__ = ["summarize_value"]

MAX_LIST_ITEMS = 6


def _short_list(items: list[Any]) -> str:
    shown = ", ".join(short_scalar(v) for v in items[:MAX_LIST_ITEMS])
    more = ", ..." if len(items) > MAX_LIST_ITEMS else ""
    return f"[{shown}{more}]"


def short_scalar(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return _tensor_text(value)
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, str):
        return repr(value if len(value) <= 40 else value[:37] + "...")
    if isinstance(value, list):
        return _short_list(value)
    if isinstance(value, tuple):
        return "(" + _short_list(list(value))[1:-1] + ")"
    return repr(value) if len(repr(value)) <= 40 else type(value).__name__


_DTYPE_NAMES = {
    torch.float32: "Float",
    torch.float64: "Double",
    torch.float16: "Half",
    torch.bfloat16: "BFloat16",
    torch.int64: "Long",
    torch.int32: "Int",
    torch.int8: "Char",
    torch.uint8: "Byte",
    torch.bool: "Bool",
}


def _tensor_text(t: torch.Tensor) -> str:
    dtype = _DTYPE_NAMES.get(t.dtype, str(t.dtype).removeprefix("torch."))
    if t.dim() == 0:
        # A 0-dim tensor's single value is cheap to show and tells a lot.
        try:
            return f"{dtype}({t.item():.6g})" if t.is_floating_point() else f"{dtype}({t.item()})"
        except (RuntimeError, ValueError):
            return f"{dtype}()"
    return f"{dtype}({', '.join(str(s) for s in t.shape)})"


def summarize_value(value: Any, attribute: str | None = None) -> ConstantSummary:
    """Summarise a constant's value without copying any tensor data."""
    if isinstance(value, torch.Tensor):
        return ConstantSummary(
            "tensor",
            _tensor_text(value),
            dtype=str(value.dtype).removeprefix("torch."),
            shape=tuple(int(s) for s in value.shape),
            attribute=attribute,
        )
    if isinstance(value, enum.Enum):  # a TorchScript Enum member, by name (str/int mixins too)
        return ConstantSummary("enum", f"{type(value).__name__}.{value.name}", attribute=attribute)
    if value is None:
        return ConstantSummary("none", "None", attribute=attribute)
    if isinstance(value, bool):
        return ConstantSummary("bool", repr(value), attribute=attribute)
    if isinstance(value, int):
        return ConstantSummary("int", repr(value), attribute=attribute, names=enum_names(value))
    if isinstance(value, float):
        return ConstantSummary("float", f"{value:.6g}", attribute=attribute)
    if isinstance(value, str):
        return ConstantSummary("str", short_scalar(value), attribute=attribute)
    if isinstance(value, list):
        return ConstantSummary("list", _short_list(value), attribute=attribute)
    if isinstance(value, tuple):
        return ConstantSummary("tuple", short_scalar(value), attribute=attribute)
    if isinstance(value, torch.device):
        return ConstantSummary("device", repr(str(value)), attribute=attribute)
    if isinstance(value, torch.ScriptObject):
        return ConstantSummary("object", "object", attribute=attribute)
    if type(value).__name__ == "OpaqueObject":  # module_slots: a class not importable here
        return ConstantSummary("object", repr(value), attribute=attribute)
    if type(value).__name__ == "ScriptEnum":  # module_slots: an enum not importable here
        return ConstantSummary("enum", str(value), attribute=attribute)
    return ConstantSummary("other", type(value).__name__, attribute=attribute)


def constant_attribute(debug_name: str) -> str | None:
    # Freezing names each folded attribute's constant `self.<path>` (freeze_module.cpp);
    # later passes may append `.1` style suffixes when names collide.
    if not debug_name.startswith("self."):
        return None
    path = re.sub(r"\.\d+$", "", debug_name[len("self.") :])
    # Folding passes rename what they rewrite (`conv.weight_fused_bn`); keep the origin.
    return path.split("_fused_", 1)[0] or None


def _constant_summary(node: torch._C.Node) -> ConstantSummary:
    attribute = constant_attribute(node.output().debugName())
    if not node.hasAttribute("value"):
        return ConstantSummary("none", "None", attribute=attribute)
    try:
        value = node.output().toIValue()
    except (RuntimeError, TypeError):
        return ConstantSummary("other", str(node.output().type()), attribute=attribute)
    return summarize_value(value, attribute)


def _attribute_text(node: torch._C.Node, name: str) -> str:
    kind = node.kindOf(name)
    if kind == "s":
        return node.s(name)
    if kind == "i":
        return str(node.i(name))
    if kind == "f":
        return f"{node.f(name):.6g}"
    if kind == "ss":
        return repr(node.ss(name))
    if kind == "is":
        return repr(node.is_(name))  # type: ignore[attr-defined]
    if kind == "t":
        return _tensor_text(node.t(name))
    if kind == "ty":
        return str(node.ty(name))
    if kind == "g":
        return "<subgraph>"
    return kind


class SnapshotBuilder:
    """Walks a torch graph once and builds the snapshot values."""

    def __init__(self) -> None:
        self.next_id = 0
        self.values: dict[str, ValueInfo] = {}

    def value(self, v: torch._C.Value) -> ValueInfo:
        info = ValueInfo(v.debugName(), str(v.type()))
        self.values[info.name] = info
        return info

    def block(self, block: torch._C.Block, inputs: list[torch._C.Value]) -> BlockSnapshot:
        block_inputs = tuple(self.value(v) for v in inputs)
        nodes = tuple(self.node(n) for n in block.nodes())
        outputs = tuple(v.debugName() for v in block.outputs())
        return BlockSnapshot(block_inputs, nodes, outputs)

    def node(self, n: torch._C.Node) -> NodeSnapshot:
        node_id = self.next_id
        self.next_id += 1
        kind = n.kind()
        outputs = tuple(self.value(v) for v in n.outputs())
        attributes: tuple[tuple[str, str], ...] = ()
        constant = None
        if kind == "prim::Constant":
            constant = _constant_summary(n)
        else:
            attributes = tuple((a, _attribute_text(n, a)) for a in n.attributeNames())
        schema = n.schema()
        torch_blocks = list(n.blocks())
        blocks = tuple(self.block(b, list(b.inputs())) for b in torch_blocks)
        text = _header_line(n) if torch_blocks else str(n).split("\n", 1)[0]
        return NodeSnapshot(
            id=node_id,
            kind=kind,
            inputs=tuple(v.debugName() for v in n.inputs()),
            outputs=outputs,
            attributes=attributes,
            constant=constant,
            scope=module_scope(n.getModuleHierarchy()),
            source=parse_source_range(n.sourceRange()),
            schema=None if schema == "(no schema)" else schema,
            blocks=blocks,
            line=text.strip(),
        )


def _header_line(n: torch._C.Node) -> str:
    outs = ", ".join(f"%{v.debugName()} : {v.type()}" for v in n.outputs())
    ins = ", ".join(f"%{v.debugName()}" for v in n.inputs())
    return f"{outs} = {n.kind()}({ins})" if outs else f"{n.kind()}({ins})"


class Walked:
    """Per-node facts only torch knows (kind, module scope, schema), in pre-order."""

    __slots__ = ("kinds", "schemas", "scopes")

    def __init__(self, graph: torch._C.Graph) -> None:
        self.kinds: list[str] = []
        self.scopes: list[str] = []
        self.schemas: list[str | None] = []
        schema_cache: dict[str, str] = {}
        stack = [iter(graph.block().nodes())]
        while stack:
            node = next(stack[-1], None)
            if node is None:
                stack.pop()
                continue
            kind = node.kind()
            self.kinds.append(kind)
            self.scopes.append(module_scope(node.getModuleHierarchy()))
            if kind in _NO_SCHEMA:
                self.schemas.append(None)
            else:
                schema = node.schema()
                self.schemas.append(
                    None if schema == "(no schema)" else schema_cache.setdefault(schema, schema)
                )
            if kind in BLOCK_KINDS:
                # Pre-order: the node's blocks come before its later siblings, block0
                # first, so block0's iterator ends up on top of the stack.
                for block in reversed(list(node.blocks())):
                    stack.append(iter(block_nodes(block)))


def block_nodes(block: torch._C.Block) -> list[torch._C.Node]:
    """The nodes of ``block`` in order, as ``block.nodes()`` lists them.

    torch's ``Block.nodes()`` costs about ten microseconds a call, more than a few
    nodes: a transformer's inlined ``forward`` has tens of thousands of small ``prim::If``
    blocks (its shape checks), and listing them that way took most of a snapshot's walk.
    A block's nodes form a ring through its return node and its parameter node, so they
    are read backwards from the return node, one cheap ``prev()`` each.
    """
    nodes = []
    node = block.returnNode().prev()
    while node.kind() != "prim::Param":
        nodes.append(node)
        node = node.prev()
    nodes.reverse()
    return nodes


# Frequent kinds that never have a schema (skipping them saves a call each).
_NO_SCHEMA = frozenset(
    {
        "prim::Constant",
        "prim::GetAttr",
        "prim::SetAttr",
        "prim::If",
        "prim::Loop",
        "prim::ListConstruct",
        "prim::TupleConstruct",
        "prim::ListUnpack",
        "prim::TupleUnpack",
        "prim::CallMethod",
        "prim::CallFunction",
    }
)
BLOCK_KINDS = frozenset({"prim::If", "prim::Loop", "prim::With", "prim::Enter", "prim::Closure"})


# One node per printed line "  %out : T = ns::kind..." (or "   = ns::kind" without
# outputs); continuation lines of multi-line constants never look like that.
PRINTED_KIND_RE = re.compile(r"^ +(?:%.*? )?= ([A-Za-z_]\w*::[A-Za-z_][\w.]*)", re.MULTILINE)
# torch prints a node that owns a subgraph as "prim::fork_0" (the subgraph's label).
SUBGRAPH_LABEL_RE = re.compile(r"^(prim::\w+?)_\d+$")


class PrintedWalk:
    """:class:`Walked`'s facts read off the printout, module scopes for some kinds only.

    Walking a graph costs a torch call per node; the kinds are in
    the printout already, and torch finds the nodes of one kind in C++
    (``findAllNodes``, pre-order like the printout). Nodes of other kinds get no scope
    (``""``) and no node gets a schema: for readers of a few kinds only (why a pass did
    not fire). Raises ``ValueError`` when the printout and torch disagree.
    """

    __slots__ = ("kinds", "schemas", "scopes")

    def __init__(self, graph: torch._C.Graph, text: str, scope_kinds: frozenset[str]) -> None:
        kinds = printed_kinds(text)
        self.kinds: list[str] = kinds
        self.schemas: list[str | None] = [None] * len(kinds)
        self.scopes: list[str] = [""] * len(kinds)
        for i, node in printed_nodes_of_kinds(graph, kinds, scope_kinds):
            self.scopes[i] = module_scope(node.getModuleHierarchy())


def printed_nodes_of_kinds(
    graph: torch._C.Graph, kinds: list[str], wanted: Iterable[str]
) -> Iterator[tuple[int, torch._C.Node]]:
    """torch's nodes of the ``wanted`` kinds, each with its position in ``kinds`` (the
    printout's node kinds in order, :func:`printed_kinds`): ``findAllNodes`` lists a
    kind's nodes in printed order, so the n-th printed one is the n-th found.

    Raises:
        ValueError: a kind printed a different number of times than torch finds it.
    """
    positions: dict[str, list[int]] = {k: [] for k in wanted}
    for i, kind in enumerate(kinds):
        found = positions.get(kind)
        if found is not None:
            found.append(i)
    for kind, where in positions.items():
        if not where:
            continue
        nodes = graph.findAllNodes(kind, True)  # type: ignore[attr-defined]
        if len(nodes) != len(where):
            raise ValueError(f"{kind}: {len(where)} printed, {len(nodes)} in the graph")
        yield from zip(where, nodes, strict=True)


def printed_kinds(text: str) -> list[str]:
    """Node kinds in torch's IR printout of a graph, in pre-order (nested blocks
    included, subgraphs printed after the graph's ``return`` not)."""
    end = text.find("\n  return (")
    body = text if end < 0 else text[:end]
    kinds: list[str] = PRINTED_KIND_RE.findall(body)
    for i, kind in enumerate(kinds):
        label = SUBGRAPH_LABEL_RE.match(kind)
        if label is not None:
            kinds[i] = label.group(1)
    return kinds
