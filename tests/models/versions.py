"""A model and "next versions" of it, each with one freezing regression teams ship.

``Base`` freezes cleanly: conv -> batchnorm folds, every weight and buffer is inlined.
Each other class changes one thing, as a refactor would, and freezing stops doing what
it did: an in-place write, an assignment, a buffer that became a view of another and is
written, a broken conv -> batchnorm pattern, an interface whose implementation is swapped,
a renamed submodule (not a regression: a rename).
"""

# No `from __future__ import annotations`: TorchScript reads annotations at script time.

from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class Base(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4, 2)
        self.register_buffer("cache", torch.zeros(4))
        self.register_buffer("scale", torch.ones(4))
        self.calls = 0

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x)).mean((2, 3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x) * self.scale
        return self.fc(pooled + self.cache)


class InPlaceWrite(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x) * self.scale
        self.cache.add_(pooled.mean(0))
        return self.fc(pooled + self.cache)


class AssignsCounter(Base):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1
        pooled = self.features(x) * self.scale
        return self.fc(pooled + self.cache)


class ViewOfBuffer(Base):
    """``window`` became a view of ``cache`` (shared storage) and is written in place."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("window", self.cache[:2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.window.mul_(0.5)
        pooled = self.features(x) * self.scale
        return self.fc(pooled + self.cache)


class BrokenConvBn(Base):
    """A relu between conv and batchnorm: conv -> batchnorm no longer folds."""

    def features(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(F.relu(self.conv(x))).mean((2, 3))


@torch.jit.interface
class ScaleInterface(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pass


class Doubler(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


class SwapsInterface(Base):
    """``post`` became an interface whose implementation is swapped at run time."""

    post: ScaleInterface

    def __init__(self) -> None:
        super().__init__()
        self.post = Doubler()
        self.spare = Doubler()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x) * self.scale
        if bool(pooled.sum() > 0):
            self.post = self.spare
        return self.fc(self.post.forward(pooled + self.cache))


class Renamed(Base):
    """``fc`` is now called ``head``: a rename, not a regression."""

    def __init__(self) -> None:
        super().__init__()
        self.head = self.fc
        del self.fc

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pooled = self.features(x) * self.scale
        return self.head(pooled + self.cache)


VERSIONS: dict[str, type[nn.Module]] = {
    "base": Base,
    "in-place": InPlaceWrite,
    "set-attr": AssignsCounter,
    "view": ViewOfBuffer,
    "broken-conv-bn": BrokenConvBn,
    "interface": SwapsInterface,
    "renamed": Renamed,
}


def save_version(name: str, path: Path) -> Path:
    """Script the version ``name`` in eval mode with fixed weights and save it."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        module = VERSIONS[name]().eval()
    torch.jit.save(torch.jit.script(module), str(path))
    return path


def source_line(snippet: str) -> int:
    """The line of this file holding ``snippet`` (for checking reported locations)."""
    lines = Path(__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if snippet in line)
