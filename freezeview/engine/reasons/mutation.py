"""Mutation facts from torch's alias analysis, in the form freezeview shows them.

Freezing decides whether an attribute may become a constant by asking alias analysis,
with *frozen* semantics (``graph.alias_db(isFrozen=True)``), whether anything writes the
value a ``prim::GetAttr`` produced. torch answers yes or no; freezeview also finds *which*
node writes it (``aten::add_`` on a view, ``aten::append`` on a list, a
``prim::SetAttr``) and where that node came from in the source, so a user sees the line
to change instead of squinting at ``dump_alias_db``.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import lru_cache

import torch

from ..graph import SourceLocation, parse_source_range

__all__ = [
    "GraphWriters",
    "Writer",
    "inline_method_graph",
    "iter_nodes",
    "node_source",
    "node_text",
]


@dataclass(frozen=True, slots=True)
class Writer:
    """A node that writes memory (in place, into a container, or an attribute).

    Attributes:
        method: the preserved method whose (inlined) graph holds the node.
        kind: node kind, e.g. ``aten::add_``.
        text: the node's IR line.
        source: where it came from, if torch recorded it.
        written: debug names of the values it writes.
        written_types: their TorchScript types, in the same order.
        wildcard: found for a read in the Tensor wildcard set: the node writes a tensor
            of that set (one alias analysis keeps for every tensor that entered a list,
            a tuple, an attribute or an op marked ``-> *``), not a value derived from
            the read itself. Not part of equality: the same node, however found.
    """

    method: str
    kind: str
    text: str
    source: SourceLocation | None
    written: tuple[str, ...]
    written_types: tuple[str, ...] = ()
    wildcard: bool = field(default=False, compare=False)

    def describe(self) -> str:
        """``aten::add_ at model.py:12`` style one-liner."""
        where = f" at {self.source.short()}" if self.source else ""
        return f"{self.kind}{where}"


# Only these node kinds carry nested blocks; asking every node for its blocks costs a
# Python round trip per node, which dominates on graphs of thousands of nodes.
_BLOCK_KINDS = frozenset({"prim::If", "prim::Loop", "prim::With", "prim::Enter", "prim::Closure"})


def iter_nodes(block: torch._C.Block) -> Iterator[torch._C.Node]:
    """Every node of a block and its nested blocks, in the order freeze_module.cpp visits them.

    torch walks a block's nodes in order and pushes sub-blocks on a stack, so nested
    blocks are visited after the enclosing block, the last-seen first.
    """
    stack = [block]
    while stack:
        current = stack.pop()
        for node in current.nodes():
            if node.kind() in _BLOCK_KINDS:
                stack.extend(node.blocks())
            yield node


_COMMENT_RE = re.compile(r"# (?P<file>[^#]+?):(?P<line>\d+):\d+\s*$")


def node_source(node: torch._C.Node) -> SourceLocation | None:
    """Where ``node`` came from in the model's source, as well as torch recorded it.

    Scripted nodes carry a source range; traced ones only the ``# file:line:col``
    comment of their IR line. ``prim::SetAttr`` carries neither: the statement that
    assigns is where its stored value (or the node just before it) was computed.
    """
    found = parse_source_range(node.sourceRange())
    if found is not None:
        return found
    match = _COMMENT_RE.search(str(node).split("\n", 1)[0])
    if match is not None:
        return SourceLocation(match.group("file").strip(), int(match.group("line")))
    if node.kind() == "prim::SetAttr":
        stored = node.inputsAt(1).node()
        if stored.kind() != "prim::Param":
            found = parse_source_range(stored.sourceRange())
        current = node
        # Walk back to the closest statement with a location: earlier nodes in the
        # block, then the node that owns the block (the `if` around the assignment).
        for _ in range(64):
            if found is not None:
                break
            previous = current.prev()
            if previous is not None and previous.kind() != "prim::Param":
                current = previous
            else:
                owner = current.owningBlock().owningNode()
                if owner is None:
                    break
                current = owner
            found = parse_source_range(current.sourceRange())
    return found


def node_text(node: torch._C.Node) -> str:
    """The node's first IR line, without trailing newline."""
    return str(node).split("\n", 1)[0].strip().removeprefix("= ")


