"""Models that call custom operators, registered by the tests through ``torch.library``.

Detection models call ``torchvision::nms``, speech models their own kernels: operators
torch knows only once a library registered them. freezeview must explain and freeze such
models like any other; the operator ``fvcorpus::scale`` stands in for them.
"""

# No `from __future__ import annotations`: TorchScript reads annotations at script time.

import torch
from torch import nn

from ._case import Case, image_inputs, scripted, traced

_LIBRARY = torch.library.Library("fvcorpus", "DEF")
_LIBRARY.define("scale(Tensor x, Tensor w) -> Tensor")
_LIBRARY.define("clip_(Tensor(a!) x, float bound) -> Tensor(a!)")


def _scale(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


def _clip_(x: torch.Tensor, bound: float) -> torch.Tensor:
    return x.clamp_(-bound, bound)


_LIBRARY.impl("scale", _scale, "CPU")
_LIBRARY.impl("clip_", _clip_, "CPU")


class ScalesByParameter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((4,), 0.5))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.fvcorpus.scale(self.fc(x), self.w)


class ClipsBufferInPlace(nn.Module):
    """A custom in-place operator (schema ``Tensor(a!)``) writing a buffer: kept."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.ones(4))
        self.register_buffer("gain", torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        torch.ops.fvcorpus.clip_(self.state, 1.5)
        return torch.ops.fvcorpus.scale(x, self.gain) + self.state


class ConvThenCustom(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.w = nn.Parameter(torch.full((1, 4, 1, 1), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.fvcorpus.scale(self.bn(self.conv(x)), self.w)


CASES = [
    Case("custom_op_reads_parameter", scripted(ScalesByParameter), tags=frozenset({"custom-op"})),
    Case(
        "custom_op_reads_parameter_traced",
        traced(ScalesByParameter),
        traced=True,
        tags=frozenset({"custom-op", "traced"}),
    ),
    Case(
        "custom_op_in_place_buffer",
        scripted(ClipsBufferInPlace),
        tags=frozenset({"custom-op", "in-place"}),
    ),
    Case(
        "custom_op_after_conv_bn",
        scripted(ConvThenCustom),
        inputs=image_inputs,
        tags=frozenset({"custom-op", "pattern"}),
    ),
    Case(
        "custom_op_after_conv_bn_traced",
        traced(ConvThenCustom, image_inputs),
        inputs=image_inputs,
        traced=True,
        tags=frozenset({"custom-op", "traced", "pattern"}),
    ),
]
