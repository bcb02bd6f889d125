"""The values a graph snapshot is made of: torch-free, so any process can hold them.

:mod:`freezeview.engine.graph.snapshot` builds these from torch graphs; everything that only
reads snapshots (diffs, facts, the app's process, which never imports torch) imports
them from here. They pickle small: the app's engine process sends them to the screen.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from types import MappingProxyType
from typing import Any

__all__ = [
    "BlockSnapshot",
    "ConstantSummary",
    "GraphSnapshot",
    "NodeSnapshot",
    "SourceLocation",
    "ValueInfo",
    "module_scope",
    "parse_source_range",
]

_SOURCE_RE = re.compile(r'File "(?P<file>[^"]*)", line (?P<line>\d+)')
_SCOPE_RE = re.compile(r"(\w+)\(([^()]*)\)")
# Scope segments that are not a submodule name: the module itself, or a free function.
_NOT_SCOPE_NAMES = {"SELF", "UNKNOWN_INSTANCE"}


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

    def __reduce__(self) -> tuple[Any, ...]:
        return (SourceLocation, (self.file, self.line, self.text))


@dataclass(frozen=True, slots=True)
class ValueInfo:
    """A value's debug name (``%x.1`` without the ``%``) and its TorchScript type."""

    name: str
    type: str

    # A snapshot is tens of thousands of these small values, and the app's engine
    # process pickles every graph it shows: the class called with the fields pickles
    # and unpickles several times faster than a slotted dataclass's default state.
    def __reduce__(self) -> tuple[Any, ...]:
        return (ValueInfo, (self.name, self.type))


@dataclass(frozen=True, slots=True)
class ConstantSummary:
    """A short description of a ``prim::Constant``'s value; never the data itself.

    Attributes:
        kind: ``tensor``, ``int``, ``float``, ``bool``, ``str``, ``none``, ``list``,
            ``tuple``, ``device``, ``enum`` (a TorchScript Enum member, ``Format.NHWC``),
            ``object`` or ``other``.
        text: what to print in a node label (``Float(64, 3, 7, 7)``, ``[1, 1]``, ``None``).
        dtype: the tensor dtype, for tensors.
        shape: the tensor shape, for tensors.
        attribute: dotted attribute path the constant was folded from
            (``layer1.0.conv1.weight``), when freezing named it.
        names: for an ``int``, the names it has where an argument's schema type is an
            enum TorchScript passes as an int: ``(("ScalarType", "torch.quint8"),)`` for
            13 (read from the running torch, :mod:`.scalar_types`); a box or the
            inspector shows the one of the argument it feeds.
    """

    kind: str
    text: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    attribute: str | None = None
    names: tuple[tuple[str, str], ...] = ()

    def name_as(self, arg_type: str) -> str | None:
        """The constant's name as an argument of schema type ``arg_type``
        (``torch.quint8`` for a 13 fed to ``ScalarType dtype``), or None."""
        if not self.names:
            return None
        base = arg_type.strip().rstrip("?")
        return next((name for kind, name in self.names if kind == base), None)

    @property
    def is_tensor(self) -> bool:
        """True for tensor constants (folded weights, buffers, ...)."""
        return self.kind == "tensor"

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            ConstantSummary,
            (self.kind, self.text, self.dtype, self.shape, self.attribute, self.names),
        )


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

    def __reduce__(self) -> tuple[Any, ...]:
        return (
            NodeSnapshot,
            (
                self.id,
                self.kind,
                self.inputs,
                self.outputs,
                self.attributes,
                self.constant,
                self.scope,
                self.source,
                self.schema,
                self.blocks,
                self.line,
            ),
        )


