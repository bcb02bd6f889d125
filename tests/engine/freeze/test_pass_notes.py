"""A pass that nearly fires: its note states torch's condition and names the nearest node.

Each module below almost matches one of torch's frozen-graph folds (a convolution
followed by an in-place add of a constant, by an add of a value computed at run time, a
convolution with two users, a dropout torch's pass does not know, ...). torch is the
oracle twice: its own pass, run on torch's freeze of the module, leaves the node kinds
as they were; and the note names the node kind the graph holds and the condition it
fails.
"""

from __future__ import annotations

import collections
import warnings

import pytest
import torch
from torch import nn

from freezeview.engine.freeze.passes import REGISTRY
from freezeview.engine.freeze.pipeline import Pipeline, Plan


class ConvAddInplaceConstant(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv(x)
        out += 1.5
        return out


class Residual(nn.Module):
    """A ResNet block's ``out += identity``: in-place, and not a constant."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(4, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        identity = torch.relu(x)
        out = self.conv(identity)
        out += identity
        return out


class ConvAddRunTime(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + x.mean()


class ConvTwoUsers(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = self.conv(x)
        return y - 0.5, torch.relu(y)


class ConvMulInplace(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        y.mul_(2.0)
        return y


class ConvReluBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.conv(x)))


class LinearReluBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(torch.relu(self.fc(x)))


class AlphaDrop(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.AlphaDropout(0.2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


class Conv1dOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv1d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


# pass id, module, the node kind the note names, words of the condition it fails
NEAR_MISSES = [
    ("fold_conv_add_or_sub", ConvAddInplaceConstant, "aten::add_", "in-place"),
    ("fold_conv_add_or_sub", Residual, "aten::add_", "is not a constant"),
    ("fold_conv_add_or_sub", ConvAddRunTime, "aten::add ", "computed at run time by aten::mean"),
    ("fold_conv_add_or_sub", ConvTwoUsers, "aten::sub ", "has 2 uses"),
    ("fold_conv_mul_or_div", ConvMulInplace, "aten::mul_", "in-place"),
    ("fold_conv_bn", ConvReluBn, "aten::batch_norm", "comes from aten::relu"),
    ("fold_linear_bn", LinearReluBn, "aten::batch_norm", "comes from aten::relu"),
    ("remove_dropout", AlphaDrop, "aten::alpha_dropout", "never removes"),
    ("convert_to_mkldnn", Conv1dOnly, "aten::conv1d", "not aten::conv1d"),
]


def _script(cls: type[nn.Module]) -> torch.jit.ScriptModule:
    return torch.jit.script(cls().eval())


def _kinds(graph: torch._C.Graph) -> collections.Counter[str]:
    return collections.Counter(node.kind() for node in graph.nodes())


def _torch_pass_changes_kinds(pid: str, cls: type[nn.Module]) -> bool:
    """torch's own pass on torch's freeze of the module: do the node kinds change?"""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch._C._freeze_module(_script(cls)._c, [])
    graph = frozen._get_method("forward").graph
    before = _kinds(graph)
    if pid == "remove_dropout":
        torch._C._jit_pass_remove_dropout(frozen)
    else:
        getattr(torch._C, REGISTRY[pid].binding)(graph)
    return _kinds(graph) != before


def _note(pid: str, cls: type[nn.Module]) -> str:
    info = REGISTRY[pid]
    plan = Plan(passes=(pid,), optimize_for_inference=info.group == "inference").validate()
    steps = Pipeline(_script(cls), plan).run_all()
    step = next(s for s in steps if s.name == pid)
    assert not step.changed and step.error is None
    return step.notes[0]


@pytest.mark.parametrize(
    ("pid", "cls", "kind", "words"),
    NEAR_MISSES,
    ids=[f"{pid}-{cls.__name__}" for pid, cls, _, _ in NEAR_MISSES],
)
def test_a_near_miss_names_its_node_and_torchs_condition(
    pid: str, cls: type[nn.Module], kind: str, words: str
) -> None:
    if pid == "convert_to_mkldnn" and not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without MKLDNN")
    assert not _torch_pass_changes_kinds(pid, cls)
    note = _note(pid, cls)
    assert note.startswith("did not fire: ") and "torch " in note  # torch's condition
    assert kind in note and words in note, note
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        graph = torch._C._freeze_module(_script(cls)._c, [])._get_method("forward").graph
    assert kind.strip() in _kinds(graph)  # the node it names is one the graph holds


def test_the_nearest_candidate_comes_first() -> None:
    """Of an in-place add of a constant (one condition failed) and an add of a run-time
    value on a convolution with two users (two failed), the first is named first."""

    class Both(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.a = nn.Conv2d(3, 4, 3)
            self.b = nn.Conv2d(3, 4, 3)

        def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
            y = self.b(x)
            z = y + x.mean()
            out = self.a(x)
            out += 1.0
            return z, y, out

    assert not _torch_pass_changes_kinds("fold_conv_add_or_sub", Both)
    note = _note("fold_conv_add_or_sub", Both)
    nearest = note.split("nearest: ", 1)[1]
    assert nearest.startswith("aten::add_"), note
    assert "next: aten::add " in note and "2 uses" in note


def test_candidates_that_fail_alike_are_told_once() -> None:
    """Two residual blocks fail torch's fold alike: one is named, with how many more."""

    class TwoBlocks(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.blocks = nn.Sequential(Residual(), Residual())

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.blocks(x)

    assert not _torch_pass_changes_kinds("fold_conv_add_or_sub", TwoBlocks)
    note = _note("fold_conv_add_or_sub", TwoBlocks)
    assert "none of the 2 candidates qualifies" in note
    assert "aten::add_ in blocks.0" in note and "(1 more alike)" in note
    assert "next: " not in note
