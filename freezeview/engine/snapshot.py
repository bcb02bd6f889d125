"""Immutable, tensor-free pictures of TorchScript graphs.

torch passes rewrite graphs in place, so freezeview takes a *value* picture of a graph
at each moment it wants to show or diff: node kinds, value names and types, node
attributes, source locations, module scope and nested blocks. Constants are
summarised (dtype, shape, a few values, the attribute they came from); a snapshot never
holds a tensor or a reference to torch objects, so many snapshots of a large model cost
kilobytes.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "BlockSnapshot",
    "ConstantSummary",
    "GraphSnapshot",
    "NodeSnapshot",
    "SourceLocation",
    "ValueInfo",
    "module_scope",
    "parse_source_range",
    "snapshot_graph",
    "summarize_value",
]

_SOURCE_RE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+)')
_SCOPE_RE = re.compile(r"(\w+)\(([^()]*)\)")
# Scope segments that are not a submodule name: the module itself, or a free function.
_NOT_SCOPE_NAMES = {"SELF", "UNKNOWN_INSTANCE"}
_MAX_LIST_ITEMS = 6


@dataclass(frozen=True, slots=True)
class SourceLocation:
    """Where a node came from in the model's (saved) Python source.

    The file usually lives on the machine that built the model, so freezeview shows it
    as text and never needs to open it.
    """

    file: str
    line: int
    text: str = ""

    def short(self) -> str:
        """``file.py:12`` with only the last path component."""
        return f"{self.file.rsplit('/', 1)[-1]}:{self.line}"

    def __str__(self) -> str:
        return f"{self.file}:{self.line}"


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """A value's debug name (``%x.1`` without the ``%``) and its TorchScript type."""

    name: str
    type: str


@dataclass(frozen=True, slots=True)
class ConstantSummary:
    """A short description of a ``prim::Constant``'s value; never the data itself.

    Attributes:
        kind: ``tensor``, ``int``, ``float``, ``bool``, ``str``, ``none``, ``list``,
            ``tuple``, ``device``, ``object`` or ``other``.
        text: what to print in a node label (``Float(64, 3, 7, 7)``, ``[1, 1]``, ``None``).
        dtype: the tensor dtype, for tensors.
        shape: the tensor shape, for tensors.
        attribute: dotted attribute path the constant was folded from
            (``layer1.0.conv1.weight``), when freezing named it.
    """

    kind: str
    text: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    attribute: str | None = None

    @property
    def is_tensor(self) -> bool:
        """True for tensor constants (folded weights, buffers, ...)."""
        return self.kind == "tensor"


@dataclass(frozen=True, slots=True)
class NodeSnapshot:
    """One IR node as a value.

    Attributes:
        id: position in a pre-order walk of the whole graph (unique in its snapshot).
        kind: ``aten::conv2d``, ``prim::GetAttr``, ...
        inputs: names of the values the node reads.
        outputs: the values it defines.
        attributes: node attributes as ``(name, short text)`` pairs, e.g. ``("name", "weight")``.
        constant: summary of the value, for ``prim::Constant`` nodes.
        scope: dotted module path the node was inlined from (``layer1.0.bn``); ``""`` for
            the root module.
        source: where the node came from, if torch recorded it.
        schema: the operator schema string, when the node has one.
        blocks: nested blocks (``prim::If`` branches, ``prim::Loop`` body).
        line: the node's text in the IR printout (first line only).
    """

    id: int
    kind: str
    inputs: tuple[str, ...]
    outputs: tuple[ValueInfo, ...]
    attributes: tuple[tuple[str, str], ...] = ()
    constant: ConstantSummary | None = None
    scope: str = ""
    source: SourceLocation | None = None
    schema: str | None = None
    blocks: tuple[BlockSnapshot, ...] = ()
    line: str = ""

    def attribute(self, name: str) -> str | None:
        """The text of node attribute ``name``, or None."""
        for key, value in self.attributes:
            if key == name:
                return value
        return None

    @property
    def output_names(self) -> tuple[str, ...]:
        """Names of the values this node defines."""
        return tuple(v.name for v in self.outputs)


@dataclass(frozen=True, slots=True)
class BlockSnapshot:
    """A block: its parameters, its nodes in order and the values it returns."""

    inputs: tuple[ValueInfo, ...]
    nodes: tuple[NodeSnapshot, ...]
    outputs: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class GraphSnapshot:
    """A whole method graph at one moment.

    Attributes:
        method: method name (``forward``).
        block: the top-level block; its inputs are the graph inputs (``self`` first).
        text: the IR printout torch gives for the graph.
        node_count: number of nodes, nested blocks included.
    """

    method: str
    block: BlockSnapshot
    text: str
    node_count: int
    _values: dict[str, ValueInfo] = field(default_factory=dict, compare=False, repr=False)

    @property
    def inputs(self) -> tuple[ValueInfo, ...]:
        """Graph inputs (``self`` first for methods)."""
        return self.block.inputs

    @property
    def outputs(self) -> tuple[str, ...]:
        """Names of the values the graph returns."""
        return self.block.outputs

    def walk(self) -> Iterator[NodeSnapshot]:
        """Every node, nested blocks included, in pre-order (the order of ``id``)."""
        yield from _walk_block(self.block)

    def kinds(self) -> Counter[str]:
        """How many nodes of each kind the graph has."""
        return Counter(node.kind for node in self.walk())

    def value(self, name: str) -> ValueInfo | None:
        """The value named ``name`` (graph input, block input or node output)."""
        return self._values.get(name)

    def node(self, node_id: int) -> NodeSnapshot:
        """The node with the given ``id``."""
        for node in self.walk():
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def producers(self) -> dict[str, NodeSnapshot]:
        """Map from value name to the node that defines it."""
        return {out.name: node for node in self.walk() for out in node.outputs}

    def consumers(self) -> dict[str, list[NodeSnapshot]]:
        """Map from value name to the nodes that read it, in walk order."""
        uses: dict[str, list[NodeSnapshot]] = {}
        for node in self.walk():
            for name in node.inputs:
                uses.setdefault(name, []).append(node)
        return uses


