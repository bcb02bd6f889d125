"""The tensors baked into a graph: their bytes, their duplicates, devices and dtypes.

Freezing turns attributes into ``prim::Constant`` nodes that hold the tensors (folds make
new ones; concatenating linears and the MKLDNN conversion copy them, the latter into
``prim::ConstantMKLDNNTensor``). Reading them costs one ``findAllNodes`` per kind and no
copy of any storage.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping
from typing import Any

import torch

from ..graph import tensors_in

__all__ = [
    "BACKEND_MARKERS",
    "backend_only_nodes",
    "constant_bytes",
    "constant_tensors",
    "devices_and_dtypes",
    "duplicate_bytes",
    "graphs_of",
    "kept_attribute_bytes",
    "tensor_bytes",
]

_CONSTANT_KINDS = ("prim::Constant", "prim::ConstantMKLDNNTensor")

#: Words in a node kind that mark a node existing only with one backend: MKLDNN
#: (oneDNN) tensors and ops, cuDNN / MIOpen fusions, XNNPACK and other prepacked ops.
BACKEND_MARKERS = ("mkldnn", "cudnn", "miopen", "xnnpack", "prepacked")


def tensor_bytes(tensor: torch.Tensor) -> int:
    """Bytes a tensor's values take (MKLDNN tensors included: their dense size)."""
    try:
        return int(tensor.numel()) * int(tensor.element_size())
    except (RuntimeError, NotImplementedError):
        return 0  # a layout without a plain element count


def _storage_key(tensor: torch.Tensor) -> tuple[Any, ...]:
    """Tensors sharing storage count once; MKLDNN tensors have no data pointer."""
    if tensor.is_mkldnn or tensor.layout != torch.strided:
        return ("other", id(tensor))
    return (str(tensor.device), tensor.untyped_storage().data_ptr(), tensor_bytes(tensor))


def constant_tensors(graphs: Iterable[torch._C.Graph]) -> list[torch.Tensor]:
    """Every tensor a constant node of the graphs holds (nested blocks included), those
    inside list, tuple and dict constants too.

    Each distinct storage appears once (the same weight read by two methods' graphs,
    or by two constant nodes, is one tensor in the file).
    """
    seen: set[tuple[Any, ...]] = set()
    out: list[torch.Tensor] = []
    for graph in graphs:
        for kind in _CONSTANT_KINDS:
            for node in graph.findAllNodes(kind, True):  # type: ignore[attr-defined]
                for tensor in _node_tensors(node):
                    key = _storage_key(tensor)
                    if key not in seen:
                        seen.add(key)
                        out.append(tensor)
    return out


def _node_tensors(node: torch._C.Node) -> list[torch.Tensor]:
    """The tensors one constant node holds: its tensor, or those inside the list, tuple
    or dict it holds (a folded ``self.a = [torch.tensor(...)]`` is a ``Tensor[]``
    constant); none for a TorchScript object (its tensors are its own business)."""
    if not node.hasAttribute("value"):
        return []
    what = node.kindOf("value")
    if what == "t":
        return [node.t("value")]
    if what != "ival":
        return []
    kind = node.output().type()
    if kind.kind() == "ClassType" or "Tensor" not in kind.annotation_str:
        return []
    try:
        value = node.ival("value")  # type: ignore[attr-defined]
    except (RuntimeError, TypeError, ValueError):
        return []  # an object or enum Python cannot import
    return tensors_in(value)


def constant_bytes(graphs: Iterable[torch._C.Graph]) -> int:
    """Bytes of the tensor constants in the graphs, each storage counted once."""
    return sum(tensor_bytes(t) for t in constant_tensors(graphs))


