"""preserved_attrs (attributes, submodules, dotted names, methods) and module interfaces."""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (Optional[int], interface types) at script time and cannot resolve them as strings.

import torch
from torch import nn

from ._case import Case, scripted
from .basic import Leaf


class Preservable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.randn(4))
        self.k = 3
        self.sub = Leaf()
        self.other_param = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.sub(x) * self.k + self.buf + self.other_param


class DeepPreservable(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.outer = nn.Sequential(Leaf(), Leaf())
        self.tail = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.tail(self.outer(x))


class ExportedMethod(nn.Module):
    """``reset`` writes ``calls`` and ``state`` and is the only reader of ``helper``."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.register_buffer("state", torch.zeros(4))
        self.weight = nn.Parameter(torch.randn(4))
        self.helper = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.state

    @torch.jit.export
    def reset(self, x: torch.Tensor) -> torch.Tensor:
        self.calls = self.calls + 1
        self.state.zero_()
        return self.helper(x)


@torch.jit.interface
class TransformInterface(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pass


class Scale(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.factor = nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


class WithInterface(nn.Module):
    # The interface annotation keeps `transform` swappable at run time.
    transform: TransformInterface

    def __init__(self) -> None:
        super().__init__()
        self.transform = Scale()
        self.bias = nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.transform.forward(x) + self.bias


CASES = [
    Case(
        "preserve_tensor_attribute",
        scripted(Preservable),
        preserved_attrs=("buf",),
        tags=frozenset({"preserve"}),
    ),
    Case(
        "preserve_int_attribute",
        scripted(Preservable),
        preserved_attrs=("k",),
        tags=frozenset({"preserve"}),
    ),
    Case(
        "preserve_submodule",
        scripted(Preservable),
        preserved_attrs=("sub",),
        tags=frozenset({"preserve"}),
    ),
    Case(
        "preserve_dotted_attribute",
        scripted(Preservable),
        preserved_attrs=("sub.weight",),
        tags=frozenset({"preserve", "nested"}),
    ),
    Case(
        "preserve_deep_dotted",
        scripted(DeepPreservable),
        preserved_attrs=("outer.1.k", "outer.0"),
        tags=frozenset({"preserve", "nested"}),
    ),
    Case(
        "preserve_exported_method",
        scripted(ExportedMethod),
        preserved_attrs=("reset",),
        tags=frozenset({"preserve", "mutation", "method"}),
    ),
    Case(
        "exported_method_not_preserved",
        scripted(ExportedMethod),
        tags=frozenset({"mutation", "method"}),
    ),
    Case("module_interface", scripted(WithInterface), tags=frozenset({"interface"})),
]