# Every node's kind follows "= " in torch's printout (``%y : T = aten::add_(...)``, and
# `` = prim::SetAttr[...](...)`` for a node without outputs). Anchoring on it reads a
# large printout many times faster than looking for `ns::name` anywhere.
_KIND_RE = re.compile(r"= ([a-z_]+::\w+)")
# Container and object mutators whose names do not end in `_`.
_MUTATORS = frozenset(
    {
        "aten::append",
        "aten::_set_item",
        "aten::insert",
        "aten::pop",
        "aten::remove",
        "aten::clear",
        "aten::extend",
        "aten::update",
        "aten::setdefault",
        "aten::popitem",
        "aten::sort",
        "aten::reverse",
        "aten::__setitem__",
        "aten::_append",
        "prim::SetAttr",
    }
)


# Nodes whose effect on what their inputs alias does not show in their outputs: a
# forked body, a call not inlined, a closure. A read reaching one is asked about every
# writer.
_OPAQUE_KINDS = frozenset(
    {"prim::fork", "prim::CallFunction", "prim::CallMethod", "prim::Closure", "prim::Exit"}
)


def _is_tensor_or_optional(t: torch._C.JitType) -> bool:
    if isinstance(t, torch._C.OptionalType):
        t = t.getElementType()
    return isinstance(t, torch._C.TensorType)


def _may_write(kind: str) -> bool:
    """Whether nodes of ``kind`` can write memory (checked further by their schema)."""
    return (kind.endswith("_") and not kind.endswith("__")) or kind in _MUTATORS


@lru_cache(maxsize=2048)
def _written_argument_indices(schema: str) -> tuple[int, ...]:
    try:
        parsed = torch._C.parse_schema(schema)
    except RuntimeError:
        return ()
    return tuple(
        i
        for i, arg in enumerate(parsed.arguments)
        if arg.alias_info is not None and arg.alias_info.is_write
    )


def _written_inputs(node: torch._C.Node) -> list[torch._C.Value]:
    kind = node.kind()
    if kind == "prim::SetAttr":
        return [node.inputsAt(0)]
    schema = node.schema()
    if schema == "(no schema)":
        return []
    inputs = list(node.inputs())
    return [inputs[i] for i in _written_argument_indices(schema) if i < len(inputs)]


# Nodes asked for their schema between two pauses (a few ms).
_PAUSE_EVERY = 2000


def _no_pause() -> None:
    """No pause (writers nobody waits on)."""


