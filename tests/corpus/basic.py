"""Attribute kinds, module structure, control flow and unused attributes."""

# No `from __future__ import annotations`: TorchScript reads class-level annotations
# (Optional[int], interface types) at script time and cannot resolve them as strings.

from typing import Final

import torch
from torch import nn

from ._case import Case, scripted, traced


class Leaf(nn.Module):
    """A parameter, a buffer and a plain int: the three kinds freezing folds."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(4))
        self.register_buffer("offset", torch.randn(4))
        self.k = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.weight + self.offset * self.k


class ParamsBuffers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.full((4,), 0.5))
        self.bias = nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lin(x) * self.scale + self.bias


class PlainAttributes(nn.Module):
    # Class-level annotation: TorchScript cannot infer the type of a None attribute.
    maybe: int | None

    def __init__(self) -> None:
        super().__init__()
        self.i = 3
        self.f = 1.5
        self.flag = True
        self.mode = "scale"
        self.pair = (2, 0.25)
        self.maybe = None
        self.dev = torch.device("cpu")

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.flag:
            x = x * self.f + self.i
        if self.mode == "scale":
            x = x * self.pair[1] + self.pair[0]
        # TorchScript refines Optional only on locals, not on attributes.
        maybe = self.maybe
        if maybe is not None:
            x = x + maybe
        return x.to(self.dev)


class Middle(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.leaf = Leaf()
        self.gain = nn.Parameter(torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.leaf(x) * self.gain


class Nested(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.mid = Middle()
        self.head = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.mid(x))


class SharedPython(nn.Module):
    """One nn.Module assigned twice: scripting turns it into two modules sharing tensors."""

    def __init__(self) -> None:
        super().__init__()
        shared = Leaf()
        self.a = shared
        self.b = shared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) + self.b(x)


class SharedScripted(nn.Module):
    """One already-scripted module assigned twice: a single C++ module on two paths."""

    def __init__(self) -> None:
        super().__init__()
        shared = torch.jit.script(Leaf())
        self.a = shared
        self.b = shared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x) - self.b(x)


class SharedScriptedOnePath(nn.Module):
    """A truly shared module read through one of its two paths only."""

    def __init__(self) -> None:
        super().__init__()
        shared = torch.jit.script(Leaf())
        self.a = shared
        self.b = shared

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


class SameClassTwice(nn.Module):
    """Two instances of one class share one TorchScript ClassType."""

    def __init__(self) -> None:
        super().__init__()
        self.first = Leaf()
        self.second = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.first(x) + self.second(x)


class Unused(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.used = nn.Parameter(torch.randn(4))
        self.unused_param = nn.Parameter(torch.randn(4))
        self.register_buffer("unused_buffer", torch.zeros(4))
        self.unused_int = 7
        self.unused_sub = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.used


class ControlFlow(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.repeats = 3
        self.threshold = 0.0
        self.step = nn.Parameter(torch.full((4,), 0.1))
        self.register_buffer("low", torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for _ in range(self.repeats):
            x = x + self.step
        if bool(x.sum() > self.threshold):
            x = x - self.low
        i = 0
        while i < self.repeats:
            x = x * 0.5
            i += 1
        return x


class TrainingBranch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.train_only = nn.Parameter(torch.randn(4))
        self.eval_only = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            return x * self.train_only
        return x + self.eval_only


class ReturnsAttribute(nn.Module):
    """forward returns a submodule's tensor and a plain tuple attribute as they are."""

    def __init__(self) -> None:
        super().__init__()
        self.leaf = Leaf()
        self.shape = (4, 1)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, tuple[int, int], torch.Tensor]:
        return self.leaf.weight, self.shape, x + self.leaf.offset


class ModuleListLoop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.acts = nn.Sequential(nn.ReLU(), nn.Tanh())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for layer in self.layers:
            x = layer(x)
        return self.acts(x)


