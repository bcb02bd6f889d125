"""Small nn.Modules the bad-input catalogue and the fuzz test script and save.

They live in a real file because ``torch.jit.script`` reads their source with
``inspect.getsource``.
"""

from __future__ import annotations

import torch
from torch import nn

__all__ = [
    "ContainerIndexNet",
    "ReturnsSelf",
    "TinyNet",
]


class TinyNet(nn.Module):
    """conv + bn + relu + linear, a buffer updated in forward and a helper method.

    Small enough to save in milliseconds, rich enough that its archive has every kind of
    member a real model has: code, debug info, constants, tensor data.
    """

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)
        self.register_buffer("calls", torch.zeros(1))
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        y = torch.relu(self.bn(self.conv(x)))
        y = y.mean(dim=(2, 3))
        return self.fc(y) * self.scale

    @torch.jit.export
    def describe(self) -> str:
        return "tiny"

    def helper(self) -> int:
        # Plain Python: never called from forward, so TorchScript never compiles it.
        return 1


class ReturnsSelf(nn.Module):
    """A module whose forward returns the module itself (torch refuses to freeze it)."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> ReturnsSelf:
        return self


@torch.jit.interface
class _Block(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pass


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class ContainerIndexNet(nn.Module):
    """Indexes a ModuleDict with a runtime key: TorchScript emits prim::ModuleContainerIndex,
    which torch.jit.freeze does not support."""

    def __init__(self) -> None:
        super().__init__()
        self.blocks = nn.ModuleDict({"twice": _Double(), "again": _Double()})

    def forward(self, x: torch.Tensor, key: str) -> torch.Tensor:
        block: _Block = self.blocks[key]
        return block.forward(x)