def _walk_block(block: BlockSnapshot) -> Iterator[NodeSnapshot]:
    for node in block.nodes:
        yield node
        for sub in node.blocks:
            yield from _walk_block(sub)


def parse_source_range(text: str) -> SourceLocation | None:
    """Turn torch's ``sourceRange()`` printout into a :class:`SourceLocation`.

    ``'  File "m.py", line 7\\n    def forward(...):\\n        x.add_(1)\\n        ~~~~ <--- HERE'``
    becomes ``SourceLocation("m.py", 7, "x.add_(1)")``: the highlighted source line.
    """
    if not text:
        return None
    match = _SOURCE_RE.search(text)
    if match is None:
        return None
    lines = text.splitlines()
    code = ""
    # The highlighted line is the one just above the row of '~' markers.
    for i, row in enumerate(lines):
        marker = row.split("<---", 1)[0].strip()
        if marker and set(marker) <= {"~"} and i > 0:
            code = lines[i - 1].strip()
            break
    if not code and len(lines) > 1:
        code = lines[-1].strip()
    return SourceLocation(match.group("file"), int(match.group("line")), code)


def module_scope(hierarchy: str) -> str:
    """Dotted submodule path from torch's module hierarchy string.

    ``'layer1(Sequential).0(BasicBlock).bn1(BatchNorm2d).SELF(BatchNorm2d)'`` becomes
    ``'layer1.0.bn1'``; free functions (``UNKNOWN_INSTANCE``) and ``SELF`` are skipped.
    """
    if not hierarchy:
        return ""
    names = [m.group(1) for m in _SCOPE_RE.finditer(hierarchy)]
    return ".".join(n for n in names if n not in _NOT_SCOPE_NAMES)


def _short_list(items: list[Any]) -> str:
    shown = ", ".join(_short_scalar(v) for v in items[:_MAX_LIST_ITEMS])
    more = ", ..." if len(items) > _MAX_LIST_ITEMS else ""
    return f"[{shown}{more}]"


def _short_scalar(value: Any) -> str:
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
    if value is None:
        return ConstantSummary("none", "None", attribute=attribute)
    if isinstance(value, bool):
        return ConstantSummary("bool", repr(value), attribute=attribute)
    if isinstance(value, int):
        return ConstantSummary("int", repr(value), attribute=attribute)
    if isinstance(value, float):
        return ConstantSummary("float", f"{value:.6g}", attribute=attribute)
    if isinstance(value, str):
        return ConstantSummary("str", _short_scalar(value), attribute=attribute)
    if isinstance(value, list):
        return ConstantSummary("list", _short_list(value), attribute=attribute)
    if isinstance(value, tuple):
        return ConstantSummary("tuple", _short_scalar(value), attribute=attribute)
    if isinstance(value, torch.device):
        return ConstantSummary("device", repr(str(value)), attribute=attribute)
    if isinstance(value, torch.ScriptObject):
        return ConstantSummary("object", "object", attribute=attribute)
    return ConstantSummary("other", type(value).__name__, attribute=attribute)


def _constant_attribute(debug_name: str) -> str | None:
    # Freezing names each folded attribute's constant `self.<path>` (freeze_module.cpp);
    # later passes may append `.1` style suffixes when names collide.
    if not debug_name.startswith("self."):
        return None
    path = re.sub(r"\.\d+$", "", debug_name[len("self.") :])
    # Folding passes rename what they rewrite (`conv.weight_fused_bn`); keep the origin.
    return path.split("_fused_", 1)[0] or None


def _constant_summary(node: torch._C.Node) -> ConstantSummary:
    attribute = _constant_attribute(node.output().debugName())
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
        return repr(node.is_(name))
    if kind == "t":
        return _tensor_text(node.t(name))
    if kind == "ty":
        return str(node.ty(name))
    if kind == "g":
        return "<subgraph>"
    return kind


class _Builder:
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


def snapshot_graph(graph: torch._C.Graph, method: str = "forward") -> GraphSnapshot:
    """Take an immutable, tensor-free snapshot of ``graph``.

    Args:
        graph: a TorchScript graph (``module.forward.graph`` or a copy).
        method: the method name the graph belongs to, kept for display.

    Returns:
        A :class:`GraphSnapshot` that stays valid however the graph changes later.

    Example::

        snap = snapshot_graph(torch.jit.script(torch.nn.ReLU()).graph)
        assert snap.kinds()["aten::relu"] == 1
    """
    builder = _Builder()
    block = builder.block(graph.block(), list(graph.inputs()))
    return GraphSnapshot(
        method=method,
        block=block,
        text=str(graph),
        node_count=builder.next_id,
        _values=builder.values,
    )
