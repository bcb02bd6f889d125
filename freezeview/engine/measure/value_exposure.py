"""Exposing a graph's values, and comparing two runs' values: value bisection's tools.

:func:`expose_values` makes a copy of a forward graph that also returns chosen values
(tensors cloned right after the node that makes them, so a later in-place op cannot change
what is read); :func:`compare_value` compares one value of two runs (tensors elementwise,
dtype and shape included; other values by equality). :mod:`.value_bisect` uses both to
find where a step moves the numbers.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from ..plumbing import plural
from .node_clocks import walk_nodes
from .value_bisect_values import ValueDiff

__all__ = ["compare_outputs_values", "compare_value", "exposable", "expose_values", "value_makers"]

_SCALAR_KINDS = frozenset({"IntType", "FloatType", "BoolType", "StringType", "NumberType"})


# --- comparing values ------------------------------------------------------------------


def _dtype(t: torch.Tensor) -> str:
    return str(t.dtype).replace("torch.", "")


def _plain(t: torch.Tensor) -> torch.Tensor:
    """A dense, dequantized, detached view of ``t`` that arithmetic can read."""
    t = t.detach()
    if t.is_mkldnn:
        t = t.to_dense()
    if t.is_quantized:
        t = t.dequantize()
    if t.is_complex():
        t = torch.view_as_real(t)
    return t


def _short(value: Any) -> str:
    if isinstance(value, torch.Tensor):
        return f"{_dtype(value)} tensor {list(value.shape)}"
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def compare_value(before: Any, after: Any) -> ValueDiff:
    """Compare one value of the graph before a step with its match after it.

    Tensors are compared elementwise in float64 (NaN where NaN was agrees); a different
    dtype or shape is a difference. Other values are compared by equality.

    Args:
        before: the value the graph before computed.
        after: the matched value the step's graph computed.

    Returns:
        A :class:`ValueDiff` (``equal`` only when bit for bit the same).
    """
    if isinstance(before, torch.Tensor) and isinstance(after, torch.Tensor):
        db, da = _dtype(before), _dtype(after)
        b, a = _plain(before), _plain(after)
        sb, sa = tuple(int(s) for s in b.shape), tuple(int(s) for s in a.shape)
        if sb != sa:
            return ValueDiff(False, None, None, db, da, sb, sa)
        if b.numel() == 0:
            return ValueDiff(db == da, 0.0, 0.0, db, da, sb, sa)
        bd, ad = b.to(torch.float64), a.to(torch.float64)
        diff = (bd - ad).abs()
        diff = torch.where(torch.isnan(bd) & torch.isnan(ad), torch.zeros_like(diff), diff)
        worst = float(diff.max())
        worst = math.inf if math.isnan(worst) else worst
        finite = bd[torch.isfinite(bd)]
        scale = float(finite.abs().max()) if finite.numel() else 0.0
        rel = worst / scale if scale > 0 else (0.0 if worst == 0 else math.inf)
        return ValueDiff(worst == 0.0 and db == da, worst, rel, db, da, sb, sa)
    if isinstance(before, torch.Tensor) or isinstance(after, torch.Tensor):
        return ValueDiff(False, before=_short(before), after=_short(after))
    try:
        same = type(before) is type(after) and bool(before == after)
    except Exception:
        same = False
    if not same and isinstance(before, float) and isinstance(after, float):
        same = math.isnan(before) and math.isnan(after)
    if same:
        return ValueDiff(True)
    return ValueDiff(False, before=_short(before), after=_short(after))


def _flatten(value: Any) -> list[Any]:
    """The leaves of a nested output (tuples, lists, dicts by key), in a stable order."""
    if isinstance(value, (tuple, list)):
        return [leaf for item in value for leaf in _flatten(item)]
    if isinstance(value, dict):
        return [leaf for key in sorted(value, key=repr) for leaf in _flatten(value[key])]
    return [value]


def compare_outputs_values(before: Any, after: Any) -> ValueDiff:
    """The graphs' outputs compared leaf by leaf: the largest difference of any leaf."""
    b, a = _flatten(before), _flatten(after)
    if len(b) != len(a):
        return ValueDiff(False, before=plural(len(b), "output"), after=plural(len(a), "output"))
    diffs = [compare_value(x, y) for x, y in zip(b, a, strict=True)]
    differing = [d for d in diffs if not d.equal]
    if not differing:
        return diffs[0] if len(diffs) == 1 else ValueDiff(True)
    if len(diffs) == 1:
        return diffs[0]
    # The leaf that moved most speaks for the outputs.
    return max(differing, key=lambda d: -1.0 if d.max_abs is None else d.max_abs)


# --- exposing values -------------------------------------------------------------------


def exposable(value: torch._C.Value) -> bool:
    """True for a value compared by value: a tensor, a scalar, a list of scalars."""
    kind = value.type().kind()
    if kind in ("TensorType", "NoneType") or kind in _SCALAR_KINDS:
        return True
    if kind == "ListType":
        element = value.type().getElementType().kind()
        return element in _SCALAR_KINDS
    return False


def expose_values(graph: torch._C.Graph, wanted: Sequence[tuple[int, int]]) -> torch._C.Graph:
    """A copy of ``graph`` that also returns the values ``wanted``.

    Args:
        graph: a forward graph (not changed).
        wanted: ``(node id, output index)`` pairs: node ids in the pre-order walk a
            snapshot numbers by (``(-1, i)``: the graph's input ``i``); the nodes must sit
            in the top-level block and the values be exposable (tensors, scalars, lists
            of scalars).

    Returns:
        A copy whose single output is a tuple: the graph's own output first, then each
        wanted value in order (a tensor as a clone taken right after its node, so a later
        in-place op does not change what is read).
    """
    # torch's public graph API (Graph.copy/create/registerOutput, Node.insertAfter),
    # present from torch 2.4 on; a method's graph must return one value, hence the tuple.
    copy = graph.copy()
    nodes = [node for node, _ in walk_nodes(copy)]
    top = list(copy.nodes())
    none = copy.create("prim::Constant", [], 1)
    none.output().setType(torch._C.NoneType.get())
    if top:
        none.insertBefore(top[0])
    else:
        none.insertBefore(copy.return_node())
    inputs = list(copy.inputs())
    values: list[torch._C.Value] = []
    for node_id, index in wanted:
        node = nodes[node_id] if node_id >= 0 else none
        value = node.outputsAt(index) if node_id >= 0 else inputs[index]
        if value.type().kind() == "TensorType":
            clone = copy.create("aten::clone", [value, none.output()], 1)
            clone.insertAfter(node)
            clone.output().setType(value.type())
            value = clone.output()
        values.append(value)
    own = list(copy.outputs())
    every = [*own, *values]
    packed = copy.create("prim::TupleConstruct", every, 1)
    packed.insertBefore(copy.return_node())
    packed.output().setType(torch._C.TupleType([v.type() for v in every]))
    for i in reversed(range(len(own))):
        copy.eraseOutput(i)
    copy.registerOutput(packed.output())
    return copy


def value_makers(graph: torch._C.Graph) -> dict[int, tuple[int, int]]:
    """Where each top-level value is made: ``(node id, output index)``, or ``(-1, input
    index)`` for a graph input (ids in the pre-order walk a snapshot numbers by)."""
    made = {v.unique(): (-1, i) for i, v in enumerate(graph.inputs())}
    for node_id, (node, depth) in enumerate(walk_nodes(graph)):
        if depth == 0:
            for index, out in enumerate(node.outputs()):
                made[out.unique()] = (node_id, index)
    return made
