"""A few nodes of a graph's printout, parsed when asked for: why a pass did not fire.

A pass's diagnosis (``engine/freeze/pass_diagnosis.py``) reads the nodes of the kinds
its pass rewrites, the node that produces each of their inputs, and how many uses a
value has; a snapshot of every node (even a partial one) costs ~70 ms on a 9k-node
frozen transformer, for the few hundred nodes a diagnosis looks at. A
:class:`SparseReading` finds the node lines of the printout with one regular expression
(in C), and parses a line only when a reader asks for its node, with the snapshot's own
line parser: each node it gives equals the partial snapshot's
(:func:`~freezeview.engine.graph.snapshot.partial_snapshot`: a module scope for the
kinds asked for, no schema), except that its nested blocks are left out.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import torch

from .snapshot_parse import line_parts, split_values
from .snapshot_values import NodeSnapshot, ValueInfo, module_scope
from .snapshot_walk import PRINTED_KIND_RE, SUBGRAPH_LABEL_RE, printed_nodes_of_kinds

__all__ = ["SparseReading"]

_BLOCK_LINE_RE = re.compile(r"^ *block\d+\((?P<params>.*)\):$", re.MULTILINE)
_OUTPUT_NAMES_RE = re.compile(r"%([^\s,:]+) : ")


class SparseReading:
    """The nodes of a graph's printout, each parsed on first use.

    Args:
        graph: the graph ``text`` was printed from, as it still is (the module scopes
            and output uses of the nodes of ``scope_kinds`` are asked of torch here).
        text: torch's printout of ``graph``.
        scope_kinds: the kinds whose nodes get their module scope (the others ``""``).

    Raises:
        ValueError: the printout has lines this reading does not know (a constant
            printed over several lines): take a snapshot instead.
    """

    def __init__(self, graph: torch._C.Graph, text: str, scope_kinds: frozenset[str]) -> None:
        end = text.find("\n  return (")
        body = text if end < 0 else text[:end]
        matches = list(PRINTED_KIND_RE.finditer(body))
        kinds = [m.group(1) for m in matches]
        for i, kind in enumerate(kinds):
            if kind[-1].isdigit():
                label = SUBGRAPH_LABEL_RE.match(kind)
                if label is not None:
                    kinds[i] = label.group(1)
        header_end = body.find("):\n")
        if not body.startswith("graph(") or header_end < 0:
            raise ValueError("not a graph printout")
        # Every line is the header's, a node's, or a block's first ("block0(...):") or
        # last ("-> (...)"), one each per block: a line of any other kind (a constant
        # printed over several lines) makes the count differ.
        header_lines = body.count("\n", 0, header_end) + 1
        lines = body.count("\n") + 1
        if header_lines + len(matches) + 2 * body.count("-> (") != lines:
            raise ValueError("the printout has lines that are neither nodes nor blocks")
        # The graph's own text: the subgraphs printed after its return have their own names.
        stop = text.find("\n", end + 1) if end >= 0 else -1
        self._text = text if stop < 0 else text[:stop]
        self._body = body
        # The inputs, one per header line, joined as the snapshot's parser joins them.
        self._header = "".join(part.strip() for part in body[:header_end].split("\n"))[6:]
        self._starts = [m.start() for m in matches]
        # Each node line up to its kind: "  %a : int, %b : Tensor = prim::TupleUnpack".
        self._heads = [m.group(0) for m in matches]
        self.kinds = kinds
        # What torch alone knows is asked now, for the nodes of ``scope_kinds`` (the
        # graph may be the pipeline's working graph, which the next pass rewrites):
        # each one's module scope and the uses of each of its outputs.
        self._scopes: dict[int, str] = {}
        self._uses: dict[int, tuple[int, ...]] = {}
        for i, node in printed_nodes_of_kinds(graph, kinds, scope_kinds):
            self._scopes[i] = module_scope(node.getModuleHierarchy())
            self._uses[i] = tuple(len(out.uses()) for out in node.outputs())
        self._nodes: dict[int, NodeSnapshot] = {}
        self._producers: dict[str, int] | None = None
        self._values: dict[str, ValueInfo] | None = None

    def nodes(self, kinds: Iterable[str]) -> list[NodeSnapshot]:
        """The nodes of ``kinds``, nested blocks included, in pre-order."""
        wanted = set(kinds)
        return [self.node(i) for i, kind in enumerate(self.kinds) if kind in wanted]

    def node(self, index: int) -> NodeSnapshot:
        """The node at pre-order position ``index`` (its ``id``)."""
        found = self._nodes.get(index)
        if found is not None:
            return found
        start = self._starts[index]
        end = self._body.find("\n", start)
        line = self._body[start : end if end >= 0 else len(self._body)]
        _width, _printed, outputs, attributes, inputs, source, constant, head = line_parts(line)
        scope = self._scopes.get(index, "")
        node = NodeSnapshot(
            index,
            self.kinds[index],
            inputs,
            outputs,
            attributes,
            constant,
            scope,
            source,
            None,
            (),
            head,
        )
        self._nodes[index] = node
        return node

    def producer(self, value: str) -> NodeSnapshot | None:
        """The node that defines ``value``; None for a graph or block input."""
        if self._producers is None:
            producers: dict[str, int] = {}
            # A node line's outputs are what comes before its " = kind"; nodes without
            # outputs ("   = prim::SetAttr") have none. Most nodes have one output.
            for index, head in enumerate(self._heads):
                colons = head.count(" : ")
                if colons == 1:
                    producers[head[head.index("%") + 1 : head.index(" : ")]] = index
                elif colons:
                    for name in _OUTPUT_NAMES_RE.findall(head):
                        producers[name] = index
            self._producers = producers
        found = self._producers.get(value)
        return self.node(found) if found is not None else None

    def use_count(self, value: str) -> int:
        """How many node inputs and block outputs read ``value`` (as torch counts them)."""
        node = self.producer(value)
        uses = self._uses.get(node.id) if node is not None else None
        if node is not None and uses is not None:
            return uses[node.output_names.index(value)]
        # Where torch was not asked: the inputs and block outputs that name it.
        return len(re.findall(rf"%{re.escape(value)}(?=[,)])", self._text))

    def value(self, name: str) -> ValueInfo | None:
        """The value named ``name`` (graph input, block input or node output)."""
        node = self.producer(name)
        if node is not None:
            return next((v for v in node.outputs if v.name == name), None)
        if self._values is None:
            values = {v.name: v for v in split_values(self._header)}
            for match in _BLOCK_LINE_RE.finditer(self._body):
                values.update((v.name, v) for v in split_values(match.group("params")))
            self._values = values
        return self._values.get(name)
