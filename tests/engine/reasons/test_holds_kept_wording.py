"""The ``holds-kept`` reason names what a submodule holds by dotted path: a bare
``0`` (a Sequential's first block) read like a count ("holds kept attributes: 0")."""

from __future__ import annotations

import torch
from torch import nn

from freezeview.engine.reasons import explain
from tests import oracle


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.n = self.n + 1
        return x + self.n


class Outer(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.seq = nn.Sequential(Counter())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.seq(x)


def test_a_submodule_holding_kept_attributes_names_them_by_path() -> None:
    survivors = oracle.frozen_attribute_paths(oracle.torch_freeze(torch.jit.script(Outer().eval())))
    result = explain(torch.jit.script(Outer().eval()))
    held = [
        (verdict.path, reason.message)
        for verdict in result.attributes
        for reason in verdict.reasons
        if reason.code == "holds-kept"
    ]
    assert ("seq", "holds kept attributes (by path): seq.0") in held, held
    for path, message in held:
        for name in message.split(": ", 1)[1].split(", "):
            assert name.startswith(f"{path}.") and name in survivors, message
