"""The app explains the same loaded model again at every toggle of a preserved
attribute: its module tree is listed once, and every explanation still agrees with torch."""

from __future__ import annotations

import torch
from torch import nn

from freezeview.engine.reasons import verdicts


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def test_a_second_explanation_of_the_same_model_lists_its_tree_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    module = torch.jit.script(_Counter().eval())
    calls: list[object] = []
    real = verdicts.build_inventory

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(verdicts, "build_inventory", counted)
    first = verdicts.explain(module)
    second = verdicts.explain(module, preserved_attrs=["scale"])
    assert len(calls) == 1
    assert second.inventory is first.inventory
    # torch decides each time: the status follows whether torch's frozen module kept it.
    for explanation, preserved in ((first, []), (second, ["scale"])):
        frozen = torch.jit.freeze(module, preserved_attrs=preserved)
        verdict = explanation.by_path("scale")
        assert verdict is not None
        assert (verdict.status == "kept") == hasattr(frozen, "scale")
    # Another model is listed on its own.
    verdicts.explain(torch.jit.script(_Counter().eval()))
    assert len(calls) == 2
