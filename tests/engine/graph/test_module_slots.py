"""``tensors_in``: the tensors inside an attribute's or a constant's value, which the
sandbox copies and the constant count measures, are torch's own objects, in order."""

from __future__ import annotations

import torch

from freezeview.engine.graph import attribute_values, tensors_in


def test_tensors_in_nested_values_in_order() -> None:
    a, b, c, d = (torch.full((1,), float(i)) for i in range(4))
    value = [a, (b, {"x": c, "y": [d]}), "name", 3, None]
    found = tensors_in(value)
    assert [t is w for t, w in zip(found, (a, b, c, d), strict=True)] == [True] * 4
    assert tensors_in("name") == [] and tensors_in({"k": 1}) == []


def test_tensors_in_reads_a_scripted_attribute_like_torch() -> None:
    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.pair = [torch.ones(2), torch.zeros(3)]

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.pair[0].sum()

    scripted = torch.jit.script(Holder())
    values = dict(attribute_values(scripted._c) or [])
    found = tensors_in(values["pair"])
    assert [t.shape for t in found] == [t.shape for t in scripted.pair]
    assert all(torch.equal(t, w) for t, w in zip(found, scripted.pair, strict=True))