class GraphWriters:
    """The writing nodes of one inlined method graph, and who writes a given value.

    Args:
        graph: an inlined method graph (not modified).
        method: its method name, for display.
        module_types: qualified names of the model's module types (a ``prim::SetAttr``
            on a module assigns an attribute; on any other object it writes that object).
        frozen: use frozen alias semantics, as freezing does (default True).
    """

    def __init__(
        self,
        graph: torch._C.Graph,
        method: str,
        *,
        module_types: frozenset[str] = frozenset(),
        frozen: bool = True,
    ) -> None:
        self.graph = graph
        self.method = method
        self.module_types = module_types
        self.db = graph.alias_db(isFrozen=frozen)  # type: ignore[call-arg]
        self._writer_nodes: list[tuple[torch._C.Node, list[torch._C.Value]]] | None = None
        # One record per writing node and written values: a weight read in every layer
        # of a transformer has the same hundred writers each time, and describing a
        # node (its IR line, its source) costs tens of microseconds.
        self._records: dict[tuple[int, tuple[int, ...]], Writer] = {}
        self._value_writer_nodes: list[tuple[int, torch._C.Node, list[torch._C.Value]]] | None = (
            None
        )
        self._frozen = frozen
        self._probe: torch._C.Value | None = None
        self._probe_sought = False
        self._written_index: dict[int, list[int]] | None = None
        self._wild_writers: list[tuple[int, torch._C.Node, list[torch._C.Value]]] | None = None
        self._wild_found: list[Writer] | None = None
        #: Called between the bigger parts of collecting the writers (explain's pause).
        self.pause: Callable[[], None] = _no_pause

    @property
    def _writers(self) -> list[tuple[torch._C.Node, list[torch._C.Value]]]:
        # Collected on first use: most attributes have no writer. Asking every node of a
        # large graph for its schema from Python is slow, so only nodes
        # of kinds that can write are asked: in-place ops (`add_`), container mutators
        # (`append`, `_set_item`, ...) and prim::SetAttr, found by torch's own search.
        if self._writer_nodes is None:
            found: list[tuple[torch._C.Node, list[torch._C.Value]]] = []
            kinds = set(_KIND_RE.findall(str(self.graph)))
            asked = 0
            for kind in sorted(k for k in kinds if _may_write(k)):
                self.pause()  # the printout and each search hold the GIL a while
                for node in self.graph.findAllNodes(kind, True):  # type: ignore[attr-defined]
                    asked += 1
                    if not asked % _PAUSE_EVERY:
                        self.pause()
                    written = _written_inputs(node)
                    if written:
                        found.append((node, written))
            self._writer_nodes = found
        return self._writer_nodes

    def has_writers(self, value: torch._C.Value) -> bool:
        """torch's own answer: may anything write ``value`` (or what it aliases)?"""
        return bool(self.db.has_writers(value))  # type: ignore[attr-defined]

    def writers_of(self, value: torch._C.Value) -> list[Writer]:
        """The nodes that write ``value`` or a value that may alias it.

        ``prim::SetAttr`` nodes that store into a module are not writes to the stored
        value; they are reported by the caller as ``set-attr`` facts.

        The same writers as asking alias analysis about every writing node
        (:meth:`_scanned_hits`), but for a module attribute's read only the writers that
        can be among them are asked (:meth:`_candidates`): a stack of 2,048 BatchNorms
        has 2,048 ``add_`` writers and 2,048 reads they write.
        """
        candidates = self._candidates(value)
        if candidates is not None and candidates is self._wild_writers:
            # A read in the Tensor wildcard set aliases exactly what the probe does:
            # every such read has the same writers, asked about once.
            if self._wild_found is None:
                probe = self._wildcard_probe
                assert probe is not None  # the wild candidates are found through it
                self._wild_found = [
                    replace(w, wildcard=True)
                    for w in self._found(self._scanned_hits(probe, candidates))
                ]
            found = list(self._wild_found)
        else:
            found = self._found(self._scanned_hits(value, candidates))
        if not found:
            found = self._fork_writers(value)
        return found

    def _found(self, hits: list[tuple[int, torch._C.Node, list[torch._C.Value]]]) -> list[Writer]:
        found: list[Writer] = []
        for index, node, written in hits:
            key = (index, tuple(w.unique() for w in written))
            record = self._records.get(key)
            if record is None:
                record = self._records[key] = self._writer(node, written)
            found.append(record)
        return found

    def _scanned_hits(
        self,
        value: torch._C.Value,
        writers: list[tuple[int, torch._C.Node, list[torch._C.Value]]] | None = None,
    ) -> list[tuple[int, torch._C.Node, list[torch._C.Value]]]:
        """``writers`` (all by default) that write ``value`` or what may alias it, with
        the written values that do: alias analysis asked about each one."""
        unique = value.unique()
        may_alias = self.db.may_contain_alias  # type: ignore[attr-defined]
        hits = []
        for index, node, written in self._value_writers if writers is None else writers:
            mine = [w for w in written if w.unique() == unique or may_alias(w, value)]
            if mine:
                hits.append((index, node, mine))
        return hits

    def _candidates(
        self, value: torch._C.Value
    ) -> list[tuple[int, torch._C.Node, list[torch._C.Value]]] | None:
        """The writers that may write ``value``, a superset of the answer; None: all.

        With frozen semantics a module attribute's ``prim::GetAttr`` creates a fresh
        memory location, and a Tensor read then lives in one of two places:

        - its own location, when alias analysis does not take it for the Tensor
          wildcard: only values derived from it can share that, and :meth:`_aliases`
          finds them; the candidates are the writers of those values;
        - the Tensor wildcard alone, once it joined that set (put in a list, handed to
          an op alias analysis cannot see into): it may then alias exactly what a graph
          input of Tensor type may alias (a graph input points to the wildcard and
          nothing else); the candidates are the writers of such values, the same for
          every such read and found once.
        """
        if not self._frozen or value.node().kind() != "prim::GetAttr":
            return None
        owner = value.node().inputsAt(0).type()
        if not isinstance(owner, torch._C.ClassType) or not self.is_module_value(
            value.node().inputsAt(0)
        ):
            return None
        if not _is_tensor_or_optional(value.type()):
            return None
        probe = self._wildcard_probe
        if probe is None:
            return None
        if self.db.may_contain_alias(value, probe):  # type: ignore[attr-defined]
            if self._wild_writers is None:
                self._wild_writers = [
                    entry for entry in self._value_writers if self._scanned_hits(probe, [entry])
                ]
            return self._wild_writers
        aliases = self._aliases(value)
        if aliases is None:
            return None
        by_value = self._by_written_value
        indices = sorted({i for u in aliases for i in by_value.get(u, ())})
        return [self._value_writers[i] for i in indices]

    def _aliases(self, value: torch._C.Value) -> set[int] | None:
        """The unique ids of every value that may alias ``value``, a read with a fresh
        location of its own (see :meth:`_candidates`); None when unsure.

        Such a location can only come to be shared through the nodes that take
        ``value`` (or an alias of it) as an input: walking its uses forward, and asking
        alias analysis about each output found, reaches every alias. Not so around a
        loop (a loop-carried value points to what the body computes later), into a
        fork or a call that was not inlined: there the answer is None.
        """
        may_alias = self.db.may_contain_alias  # type: ignore[attr-defined]
        seen = {value.unique()}
        todo = [value]
        while todo:
            current = todo.pop()
            for use in current.uses():
                user = use.user
                kind = user.kind()
                if kind == "prim::Return":
                    owner = user.owningBlock().owningNode()
                    if owner is None:
                        continue  # the graph's own return: nothing after it can alias
                    if owner.kind() != "prim::If":
                        return None
                    outputs = [owner.outputsAt(use.offset)]
                elif kind in _BLOCK_KINDS or kind in _OPAQUE_KINDS:
                    return None
                else:
                    outputs = list(user.outputs())
                for out in outputs:
                    if out.unique() not in seen and may_alias(out, value):
                        seen.add(out.unique())
                        todo.append(out)
        return seen

    @property
    def _wildcard_probe(self) -> torch._C.Value | None:
        if not self._probe_sought:
            self._probe_sought = True
            self._probe = next(
                (v for v in self.graph.inputs() if isinstance(v.type(), torch._C.TensorType)),
                None,
            )
        return self._probe

    @property
    def _by_written_value(self) -> dict[int, list[int]]:
        # Positions in _value_writers by the unique id of each value they write.
        if self._written_index is None:
            self._written_index = {}
            for position, (_, _, written) in enumerate(self._value_writers):
                for w in written:
                    self._written_index.setdefault(w.unique(), []).append(position)
        return self._written_index

    def _fork_writers(self, value: torch._C.Value) -> list[Writer]:
        # Alias analysis takes every value handed to torch.jit.fork as written (it does
        # not follow the forked body): the fork is the writer to name.
        found: list[Writer] = []
        unique = value.unique()
        may_alias = self.db.may_contain_alias  # type: ignore[attr-defined]
        forks = self.graph.findAllNodes("prim::fork", True)  # type: ignore[attr-defined]
        for node in forks:
            hits = [w for w in node.inputs() if w.unique() == unique]
            if hits:
                found.append(self._writer(node, hits))
        if not found:  # handed over through an alias (a view, a list holding it)
            kind = value.type().kind()
            for node in forks:
                hits = [w for w in node.inputs() if w.type().kind() == kind and may_alias(w, value)]
                if hits:
                    found.append(self._writer(node, hits))
        return found

    @property
    def _value_writers(self) -> list[tuple[int, torch._C.Node, list[torch._C.Value]]]:
        # The writers :meth:`writers_of` scans for every attribute read, without the
        # assignments into modules, which are never writes of a value.
        if self._value_writer_nodes is None:
            self._value_writer_nodes = [
                (index, node, written)
                for index, (node, written) in enumerate(self._writers)
                if not (node.kind() == "prim::SetAttr" and self.is_module_value(node.inputsAt(0)))
            ]
        return self._value_writer_nodes

    def _writer(self, node: torch._C.Node, written: list[torch._C.Value]) -> Writer:
        return Writer(
            method=self.method,
            kind=node.kind(),
            text=node_text(node),
            source=node_source(node),
            written=tuple(v.debugName() for v in written),
            written_types=tuple(str(v.type()) for v in written),
        )

    def describe_node(self, node: torch._C.Node) -> Writer:
        """A :class:`Writer` record for any node (used for ``prim::SetAttr``)."""
        return self._writer(node, _written_inputs(node))

    def is_module_value(self, value: torch._C.Value) -> bool:
        """True if ``value`` holds a module (or a module interface)."""
        t = value.type()
        if isinstance(t, torch._C.InterfaceType):
            return True
        return isinstance(t, torch._C.ClassType) and t.qualified_name() in self.module_types


def inline_method_graph(graph: torch._C.Graph) -> torch._C.Graph:
    """A copy of ``graph`` with every call inlined, as freezing does first.

    The module's own graph is left untouched.
    """
    copy = graph.copy()
    torch._C._jit_pass_inline(copy)
    return copy
