"""Inventory: the module tree with every attribute."""

from __future__ import annotations

import torch
from models.small import Branchy, Counter, scripted

from freezeview.engine.graph.inventory import build_inventory


def test_kinds_types_and_tensor_facts() -> None:
    inv = build_inventory(scripted(Counter))
    weight = inv.by_path("weight")
    assert weight is not None
    assert (weight.kind, weight.type, weight.dtype, weight.shape) == (
        "parameter",
        "Tensor",
        "float32",
        (2,),
    )
    assert weight.requires_grad is True and weight.device == "cpu"
    count = inv.by_path("count")
    assert count is not None and count.kind == "buffer"
    calls = inv.by_path("calls")
    assert calls is not None and (calls.kind, calls.type, calls.value) == ("attribute", "int", "0")
    assert calls.readers == ("forward",) and calls.writers == ("forward",)
    assert inv.by_path("training") is not None


def test_submodules_nested_paths_and_declared_types() -> None:
    inv = build_inventory(scripted(Branchy))
    lin = inv.by_path("lin")
    assert lin is not None and lin.kind == "submodule"
    bias = inv.by_path("lin.bias")
    assert bias is not None and bias.owner == "lin" and bias.readers == ("lin.forward",)
    history = inv.by_path("history")
    assert history is not None and history.type == "List[int]"
    assert [m.path for m in inv.modules] == ["", "lin"]
    assert "forward" in inv.module("").methods  # type: ignore[union-attr]


def test_paths_match_torch_attribute_listing() -> None:
    module = scripted(Branchy)
    listed = {n for n, _ in torch._C._jit_debug_module_iterators(module._c)["named_attributes"]}
    inv = build_inventory(module)
    top = {a.path for a in inv.attributes if a.owner == ""}
    assert top == listed


def test_names_and_suggestions() -> None:
    inv = build_inventory(scripted(Branchy))
    assert "lin.weight" in inv.names() and "forward" in inv.names()
    assert inv.suggest("lin.weigth")[0] == "lin.weight"
    assert "lin.bias" in inv.suggest("bias")
