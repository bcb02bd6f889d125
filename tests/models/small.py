"""Small modules with one freezing story each, defined in a real file so that
``torch.jit.script`` can read their source.

No ``from __future__ import annotations`` here: TorchScript reads class annotations
(``history: list[int]``) as real types.
"""

import importlib.util
from pathlib import Path
from types import ModuleType

import torch
from torch import nn

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "build_example.py"


def example_module() -> ModuleType:
    """Import ``examples/build_example.py`` as a module."""
    spec = importlib.util.spec_from_file_location("freezeview_example", EXAMPLE)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


class Counter(nn.Module):
    """A buffer counted up in forward, an int assigned, a view written in place."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("table", torch.zeros(3, 2))
        self.calls = 0
        self.weight = nn.Parameter(torch.ones(2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        row = self.table[1]
        row.mul_(2.0)
        self.calls = self.calls + 1
        return x * self.weight


class Tied(nn.Module):
    """``alias`` shares storage with ``state``, which forward writes."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4))
        self.register_buffer("alias", self.state.view(2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state.add_(x.sum())
        return x + self.alias.sum()


class Branchy(nn.Module):
    """Control flow and a list attribute."""

    history: list[int]

    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.mode = 1
        self.history = []

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.mode == 1:  # noqa: SIM108 - the test wants a prim::If
            x = self.lin(x)
        else:
            x = x * 2
        self.history.append(int(x.numel()))
        for _ in range(2):
            x = torch.relu(x)
        return x


def scripted(cls: type[nn.Module]) -> torch.jit.ScriptModule:
    """Script a fresh instance in eval mode."""
    torch.manual_seed(0)
    return torch.jit.script(cls().eval())
