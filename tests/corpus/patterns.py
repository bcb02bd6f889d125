"""What the frozen-graph passes rewrite: conv/linear + bn, dropout, constant arithmetic."""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (Optional[int], interface types) at script time and cannot resolve them as strings.

import torch
import torch.nn.functional as F
from torch import nn

from ._case import Case, image_inputs, scripted, seeded, traced


def _lstm_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(5, 2, 4),)


class ConvBnRelu(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.relu = nn.ReLU()
        with torch.no_grad():
            # Non-trivial statistics, so a wrong fold changes the numbers.
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.relu(self.bn(self.conv(x)))


class LinearBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class DropoutModule(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


class DropoutFunctional(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.p = 0.25
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.dropout(self.fc(x), p=self.p, training=self.training)


class ConvAddSub(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 1)
        self.conv2 = nn.Conv2d(3, 4, 1)
        self.register_buffer("shift", torch.randn(1, 4, 1, 1))
        self.register_buffer("center", torch.randn(1, 4, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (self.conv1(x) + self.shift) * (self.conv2(x) - self.center)


class ConvMulDiv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, 4, 1)
        self.conv2 = nn.Conv2d(3, 4, 1)
        self.register_buffer("gain", torch.rand(1, 4, 1, 1) + 0.5)
        self.register_buffer("norm", torch.rand(1, 4, 1, 1) + 0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv1(x) * self.gain + self.conv2(x) / self.norm


class BasicBlock(nn.Module):
    """A resnet basic block with a projection shortcut."""

    def __init__(self, cin: int = 3, cout: int = 8) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU(inplace=True)
        self.conv2 = nn.Conv2d(cout, cout, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.downsample = nn.Sequential(nn.Conv2d(cin, cout, 1, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = self.downsample(x)
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        return self.relu(out + identity)


class TinyResNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(3, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU())
        self.layer1 = nn.Sequential(BasicBlock(3, 8), BasicBlock(8, 8))
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(8, 5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer1(self.stem(x))
        return self.fc(torch.flatten(self.pool(x), 1))


class ConcatLinear(nn.Module):
    """Two linears on the same input: freezing's concat-linear pass merges them."""

    def __init__(self) -> None:
        super().__init__()
        self.left = nn.Linear(4, 3)
        self.right = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.left(x), self.right(x)


class Forked(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.branch = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.branch, x)
        y = x * self.scale
        return torch.jit.wait(future) + y


class ForkBranch(nn.Module):
    """A branch with a submodule of its own: the fork still reads it after folding."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.scale = nn.Parameter(torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.scale


class ForkOther(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.eye(4))
        self.register_buffer("shift", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x @ self.weight + self.shift


class ForkedSharedType(nn.Module):
    """Two submodules of one type, each run through torch.jit.fork."""

    def __init__(self) -> None:
        super().__init__()
        self.a = ForkBranch()
        self.b = ForkBranch()
        self.scale = nn.Parameter(torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = torch.jit.fork(self.a, x)
        right = torch.jit.fork(self.b, x)
        # Read after the forks: a name the branches also have (`scale`) is the root's.
        return torch.jit.wait(left) + torch.jit.wait(right) * self.scale


class ForkedDistinctTypes(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = ForkBranch()
        self.b = ForkOther()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = torch.jit.fork(self.a, x)
        right = torch.jit.fork(self.b, x)
        return torch.jit.wait(left) - torch.jit.wait(right)


def _scaled(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return x * w


class ForkedFunction(nn.Module):
    """A fork of a plain function next to a fork of a submodule: only one is a body."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((4,), 1.5))
        self.a = ForkBranch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        scaled = torch.jit.fork(_scaled, x, self.w)
        branch = torch.jit.fork(self.a, x)
        return torch.jit.wait(scaled) + torch.jit.wait(branch)


class ForkedNested(nn.Module):
    """A fork inside a forked branch's holder: bodies within bodies."""

    def __init__(self) -> None:
        super().__init__()
        self.outer = ForkedDistinctTypes()
        self.c = ForkBranch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        inner = torch.jit.fork(self.outer, x)
        other = torch.jit.fork(self.c, x)
        return torch.jit.wait(inner) + torch.jit.wait(other)


def _lstm() -> torch.jit.ScriptModule:
    # Scripted directly: the LSTM module is the root, with forward__0/forward__1 only.
    return torch.jit.script(seeded(lambda: nn.LSTM(4, 8, num_layers=2)).eval())


CASES = [
    Case("conv_bn_relu", scripted(ConvBnRelu), inputs=image_inputs, tags=frozenset({"pattern"})),
    Case("linear_bn", scripted(LinearBn), tags=frozenset({"pattern"})),
    Case("dropout_module", scripted(DropoutModule), tags=frozenset({"pattern"})),
    Case("dropout_functional", scripted(DropoutFunctional), tags=frozenset({"pattern"})),
    Case("conv_add_sub", scripted(ConvAddSub), inputs=image_inputs, tags=frozenset({"pattern"})),
    Case("conv_mul_div", scripted(ConvMulDiv), inputs=image_inputs, tags=frozenset({"pattern"})),
    Case("tiny_resnet", scripted(TinyResNet), inputs=image_inputs, tags=frozenset({"pattern"})),
    Case("concat_linear", scripted(ConcatLinear), tags=frozenset({"pattern"})),
    Case("fork", scripted(Forked), tags=frozenset({"fork"})),
    Case("fork_shared_type", scripted(ForkedSharedType), tags=frozenset({"fork"})),
    Case("fork_distinct_types", scripted(ForkedDistinctTypes), tags=frozenset({"fork"})),
    Case("fork_nested", scripted(ForkedNested), tags=frozenset({"fork"})),
    Case("fork_function", scripted(ForkedFunction), tags=frozenset({"fork"})),
    Case(
        "fork_shared_type_traced",
        traced(ForkedSharedType),
        traced=True,
        tags=frozenset({"fork"}),
    ),
    Case(
        "scripted_lstm",
        _lstm,
        inputs=_lstm_inputs,
        method="forward__0",
        tags=frozenset({"no-forward", "rnn"}),
    ),
    Case(
        "scripted_lstm_preserve_overload",
        _lstm,
        preserved_attrs=("forward__0",),
        inputs=_lstm_inputs,
        method="forward__0",
        tags=frozenset({"no-forward", "rnn", "preserve", "method"}),
    ),
    Case(
        "traced_conv_bn_relu",
        traced(ConvBnRelu, image_inputs),
        inputs=image_inputs,
        traced=True,
        tags=frozenset({"traced", "pattern"}),
    ),
    Case(
        "traced_tiny_resnet",
        traced(TinyResNet, image_inputs),
        inputs=image_inputs,
        traced=True,
        tags=frozenset({"traced", "pattern"}),
    ),
]
