"""How each frozen-graph pass is run on one method graph.

Most passes are one ``torch._C`` binding taking a graph. Dropout removal is bound by
torch for a module's ``forward`` only, so freezeview rewrites the other preserved
methods itself, as ``_jit_pass_optimize_frozen_graph`` does; the guard step runs torch's
whole frozen-graph optimization. :mod:`.passes` names these runners in its registry.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "DROPOUT_KINDS",
    "PassFunction",
    "graph_pass",
    "guard",
    "remove_dropout",
    "remove_dropout_in_graph",
]

#: Runs ``(graph, method_name, module)`` and returns True/False if it knows whether it
#: changed the graph, None if it cannot tell (the pipeline then compares the IR text).
PassFunction = Callable[[torch._C.Graph, str, torch._C.ScriptModule], "bool | None"]

DROPOUT_KINDS = frozenset(
    {"aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_"}
)


def _binding(name: str) -> Callable[..., Any]:
    fn = getattr(torch._C, name, None)
    if fn is None:
        raise RuntimeError(f"this torch ({torch.__version__}) has no torch._C.{name}")
    return fn  # type: ignore[no-any-return]


def graph_pass(name: str) -> PassFunction:
    """A runner for the ``torch._C`` binding ``name`` that takes one graph."""

    def apply(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool | None:
        result = _binding(name)(graph)
        return bool(result) if isinstance(result, bool) else None

    return apply


def remove_dropout_in_graph(graph: torch._C.Graph) -> bool:
    """Remove eval-mode dropout nodes from ``graph``; return True if any was removed.

    torch binds dropout removal only for a module's ``forward``
    (``_jit_pass_remove_dropout(module)``), while ``_jit_pass_optimize_frozen_graph``
    also removes dropout from every preserved method. freezeview does the same rewrite
    for those methods here: a dropout whose ``training`` input is the constant False is
    replaced by its input, as in ``torch/csrc/jit/passes/remove_dropout.cpp``.
    """
    doomed: list[torch._C.Node] = []

    def visit(block: torch._C.Block) -> None:
        for node in reversed(list(block.nodes())):
            for sub in node.blocks():
                visit(sub)
            if node.kind() not in DROPOUT_KINDS:
                continue
            training = list(node.inputs())[2]
            if training.node().kind() != "prim::Constant" or training.toIValue() is not False:
                continue
            node.output().replaceAllUsesWith(next(iter(node.inputs())))
            doomed.append(node)

    visit(graph.block())
    for node in doomed:
        node.destroy()
    return bool(doomed)


def _dropout_count(graph: torch._C.Graph) -> int:
    # Counted by torch in C++ (nested blocks included): printing a large graph twice
    # to compare would cost more than the pass.
    found: list[list[torch._C.Node]] = [graph.findAllNodes(k) for k in DROPOUT_KINDS]  # type: ignore[attr-defined]
    return sum(len(nodes) for nodes in found)


def remove_dropout(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool:
    """torch's dropout removal on ``forward``, freezeview's on any other method."""
    if method == "forward":
        before = _dropout_count(graph)
        _binding("_jit_pass_remove_dropout")(module)
        return _dropout_count(graph) < before
    return remove_dropout_in_graph(graph)


def guard(optimize_numerics: bool) -> PassFunction:
    """A runner for torch's whole ``_jit_pass_optimize_frozen_graph`` (the guard step)."""

    def apply(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool | None:
        _binding("_jit_pass_optimize_frozen_graph")(graph, optimize_numerics)
        return None

    return apply
