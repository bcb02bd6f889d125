"""Small models the measure tests and the speed benchmarks share (no downloads)."""

from __future__ import annotations

import torch
from torch import nn


class SmallConvNet(nn.Module):
    """Scripted conv + batchnorm + relu + linear, batch 1: the model of issue 24."""

    def __init__(self, channels: int = 8, size: int = 16) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3, padding=1)
        self.bn = nn.BatchNorm2d(channels)
        self.fc = nn.Linear(channels * size * size, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(torch.relu(self.bn(self.conv(x))).flatten(1))


def small_conv_net(seed: int = 0) -> torch.jit.ScriptModule:
    """The scripted model, in eval mode, with reproducible weights."""
    torch.manual_seed(seed)
    return torch.jit.script(SmallConvNet().eval())


SMALL_INPUT_SHAPE = (1, 3, 16, 16)