@dataclass(frozen=True, slots=True)
class BlockSnapshot:
    """A block: its parameters, its nodes in order and the values it returns."""

    inputs: tuple[ValueInfo, ...]
    nodes: tuple[NodeSnapshot, ...]
    outputs: tuple[str, ...]

    def __reduce__(self) -> tuple[Any, ...]:
        return (BlockSnapshot, (self.inputs, self.nodes, self.outputs))


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
    # Every node in walk order, made on first use: diffs, pictures, step notes and the
    # app's panes walk a snapshot many times, and walking nested blocks through
    # generators each time adds up on a large graph; the tuple costs one pointer per
    # node.
    _in_order: tuple[NodeSnapshot, ...] | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_parts(
        cls,
        method: str,
        block: BlockSnapshot,
        text: str,
        node_count: int,
        values: dict[str, ValueInfo],
        nodes_in_order: tuple[NodeSnapshot, ...] | None = None,
    ) -> GraphSnapshot:
        """A snapshot made of the parts another one handed out (a wire format rebuilding
        the graph it sent): its fields, its value map (:meth:`value_map`) and, when
        known, its nodes in walk order (:meth:`nodes_in_order`; else made from ``block``
        on first use). The parts are taken as they are: neither copied nor checked."""
        return cls(method, block, text, node_count, _values=values, _in_order=nodes_in_order)

    def value_map(self) -> Mapping[str, ValueInfo]:
        """Every value of the graph by name (graph inputs, block inputs, node outputs),
        read-only: what :meth:`value` looks names up in."""
        return MappingProxyType(self._values)

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
        return iter(self.nodes_in_order())

    def nodes_in_order(self) -> tuple[NodeSnapshot, ...]:
        """Every node, nested blocks included, in pre-order: ``nodes_in_order()[i].id == i``."""
        nodes = self._in_order
        if nodes is None:
            nodes = tuple(_walk_block(self.block))
            # Frozen, but this field is a cache of the block's own contents.
            object.__setattr__(self, "_in_order", nodes)
        return nodes

    def kinds(self) -> Counter[str]:
        """How many nodes of each kind the graph has."""
        return Counter(node.kind for node in self.walk())

    def value(self, name: str) -> ValueInfo | None:
        """The value named ``name`` (graph input, block input or node output)."""
        return self._values.get(name)

    def node(self, node_id: int) -> NodeSnapshot:
        """The node with the given ``id``."""
        nodes = self.nodes_in_order()
        if 0 <= node_id < len(nodes) and nodes[node_id].id == node_id:
            return nodes[node_id]
        for node in nodes:
            if node.id == node_id:
                return node
        raise KeyError(node_id)

    def producers(self) -> dict[str, NodeSnapshot]:
        """Map from value name to the node that defines it."""
        return {out.name: node for node in self.walk() for out in node.outputs}

    def attribute_paths(self) -> dict[str, str]:
        """Dotted attribute path of every value a ``prim::GetAttr`` chain reads from ``self``.

        ``%conv = GetAttr[name="conv"](%self); %w = GetAttr[name="weight"](%conv)`` gives
        ``{"self": "", "conv": "conv", "w": "conv.weight"}`` (``self`` maps to ``""``, so a
        ``prim::SetAttr`` on it resolves too). Values not rooted at ``self`` are absent.
        """
        self_name = self.inputs[0].name if self.inputs else None
        roots: dict[str, str] = {self_name: ""} if self_name is not None else {}
        for node in self.walk():
            if node.kind != "prim::GetAttr" or not node.inputs or not node.outputs:
                continue
            base = roots.get(node.inputs[0])
            name = node.attribute("name")
            if base is None or name is None:
                continue
            roots[node.outputs[0].name] = f"{base}.{name}" if base else name
        return roots

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


def parse_source_range(text: object) -> SourceLocation | None:
    """Turn torch's ``sourceRange()`` printout into a :class:`SourceLocation`.

    torch's binding returns the printout as a ``str``; its type stubs say
    ``SourceRange``, so anything else is read as its text.

    ``'  File "m.py", line 7\\n    def forward(...):\\n        x.add_(1)\\n        ~~~~ <--- HERE'``
    becomes ``SourceLocation("m.py", 7, "x.add_(1)")``: the highlighted source line.
    """
    if not text:
        return None
    if not isinstance(text, str):
        text = str(text)
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


@lru_cache(maxsize=65536)
def module_scope(hierarchy: str) -> str:
    """Dotted submodule path from torch's module hierarchy string.

    ``'layer1(Sequential).0(BasicBlock).bn1(BatchNorm2d).SELF(BatchNorm2d)'`` becomes
    ``'layer1.0.bn1'``; free functions (``UNKNOWN_INSTANCE``) and ``SELF`` are skipped.
    """
    if not hierarchy:
        return ""
    names = [m.group(1) for m in _SCOPE_RE.finditer(hierarchy)]
    return ".".join(n for n in names if n not in _NOT_SCOPE_NAMES)
