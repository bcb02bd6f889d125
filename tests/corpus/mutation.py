"""Attributes written in forward: prim::SetAttr, in-place ops, views, aliases, containers."""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (Optional[int], interface types) at script time and cannot resolve them as strings.

import torch
from torch import nn

from ._case import Case, scripted


class SetAttrTensor(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4))
        self.register_buffer("weight", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.state = self.state * 0.9 + x.mean(0)
        return x * self.weight + self.state


class SetAttrInt(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0
        self.limit = 10

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls += 1
        return x + min(self.calls, self.limit)


class SetAttrInIf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("last", torch.zeros(2, 4))
        self.seen = 0
        self.gain = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > 0):
            self.last = x
            self.seen = self.seen + 1
        return x * self.gain + self.last


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.n = 0
        self.register_buffer("total", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.n + self.total


class SetAttrOnSubmodule(nn.Module):
    """The parent writes a submodule's attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.counter = Counter()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counter.n = self.counter.n + 1
        return self.counter(x)


class SharedClassTypeOneMutated(nn.Module):
    """Two instances of one ClassType; only the first one's attributes are written."""

    def __init__(self) -> None:
        super().__init__()
        self.first = Counter()
        self.second = Counter()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.first.n = self.first.n + 1
        self.first.total.add_(1.0)
        return self.first(x) + self.second(x)


class InplaceAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))
        self.register_buffer("other", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.add_(1.0)
        return x + self.buf + self.other


class InplaceCopy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.copy_(x[0])
        return x - self.buf


class InplaceIndexAssign(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf[0] = 1.0
        return x + self.buf


class InplaceZero(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.buf.zero_()
        return x + self.buf


class ViewIndexMul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.ones(2, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        v = self.buf[0]
        v.mul_(2.0)
        return x + self.buf


class ViewReshapeAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(2, 4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        t = self.buf.view(-1)
        t.add_(1.0)
        return x + self.buf


class AliasAugmentedAssign(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("buf", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.buf
        y += 1.0
        return x + y


class InplaceInHelper(nn.Module):
    """The write happens in a helper method that freezing inlines into forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(1))

    def bump(self) -> None:
        self.steps.add_(1.0)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.bump()
        return x * self.steps


class InplaceInLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("acc", torch.zeros(4))
        self.rounds = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.rounds):
            self.acc.mul_(0.5)
        return x + self.acc


class TiedWeights(nn.Module):
    """Encoder and decoder share one Parameter; nothing writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.enc = nn.Linear(4, 4, bias=False)
        self.dec = nn.Linear(4, 4, bias=False)
        self.dec.weight = self.enc.weight

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dec(self.enc(x))


class TiedBuffersOneWritten(nn.Module):
    """Two buffer slots hold one tensor; forward writes it through the first slot."""

    def __init__(self) -> None:
        super().__init__()
        shared = torch.zeros(4)
        self.register_buffer("written", shared)
        self.register_buffer("alias", shared)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.written.add_(1.0)
        return x + self.alias


class ViewOfWrittenUnread(nn.Module):
    """``b`` is a view of ``a``'s storage; forward writes ``a`` and never reads ``b``."""

    def __init__(self) -> None:
        super().__init__()
        base = torch.zeros(2, 2)
        self.register_buffer("a", base)
        self.register_buffer("b", base.view(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a.add_(1.0)
        return x + self.a.sum()


class ViewOfWrittenRead(nn.Module):
    """``b`` views ``a``'s storage; forward writes ``a`` and reads ``b``."""

    def __init__(self) -> None:
        super().__init__()
        base = torch.zeros(2, 2)
        self.register_buffer("a", base)
        self.register_buffer("b", base.view(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a.add_(1.0)
        return x + self.b


class SharedClassTypeBothMutated(nn.Module):
    """One ClassType, two kept instances: each writes a different attribute."""

    def __init__(self) -> None:
        super().__init__()
        self.first = Counter()
        self.second = Counter()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.first.n = self.first.n + 1
        self.second.total.add_(1.0)
        return self.first(x) + self.second(x)


class ListAppend(nn.Module):
    # Class-level: TorchScript cannot infer an element type from an empty list.
    history: list[torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.history = []
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.history.append(x)
        return x * self.scale


class DictAssign(nn.Module):
    cache: dict[str, torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        self.cache = {}
        self.table = {"a": 1, "b": 2}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.cache["last"] = x
        return x + self.table["a"]


class ContainersReadOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.sizes = [1, 2, 3]
        self.factors = [0.5, 2.0]
        self.tensors = [torch.ones(4), torch.full((4,), 2.0)]
        self.names = {"gain": 3.0}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for t in self.tensors:
            x = x + t
        return x * self.factors[0] * self.names["gain"] + len(self.sizes)


CASES = [
    Case("setattr_tensor", scripted(SetAttrTensor), tags=frozenset({"mutation", "set-attr"})),
    Case("setattr_int", scripted(SetAttrInt), tags=frozenset({"mutation", "set-attr"})),
    Case("setattr_in_if", scripted(SetAttrInIf), tags=frozenset({"mutation", "set-attr"})),
    Case(
        "setattr_on_submodule",
        scripted(SetAttrOnSubmodule),
        tags=frozenset({"mutation", "set-attr", "nested"}),
    ),
    Case(
        "shared_classtype_one_mutated",
        scripted(SharedClassTypeOneMutated),
        tags=frozenset({"mutation", "shared"}),
    ),
    Case("inplace_add", scripted(InplaceAdd), tags=frozenset({"mutation", "in-place"})),
    Case("inplace_copy", scripted(InplaceCopy), tags=frozenset({"mutation", "in-place"})),
    Case(
        "inplace_index_assign",
        scripted(InplaceIndexAssign),
        tags=frozenset({"mutation", "in-place"}),
    ),
    Case("inplace_zero", scripted(InplaceZero), tags=frozenset({"mutation", "in-place"})),
    Case("view_index_mul", scripted(ViewIndexMul), tags=frozenset({"mutation", "alias"})),
    Case("view_reshape_add", scripted(ViewReshapeAdd), tags=frozenset({"mutation", "alias"})),
    Case(
        "alias_augmented_assign",
        scripted(AliasAugmentedAssign),
        tags=frozenset({"mutation", "alias"}),
    ),
    Case("inplace_in_helper", scripted(InplaceInHelper), tags=frozenset({"mutation", "in-place"})),
    Case("inplace_in_loop", scripted(InplaceInLoop), tags=frozenset({"mutation", "control-flow"})),
    Case("tied_weights", scripted(TiedWeights), tags=frozenset({"alias"})),
    Case(
        "tied_buffers_one_written",
        scripted(TiedBuffersOneWritten),
        tags=frozenset({"mutation", "alias"}),
    ),
    Case(
        "view_of_written_unread",
        scripted(ViewOfWrittenUnread),
        tags=frozenset({"mutation", "alias"}),
    ),
    Case(
        "view_of_written_read",
        scripted(ViewOfWrittenRead),
        tags=frozenset({"mutation", "alias"}),
    ),
    Case(
        "shared_classtype_both_mutated",
        scripted(SharedClassTypeBothMutated),
        tags=frozenset({"mutation", "shared"}),
    ),
    Case("list_append", scripted(ListAppend), tags=frozenset({"mutation", "container"})),
    Case("dict_assign", scripted(DictAssign), tags=frozenset({"mutation", "container"})),
    Case("containers_read_only", scripted(ContainersReadOnly), tags=frozenset({"container"})),
]
