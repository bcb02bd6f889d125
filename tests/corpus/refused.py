"""Modules torch refuses to freeze; freezeview must say why in one sentence."""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (Optional[int], interface types) at script time and cannot resolve them as strings.

import torch
from torch import nn

from ._case import Case, scripted
from .preserve import Scale, TransformInterface


class ContainerIndex(nn.Module):
    """Indexing a ModuleList with a run-time value yields prim::ModuleContainerIndex."""

    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([Scale(), Scale()])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        idx = int(x.numel() % 2)
        layer: TransformInterface = self.layers[idx]
        return layer.forward(x)


class ReturnsSelf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.k = 1

    def forward(self, x: torch.Tensor) -> "ReturnsSelf":
        return self


class InterfaceSetAttr(nn.Module):
    transform: TransformInterface

    def __init__(self) -> None:
        super().__init__()
        self.transform = Scale()
        self.spare = Scale()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            self.transform = self.spare
        return self.transform.forward(x)


class ListHoldsBuffer(nn.Module):
    """A list attribute holds the very tensor of a buffer, and forward reads both."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(4))
        self.items = [self.buf]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.buf + self.items[0]


class WithInterface(nn.Module):
    transform: TransformInterface

    def __init__(self) -> None:
        super().__init__()
        self.transform = Scale()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.transform.forward(x)


CASES = [
    Case(
        "refused_preserved_interface",
        scripted(WithInterface),
        preserved_attrs=("transform",),
        expect_error=r"failed to freeze interface attribute 'transform'",
        tags=frozenset({"refused", "interface", "preserve"}),
    ),
    Case(
        "refused_module_container_index",
        scripted(ContainerIndex),
        expect_error=r"prim::ModuleContainerIndex is not supported",
        tags=frozenset({"refused", "interface"}),
    ),
    Case(
        "refused_returns_self",
        scripted(ReturnsSelf),
        expect_error=r"attempted to freeze a module that returns? itself",
        tags=frozenset({"refused"}),
    ),
    Case(
        "refused_interface_setattr",
        scripted(InterfaceSetAttr),
        expect_error=r"SetAttr on an interface type",
        tags=frozenset({"refused", "interface"}),
    ),
    Case(
        "refused_overlapping_attributes",
        scripted(ListHoldsBuffer),
        expect_error=r"attributes values that overlaps",
        tags=frozenset({"refused", "alias"}),
    ),
]
