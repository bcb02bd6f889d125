"""What freezing left in an already-frozen model: its constants and its kept attributes.

A file written from ``torch.jit.freeze``'s output (or ``optimize_for_inference``'s, or
``optimize_for_mobile``'s, which freeze) has no ``training`` flag and few attributes:
the weights are constants of the graphs. People receive such files and ask what is in
them. :func:`frozen_contents` lists every constant that holds a tensor or an object, with
its size, the module path its name points to (freezing names a folded constant after
the attribute it came from, ``self.conv.weight``; ``torch.jit.save`` does not keep those
names, so a saved file gives ``CONSTANTS.cN``, as its ``.code`` does) and the nodes that
read it; and the attributes freezing kept.
"""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import torch

from .inventory_values import HOUSEKEEPING, FrozenConstant, FrozenContents, Inventory
from .snapshot_values import parse_source_range

__all__ = ["frozen_contents"]

# A value name torch made unique by a suffix: ``self.fc.weight.3``.
_UNIQUE_SUFFIX = re.compile(r"\.\d+$")
# What folding passes append to the name of a constant they rewrite
# (``conv.weight_fused_bn``, ``conv.weight_fused_bn_mkldnn``): the attribute is before it.
_REWRITTEN = re.compile(r"(?:_fused_\w+|_mkldnn)$")
# optimize_for_inference's MKLDNN weights are constants of their own node kind.
_CONSTANT_KINDS = ("prim::Constant", "prim::ConstantMKLDNNTensor")


def _nodes(block: torch._C.Block) -> Iterator[torch._C.Node]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _nodes(sub)
        if node.kind() == "prim::fork" and node.hasAttribute("Subgraph"):
            yield from _nodes(node.g("Subgraph").block())


def _code_names(module: Any) -> dict[int, str]:
    """``CONSTANTS.cN`` by tensor storage address, as ``forward``'s ``.code`` names them."""
    try:
        _, constants = module.code_with_constants
        mapping = constants.const_mapping
    except (AttributeError, RuntimeError):
        return {}
    names: dict[int, str] = {}
    for key, value in mapping.items():
        if isinstance(value, torch.Tensor) and value.layout == torch.strided:
            names.setdefault(value.data_ptr(), f"CONSTANTS.{key}")
    return names


def _tensor_bytes(tensor: torch.Tensor) -> int:
    try:
        return int(tensor.numel() * tensor.element_size())
    except (RuntimeError, NotImplementedError):
        return 0


def _user(node: torch._C.Node) -> str:
    """``aten::conv2d (conv.py:560)``: a node that reads the constant, and where."""
    location = parse_source_range(node.sourceRange())
    return f"{node.kind()} ({location.short()})" if location is not None else node.kind()


def _constant(node: torch._C.Node, method: str, code_names: dict[int, str]) -> FrozenConstant:
    value = node.output()
    name = _UNIQUE_SUFFIX.sub("", value.debugName())
    named = name.removeprefix("self.") if name.startswith("self.") else ""
    path = _REWRITTEN.sub("", named)
    users = tuple(dict.fromkeys(_user(use.user) for use in value.uses()))
    ivalue: Any = None
    with contextlib.suppress(RuntimeError):
        ivalue = (
            node.t("value") if node.kind() == "prim::ConstantMKLDNNTensor" else value.toIValue()
        )
    if isinstance(ivalue, torch.Tensor):
        strided = ivalue.layout == torch.strided
        shown = named or (code_names.get(ivalue.data_ptr(), "") if strided else "")
        return FrozenConstant(
            name=shown or f"%{value.debugName()}",
            path=path,
            type="Tensor",
            method=method,
            dtype=str(ivalue.dtype).removeprefix("torch."),
            shape=tuple(ivalue.shape),
            device=str(ivalue.device) if strided else f"{ivalue.device} ({ivalue.layout})",
            nbytes=_tensor_bytes(ivalue),
            users=users,
        )
    return FrozenConstant(
        name=named or f"%{value.debugName()}",
        path=path,
        type=str(value.type()),
        method=method,
        users=users,
    )


def _holds_data(node: torch._C.Node) -> bool:
    """A constant holding a tensor or an object (packed weights), not a number or list."""
    if node.kind() not in _CONSTANT_KINDS or len(list(node.outputs())) != 1:
        return False
    kind = node.output().type().kind()
    return kind in ("TensorType", "ClassType")


def frozen_contents(module: Any, inventory: Inventory) -> FrozenContents:
    """The constants and kept attributes of an already-frozen ScriptModule.

    Args:
        module: the frozen ``torch.jit.ScriptModule`` (only read).
        inventory: its inventory (:func:`~.inventory.build_inventory`), for the
            attributes freezing kept.

    Returns:
        A :class:`FrozenContents`: each tensor or object constant of every method graph
        (forks' bodies included) once, the biggest first, and the kept attribute paths.
    """
    cmod = module._c if hasattr(module, "_c") else module
    code_names = _code_names(module)
    constants: list[FrozenConstant] = []
    for method in cmod._method_names():
        graph = cmod._get_method(method).graph
        constants.extend(
            _constant(node, method, code_names)
            for node in _nodes(graph.block())
            if _holds_data(node)
        )
    kept = tuple(
        info.path
        for info in inventory.attributes
        if info.kind != "submodule" and info.name not in HOUSEKEEPING
    )
    constants.sort(key=lambda c: -c.nbytes)  # the biggest first: what the file is made of
    return FrozenContents(constants=tuple(constants), kept=kept)
