"""Immutable, tensor-free pictures of TorchScript graphs.

torch passes rewrite graphs in place, so freezeview takes a *value* picture of a graph
at each moment it wants to show or diff: node kinds, value names and types, node
attributes, source locations, module scope and nested blocks. Constants are
summarised (dtype, shape, a few values, the attribute they came from); a snapshot never
holds a tensor or a reference to torch objects, so many snapshots of a large model cost
kilobytes.

This module is the way in (:func:`snapshot_graph`) and keeps the value classes
importable from here; the values live in :mod:`~freezeview.engine.graph.snapshot_values`,
the torch walk in :mod:`~freezeview.engine.graph.snapshot_walk` and the printout parser in
:mod:`~freezeview.engine.graph.snapshot_parse`.
"""

from __future__ import annotations

import gc

import torch

from .naming import demangle
from .snapshot_parse import TextParser
from .snapshot_values import (
    BlockSnapshot,
    ConstantSummary,
    GraphSnapshot,
    NodeSnapshot,
    SourceLocation,
    ValueInfo,
    module_scope,
    parse_source_range,
)
from .snapshot_walk import PrintedWalk, SnapshotBuilder, Walked

__all__ = [
    "BlockSnapshot",
    "ConstantSummary",
    "GraphSnapshot",
    "NodeSnapshot",
    "SourceLocation",
    "ValueInfo",
    "demangle",
    "module_scope",
    "parse_source_range",
    "partial_snapshot",
    "snapshot_graph",
]


def _fast_snapshot(graph: torch._C.Graph, method: str, text: str | None = None) -> GraphSnapshot:
    # Tens of thousands of small frozen objects, none cyclic: the cyclic garbage
    # collector would rescan them over and over while they are built.
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_snapshot(graph, method, text)
    finally:
        if was_enabled:
            gc.enable()


def _parse_snapshot(
    graph: torch._C.Graph,
    method: str,
    text: str | None = None,
    scope_kinds: frozenset[str] | None = None,
) -> GraphSnapshot:
    text = str(graph) if text is None else text
    walked = Walked(graph) if scope_kinds is None else PrintedWalk(graph, text, scope_kinds)
    parser = TextParser(text, walked)
    block = parser.parse()
    if parser.next_id != len(walked.kinds):
        raise ValueError("node count differs from the graph walk")
    return GraphSnapshot(
        method=method,
        block=block,
        text=text,
        node_count=parser.next_id,
        _values=parser.values,
        _in_order=tuple(parser.in_order),  # type: ignore[arg-type]
    )


def snapshot_graph(
    graph: torch._C.Graph, method: str = "forward", *, text: str | None = None
) -> GraphSnapshot:
    """Take an immutable, tensor-free snapshot of ``graph``.

    Args:
        graph: a TorchScript graph (``module.forward.graph`` or a copy).
        method: the method name the graph belongs to, kept for display.
        text: torch's printout of the graph ``graph`` was copied from, taken before that
            graph changed (the stepwise pipeline keeps a copy and builds the snapshot
            later). A copy renumbers unnamed values (``%7`` becomes ``%11``); with the
            original printout the picture keeps the names the user's graph had.
            Default: ``str(graph)``.

    Returns:
        A :class:`GraphSnapshot` that stays valid however the graph changes later.

    Example::

        snap = snapshot_graph(torch.jit.script(torch.nn.ReLU()).graph)
        assert snap.kinds()["aten::relu"] == 1
    """
    try:
        return _fast_snapshot(graph, method, text)
    except (ValueError, IndexError):
        pass  # an IR printout this parser does not know: take the careful path
    builder = SnapshotBuilder()
    block = builder.block(graph.block(), list(graph.inputs()))
    return GraphSnapshot(
        method=method,
        block=block,
        text=str(graph),
        node_count=builder.next_id,
        _values=builder.values,
    )


def partial_snapshot(
    graph: torch._C.Graph,
    method: str = "forward",
    *,
    text: str | None = None,
    scope_kinds: frozenset[str] = frozenset(),
) -> GraphSnapshot:
    """A snapshot whose nodes have a module scope only if their kind is in ``scope_kinds``.

    No node has a schema, and other nodes have the scope ``""``: everything else is what
    :func:`snapshot_graph` gives, for less than half its cost on a large graph (no walk
    of torch's nodes). For a reader of a few kinds of nodes (why a pass did not fire);
    never a step's picture. Falls back to :func:`snapshot_graph` when the printout
    cannot be read this way.
    """
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        return _parse_snapshot(graph, method, text, scope_kinds)
    except (ValueError, IndexError):
        pass
    finally:
        if was_enabled:
            gc.enable()
    return snapshot_graph(graph, method, text=text)
