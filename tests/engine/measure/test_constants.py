"""Tensor constants, duplicates, kept attributes, backend-only nodes
(freezeview/engine/measure/constants.py), against what torch's own freeze leaves."""

from __future__ import annotations

import warnings

import torch
from measure_models import small_conv_net
from torch import nn

from freezeview.engine.measure.constants import (
    backend_only_nodes,
    constant_bytes,
    constant_tensors,
    devices_and_dtypes,
    duplicate_bytes,
    kept_attribute_bytes,
    tensor_bytes,
)


class Linear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(16, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Counting(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(32, dtype=torch.float64))
        self.w = nn.Parameter(torch.randn(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(1)
        return x * self.w


def _freeze(module: nn.Module) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.freeze(torch.jit.script(module.eval()))


def test_frozen_linear_constants_are_its_weight_and_bias() -> None:
    """torch folds weight and bias into constants: their bytes, nothing else."""
    module = Linear()
    frozen = _freeze(module)
    expected = tensor_bytes(module.fc.weight) + tensor_bytes(module.fc.bias)
    assert constant_bytes([frozen.graph]) == expected
    assert devices_and_dtypes(constant_tensors([frozen.graph])) == (["cpu"], ["float32"])
    # The unfrozen graph reads them with prim::GetAttr: no tensor constant at all.
    assert constant_bytes([torch.jit.script(Linear()).graph]) == 0


def test_one_storage_counts_once() -> None:
    """The same graph twice (or a weight read by two methods) is one tensor in the file."""
    frozen = _freeze(Linear())
    assert constant_bytes([frozen.graph, frozen.graph]) == constant_bytes([frozen.graph])


def test_duplicates_are_equal_values_in_distinct_storage() -> None:
    a = torch.randn(10)
    b = torch.randn(10)
    assert duplicate_bytes([a, b]) == 0
    assert duplicate_bytes([a, a.clone(), b]) == tensor_bytes(a)
    assert duplicate_bytes([a, a.clone(), a.clone()]) == 2 * tensor_bytes(a)
    assert duplicate_bytes([a, a.double()]) == 0  # other dtype: not the same values


def test_kept_attribute_bytes_follow_torch_keeping_a_mutated_buffer() -> None:
    """The buffer written in place stays an attribute (torch decides); the weight folds."""
    frozen = _freeze(Counting())
    assert frozen._c.hasattr("seen") and not frozen._c.hasattr("w")
    assert kept_attribute_bytes(frozen) == 32 * 8
    assert kept_attribute_bytes(_freeze(Linear())) == 0


def test_backend_only_nodes_appear_with_optimize_for_inference_only() -> None:
    """MKLDNN nodes: found exactly when torch's optimize_for_inference made them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(small_conv_net())
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(small_conv_net()))
    assert backend_only_nodes([frozen.graph]) == {}
    found = backend_only_nodes([optimized.graph])
    kinds = [n.kind() for n in optimized.graph.nodes()]
    if "prim::ConstantMKLDNNTensor" in kinds:
        assert found["prim::ConstantMKLDNNTensor"] == kinds.count("prim::ConstantMKLDNNTensor")
        assert all(kinds.count(k) == n for k, n in found.items())
    else:  # a torch without MKLDNN leaves the graph portable
        assert found == {}
    # The MKLDNN constants hold dense-sized copies of the folded conv weight and bias.
    assert constant_bytes([optimized.graph]) >= constant_bytes([frozen.graph])


class TensorList(nn.Module):
    """Writes a tensor it holds in a list: freezing folds the list into a ``Tensor[]``
    constant (the write keeps it from folding further)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = [torch.tensor([1, 2, 3, 4, 5, 6])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a[0][1] += 10
        return self.a[0].sum() + x.sum()


def test_tensors_inside_list_constants_are_counted() -> None:
    """The tensors torch puts in a folded list constant count, as torch holds them."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(torch.jit.script(TensorList().eval()))
    held = [
        t
        for node in frozen.graph.findAllNodes("prim::Constant")
        if node.output().type().kind() == "ListType"
        for t in node.output().toIValue()
        if isinstance(t, torch.Tensor)
    ]
    assert held, "torch no longer folds the list into a constant"
    tensors = constant_tensors([frozen.graph])
    assert {t.data_ptr() for t in tensors} == {t.data_ptr() for t in held}
    assert constant_bytes([frozen.graph]) == sum(t.numel() * t.element_size() for t in held)
    assert devices_and_dtypes(tensors) == (["cpu"], ["int64"])
