"""Attributes torch folds although forward writes them: written constants.

torch's freezing asks alias analysis whether anything writes the value an attribute's
``prim::GetAttr`` produced; a write to a tensor *inside* a list, a dict or a tuple, and
any write inside a ``torch.jit.fork`` body, escape it. torch folds such attributes, and
the frozen graph then writes into its own constant (or, where nothing reads the
constant afterwards, freezing's clean-up drops the write). torch's own freezing tests
assert the list case. freezeview names each of them (``written-constant``).
"""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (interface types) at script time and cannot resolve them as strings.

import torch
from torch import nn

from ._case import Case, scripted


class ListElementWrite(nn.Module):
    """torch's own freezing test: a tensor held in a list, written through an index."""

    def __init__(self) -> None:
        super().__init__()
        self.a = [torch.tensor([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a[0][1] += 10
        return x + self.a[0].sum()


class DictValueWrite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stats = {"seen": torch.zeros(4)}
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.stats["seen"].add_(1.0)
        return x * self.scale + self.stats["seen"]


class TupleElementWrite(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.pair = (torch.ones(4), torch.full((4,), 3.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        first, second = self.pair
        first.mul_(2.0)
        return x + first + second


class ListWriteUnread(nn.Module):
    """A list element written in place whose constant nothing reads afterwards."""

    def __init__(self) -> None:
        super().__init__()
        self.history = [torch.zeros(4)]
        self.weight = nn.Parameter(torch.full((4,), 0.5))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.history[0].copy_(x[0])
        return x * self.weight


class CountedBranch(nn.Module):
    """A branch that counts its calls and normalises: what the fork runs."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(1, dtype=torch.long))
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.bn(self.fc(x))


class ForkedCounters(nn.Module):
    """Two forked branches that count their calls: torch folds the counters and the
    frozen graph drops their writes (nothing reads them afterwards)."""

    def __init__(self) -> None:
        super().__init__()
        self.a = CountedBranch()
        self.b = CountedBranch()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        left = torch.jit.fork(self.a, x)
        right = torch.jit.fork(self.b, x)
        return torch.jit.wait(left) + torch.jit.wait(right)


class CountingReader(nn.Module):
    """A branch whose output depends on its own counter."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("calls", torch.zeros(4))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1.0)
        return self.fc(x) + self.calls


class ForkedReadCounter(nn.Module):
    """A fork whose body writes and reads its counter: the frozen graph mutates it."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = CountingReader()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.branch, x)
        return torch.jit.wait(future) * 2.0


@torch.jit.interface
class StepInterface(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        pass


class ListStep(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.totals = [torch.zeros(4)]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.totals[0].add_(x.sum(0))
        return x + self.totals[0]


class InterfaceListWrite(nn.Module):
    """A module reached through an interface writes a tensor held in its list."""

    step: StepInterface

    def __init__(self) -> None:
        super().__init__()
        self.step = ListStep()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.step.forward(x)


CASES = [
    Case("written_list_element", scripted(ListElementWrite), tags=frozenset({"written"})),
    Case("written_dict_value", scripted(DictValueWrite), tags=frozenset({"written"})),
    Case("written_tuple_element", scripted(TupleElementWrite), tags=frozenset({"written"})),
    Case("written_list_unread", scripted(ListWriteUnread), tags=frozenset({"written"})),
    Case("written_fork_counters", scripted(ForkedCounters), tags=frozenset({"fork"})),
    Case("written_fork_read", scripted(ForkedReadCounter), tags=frozenset({"fork", "written"})),
    Case("written_interface_list", scripted(InterfaceListWrite), tags=frozenset({"written"})),
]