class ModuleDictItems(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.branches = nn.ModuleDict({"p": nn.Linear(4, 4), "q": nn.Linear(4, 4)})

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x
        for _name, branch in self.branches.items():
            out = out + branch(x)
        return out


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.act = nn.ReLU()
        self.fc2 = nn.Linear(8, 4)
        self.register_buffer("mean", torch.randn(4))
        self.unused = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.act(self.fc1(x - self.mean)))


@torch.jit.script
class Calibration:
    """A TorchScript class (not a module) held as an attribute."""

    def __init__(self, gain: float, table: torch.Tensor) -> None:
        self.gain = gain
        self.table = table


class WithScriptClass(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calib = Calibration(2.0, torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.calib.gain + self.calib.table


class WithFinal(nn.Module):
    """A ``Final`` constant is baked in at script time: it is never an attribute."""

    size: Final[int]

    def __init__(self) -> None:
        super().__init__()
        self.size = 4
        self.register_buffer("mask", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.reshape(-1, self.size) * self.mask


class DynamicQuantLinear(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


def _dynamic_quant() -> nn.Module:
    return torch.ao.quantization.quantize_dynamic(DynamicQuantLinear(), {nn.Linear}, torch.qint8)


class SparseBuffer(nn.Module):
    """A sparse tensor has no storage, so torch cannot make it a graph constant."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("adjacency", torch.eye(4).to_sparse())
        self.register_buffer("dense", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sparse.mm(self.adjacency, x.t()).t() + self.dense


class HelperReads(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.alpha = 0.5
        self.register_buffer("table", torch.arange(4.0))

    def lookup(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.table

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.lookup(x) * self.alpha


class TracedInplace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(4))
        self.register_buffer("scale", torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(x.sum(0))
        return x * self.scale


CASES = [
    Case("params_buffers", scripted(ParamsBuffers), tags=frozenset({"basic"})),
    Case("plain_attributes", scripted(PlainAttributes), tags=frozenset({"basic"})),
    Case("nested_submodules", scripted(Nested), tags=frozenset({"basic", "nested"})),
    Case("shared_submodule_python", scripted(SharedPython), tags=frozenset({"shared"})),
    Case("shared_submodule_scripted", scripted(SharedScripted), tags=frozenset({"shared"})),
    Case("shared_submodule_one_path", scripted(SharedScriptedOnePath), tags=frozenset({"shared"})),
    Case("same_class_twice", scripted(SameClassTwice), tags=frozenset({"shared"})),
    Case("unused_attributes", scripted(Unused), tags=frozenset({"unused"})),
    Case("control_flow", scripted(ControlFlow), tags=frozenset({"control-flow"})),
    Case("training_branch", scripted(TrainingBranch), tags=frozenset({"control-flow"})),
    Case("returns_attribute_value", scripted(ReturnsAttribute), tags=frozenset({"basic"})),
    Case("module_list_loop", scripted(ModuleListLoop), tags=frozenset({"nested"})),
    Case("module_dict_items", scripted(ModuleDictItems), tags=frozenset({"nested"})),
    Case("traced_mlp", traced(Mlp), traced=True, tags=frozenset({"traced", "unused"})),
    Case("traced_nested", traced(Nested), traced=True, tags=frozenset({"traced", "nested"})),
    Case(
        "traced_shared_submodule",
        traced(SharedPython),
        traced=True,
        tags=frozenset({"traced", "shared"}),
    ),
    Case("script_class_attribute", scripted(WithScriptClass), tags=frozenset({"basic"})),
    Case("final_constant", scripted(WithFinal), tags=frozenset({"basic", "unused"})),
    Case("dynamic_quantized_linear", scripted(_dynamic_quant), tags=frozenset({"quantized"})),
    Case("sparse_buffer", scripted(SparseBuffer), tags=frozenset({"not-materializable"})),
    Case("helper_method_reads", scripted(HelperReads), tags=frozenset({"basic"})),
    Case(
        "traced_inplace_buffer",
        traced(TracedInplace),
        traced=True,
        tags=frozenset({"traced", "mutation", "in-place"}),
    ),
]
