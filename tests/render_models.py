"""Small modules for the rendering, diff and export tests.

Real-size shapes (ResNet-50, a 12-layer transformer encoder...) come from
``benchmarks/models.py``, shared with the benchmarks; only modules built for one test's
point live here.
"""

from __future__ import annotations

import sys
from functools import lru_cache
from pathlib import Path

import torch
from torch import nn

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from benchmarks.models import resnet50, transformer_encoder  # noqa: E402

__all__ = [
    "ConvBnRelu",
    "KeepsBuffer",
    "Stacked",
    "TwoLists",
    "resnet50_scripted",
    "scripted",
    "transformer_encoder",
]


class ConvBnRelu(nn.Module):
    """conv -> batchnorm -> relu -> dropout: freezing folds the BN into the conv."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.bn(self.conv(x))))


class KeepsBuffer(nn.Module):
    """A buffer written in forward stays an attribute after freezing."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        y = self.lin(x)
        if bool(x.sum() > 0):
            y = y * 2
        return y + self.count


def scripted(module: nn.Module) -> torch.jit.ScriptModule:
    """Eval mode, then ``torch.jit.script`` (a ScriptModule is returned as it is)."""
    if isinstance(module, torch.jit.ScriptModule):
        return module
    return torch.jit.script(module.eval())


class Block(nn.Module):
    """A layer with a submodule and ops of its own (``layers.N.lin`` and ``layers.N``)."""

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.lin(x))) + x


class Stacked(nn.Module):
    """Blocks in an ``nn.ModuleList`` iterated in forward: torch names their scopes
    ``0``, ``1``...; freezeview draws them as ``layers.0``. ``head`` is a plain child."""

    def __init__(self, n: int = 3) -> None:
        super().__init__()
        self.layers = nn.ModuleList(Block() for _ in range(n))
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.head(x)


class TwoLists(nn.Module):
    """Two ModuleLists iterated in one forward: item ``0`` of each has the same scope."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.ModuleList([Block()])
        self.dec = nn.ModuleList([Block()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.enc:
            x = layer(x)
        for layer in self.dec:
            x = layer(x)
        return x


@lru_cache(maxsize=1)
def resnet50_scripted() -> torch.jit.ScriptModule:
    """The benchmarks' scripted ResNet-50 (built once per test run; never modified)."""
    return resnet50(num_classes=10)
