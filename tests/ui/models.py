"""Small modules for the app's tests (defined in a real file: torch.jit.script needs
``inspect.getsource``)."""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn


class Block(nn.Module):
    """conv + bn + relu + dropout: freezing folds bn into conv and removes dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(torch.relu(self.bn(self.conv(x))))


class Small(nn.Module):
    """A block, a counter buffer written in forward, a scale and an unused attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.head = nn.Linear(8, 4)
        self.register_buffer("calls", torch.zeros(1))
        self.scale = 2.0
        self.unused = nn.Parameter(torch.ones(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        y = self.block(x).mean(dim=(2, 3)) * self.scale
        return self.head(y)


def save_small(path: Path) -> Path:
    """Script ``Small`` in eval mode and save it to ``path``."""
    module = torch.jit.script(Small().eval())
    torch.jit.save(module, str(path))
    return path
