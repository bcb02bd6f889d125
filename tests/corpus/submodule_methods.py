"""Preserved methods of submodules: ``preserved_attrs=["tool.square"]``.

torch keeps the submodule with that method. Its graph is frozen against the top-level
module, so torch accepts only a method that reads none of its module's attributes; one
that does is refused (``... does not have a field with name 'k'``), and freezeview must
refuse it the same way, in one sentence.
"""

# No `from __future__ import annotations`: TorchScript reads annotations at script time.

import torch
from torch import nn

from ._case import Case, scripted, traced


class Tool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.k

    @torch.jit.export
    def square(self, x: torch.Tensor) -> torch.Tensor:
        return x * x

    @torch.jit.export
    def scaled(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.k


class HoldsTool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tool = Tool()
        self.w = nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tool(x) * self.w


class DeepTool(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stage = nn.Sequential(Tool(), Tool())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.stage(x)


class Traceable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.tool = torch.jit.script(Tool())
        self.w = nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tool(x) * self.w


CASES = [
    Case(
        "preserve_submodule_method",
        scripted(HoldsTool),
        preserved_attrs=("tool.square",),
        tags=frozenset({"preserve", "preserve-method"}),
    ),
    Case(
        "preserve_nested_submodule_method",
        scripted(DeepTool),
        preserved_attrs=("stage.1.square",),
        tags=frozenset({"preserve", "preserve-method"}),
    ),
    Case(
        "preserve_submodule_method_and_attribute",
        scripted(HoldsTool),
        preserved_attrs=("tool.square", "w"),
        tags=frozenset({"preserve", "preserve-method"}),
    ),
    Case(
        "preserve_submodule_method_traced",
        traced(Traceable),
        preserved_attrs=("tool.square",),
        traced=True,
        tags=frozenset({"preserve", "preserve-method", "traced"}),
    ),
    Case(
        "preserve_submodule_method_reading_attributes",
        scripted(HoldsTool),
        preserved_attrs=("tool.scaled",),
        expect_error="does not have a field with name 'k'",
        tags=frozenset({"preserve", "preserve-method", "refused"}),
    ),
]