def duplicate_bytes(tensors: Iterable[torch.Tensor]) -> int:
    """Bytes of tensors that hold the same values as an earlier tensor of the list.

    Tensors are grouped by dtype, shape, device and a sample of their values (64 evenly
    spaced elements) first; only tensors of one group are compared value by value
    (``torch.equal``): a ResNet-50 has dozens of weights of one shape, and comparing each
    pair in full would cost more than freezing it.
    """
    groups: dict[tuple[Any, ...], list[torch.Tensor]] = defaultdict(list)
    for tensor in tensors:
        dense = tensor.to_dense() if tensor.is_mkldnn else tensor
        if dense.layout != torch.strided:
            continue  # sparse constants: their storage is not their values
        groups[(dense.dtype, tuple(dense.shape), str(dense.device), _sample(dense))].append(dense)
    total = 0
    for members in groups.values():
        if len(members) < 2:
            continue
        distinct: list[torch.Tensor] = []
        for tensor in members:
            if any(_equal(tensor, other) for other in distinct):
                total += tensor_bytes(tensor)
            else:
                distinct.append(tensor)
    return total


def _sample(tensor: torch.Tensor) -> bytes:
    """The bytes of 64 evenly spaced elements (all of a small tensor)."""
    flat = tensor.detach().reshape(-1)
    if flat.numel() > 64:
        flat = flat[:: flat.numel() // 64][:64]
    try:
        return bytes(flat.contiguous().cpu().view(torch.uint8).numpy().tobytes())
    except (RuntimeError, TypeError):
        return repr(flat.tolist()).encode()


def _equal(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Same values; tensors torch cannot compare (some quantized layouts) are not equal."""
    try:
        return bool(torch.equal(a, b))
    except (RuntimeError, TypeError, NotImplementedError):
        return False


def kept_attribute_bytes(module: Any) -> int:
    """Bytes of tensors the (frozen) module still holds as attributes, each storage once."""
    from ..graph import attribute_values

    cmod = getattr(module, "_c", module)
    values = attribute_values(cmod)
    if values is None:
        return 0
    seen: set[tuple[Any, ...]] = set()
    total = 0
    for _, value in values:
        if isinstance(value, torch.Tensor):
            key = _storage_key(value)
            if key not in seen:
                seen.add(key)
                total += tensor_bytes(value)
    return total


def backend_only_nodes(graphs: Iterable[torch._C.Graph]) -> dict[str, int]:
    """Node kind -> count for the nodes that exist only with one backend.

    A kind counts when its name carries one of :data:`BACKEND_MARKERS`
    (``prim::ConstantMKLDNNTensor``, ``prim::mkldnn_convolution``,
    ``aten::to_mkldnn``, ``mkldnn_prepacked::conv2d_run``, ``prepacked::linear_clamp_run``,
    ``aten::cudnn_convolution_add_relu``), plus ``aten::to_dense`` next to them (it turns
    MKLDNN tensors back).
    """
    counts: Counter[str] = Counter()
    for graph in graphs:
        # A kind with a marker prints it: a graph whose printout has none (the usual
        # case) needs no walk, which costs ~0.1 s on a 9k-node graph (printing, ~10 ms).
        text = str(graph).lower()
        if any(marker in text for marker in BACKEND_MARKERS):
            _count_kinds(graph.block(), counts)
    found = {k: n for k, n in counts.items() if any(m in k.lower() for m in BACKEND_MARKERS)}
    if found and counts.get("aten::to_dense"):
        found["aten::to_dense"] = counts["aten::to_dense"]
    return found


def _count_kinds(block: torch._C.Block, counts: Counter[str]) -> None:
    for node in block.nodes():
        counts[node.kind()] += 1
        for sub in node.blocks():
            _count_kinds(sub, counts)


def devices_and_dtypes(tensors: Iterable[torch.Tensor]) -> tuple[list[str], list[str]]:
    """The sorted devices and dtypes (``float32``) of the tensors."""
    devices: set[str] = set()
    dtypes: set[str] = set()
    for tensor in tensors:
        devices.add(str(tensor.device))
        dtypes.add(str(tensor.dtype).removeprefix("torch."))
    return sorted(devices), sorted(dtypes)


def graphs_of(module: Any, methods: Iterable[str]) -> Mapping[str, torch._C.Graph]:
    """The graphs of ``methods`` a module has."""
    cmod = getattr(module, "_c", module)
    return {m: cmod._get_method(m).graph for m in methods if cmod._has_method(m)}
