"""Every registry pass fires where torch's own binding fires, and says why when it does not.

For each pass there is a module on which it fires and one on which it does not; both
are checked against the torch binding run directly on a torch-frozen copy in the same
test run. Two passes only ever rewrite CUDA graphs; their "fires" cases are skipped on
CPU-only machines (and the "does not fire" cases say so).
"""

from __future__ import annotations

import re

import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.engine.freeze.passes import (
    REGISTRY,
    VERIFIED_RELEASES,
    VERIFIED_TORCH,
    default_passes,
    needs_guard,
    torch_version,
)
from freezeview.engine.freeze.pipeline import Pipeline, Plan

_MANGLE = re.compile(r"___torch_mangle_\d+\.")


class DropoutNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.drop = nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))


class LinearOnly(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class TwoLinears(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = nn.Linear(4, 3)
        self.b = nn.Linear(4, 5)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.a(x), self.b(x)


class ReluOnly(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.relu()


class ConvBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.conv(x))


class ConvBnTwoUses(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x)
        return self.bn(y) + y


class ConvAdd(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.register_buffer("shift", torch.randn(1, 4, 1, 1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) - self.shift


class ConvAddSpatial(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)
        self.register_buffer("shift", torch.randn(1, 4, 8, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) + self.shift


class ConvMul(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) / 2.0


class ConvMulInput(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x) * x.mean()


class LinearBn(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class LinearBnNoStats(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 6)
        self.bn = nn.BatchNorm1d(6, track_running_stats=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


def _script(cls: type[nn.Module]) -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    return torch.jit.script(cls().eval())


def _torch_fires(pid: str, cls: type[nn.Module]) -> bool:
    """Does torch's binding change the forward graph of a torch-frozen copy?"""
    frozen = torch._C._freeze_module(_script(cls)._c, [])
    graph = frozen._get_method("forward").graph
    before = str(graph)
    if pid == "remove_dropout":
        torch._C._jit_pass_remove_dropout(frozen)
    else:
        getattr(torch._C, REGISTRY[pid].binding)(graph)
    return str(graph) != before


def _our_step(pid: str, cls: type[nn.Module]):  # type: ignore[no-untyped-def]
    info = REGISTRY[pid]
    plan = Plan(
        passes=(pid,),
        optimize_for_inference=info.group == "inference",
    ).validate()
    pipe = Pipeline(_script(cls), plan)
    steps = pipe.run_all()
    assert steps[-1].name == pid and steps[-1].error is None
    # Loop passes run until a round changes nothing: judge the first round.
    return steps[3]


_CPU_ONLY = not torch.cuda.is_available()

# pass id -> (module on which it fires, module on which it does not, words of the reason)
CASES: dict[str, tuple[type[nn.Module] | None, type[nn.Module], str]] = {
    "remove_dropout": (DropoutNet, LinearOnly, "no aten::dropout"),
    "concat_frozen_linear": (None, TwoLinears, "CUDA"),
    "fold_conv_bn": (ConvBn, ConvBnTwoUses, "2 uses"),
    "fold_conv_add_or_sub": (ConvAdd, ConvAddSpatial, "shape [1, 4, 8, 8]"),
    "fold_conv_mul_or_div": (ConvMul, ConvMulInput, "is not a constant"),
    "fold_linear_bn": (LinearBn, LinearBnNoStats, "no running statistics"),
    "fuse_conv_add_relu": (None, ConvBn, "CUDA" if _CPU_ONLY else ""),
    "convert_to_mkldnn": (ConvBn, ReluOnly, "no convolution or aten::linear"),
    "transpose_frozen_linear": (LinearOnly, ReluOnly, "no aten::linear"),
}


def test_every_registry_pass_has_cases() -> None:
    """No pass without a fire / no-fire pair."""
    assert set(CASES) == set(REGISTRY)


@pytest.mark.parametrize("pid", list(CASES))
def test_pass_fires_like_torch(pid: str) -> None:
    """On its 'fires' module, the step changes the graph exactly when torch's binding does."""
    fires_cls = CASES[pid][0]
    if fires_cls is None:
        pytest.skip(f"{pid} only rewrites CUDA graphs; this machine has no CUDA")
    if pid == "convert_to_mkldnn" and not torch.backends.mkldnn.is_available():
        pytest.skip("torch built without MKLDNN")
    assert _torch_fires(pid, fires_cls)
    step = _our_step(pid, fires_cls)
    assert step.changed
    assert step.nodes_added + step.nodes_removed + step.nodes_changed > 0


@pytest.mark.parametrize("pid", list(CASES))
def test_pass_does_not_fire_and_says_why(pid: str) -> None:
    """On its 'does not fire' module, torch changes nothing and the step says why."""
    _, quiet_cls, words = CASES[pid]
    assert not _torch_fires(pid, quiet_cls)
    step = _our_step(pid, quiet_cls)
    assert not step.changed
    assert step.notes[0].startswith("did not fire: ")
    assert words in step.notes[0], step.notes[0]


def test_registry_metadata() -> None:
    """Every pass names an existing binding, a group and a one-line description."""
    for info in REGISTRY.values():
        assert info.available, info.binding
        assert info.group in ("once", "loop", "inference")
        assert info.description and "\n" not in info.description
        assert info.fires_when
    assert not REGISTRY["fold_conv_bn"].exact and REGISTRY["remove_dropout"].exact


def test_default_order_is_torch_order() -> None:
    """Default: torch's OptimizeFrozenGraph order, then optimize_for_inference's."""
    assert default_passes() == (
        "remove_dropout",
        "concat_frozen_linear",
        "fold_conv_bn",
        "fold_conv_add_or_sub",
        "fold_conv_mul_or_div",
        "fold_linear_bn",
    )
    assert default_passes(False) == ("remove_dropout", "concat_frozen_linear")
    assert default_passes(True, True)[-3:] == (
        "fuse_conv_add_relu",
        "convert_to_mkldnn",
        "transpose_frozen_linear",
    )


def test_guard_step_on_unverified_torch(monkeypatch: pytest.MonkeyPatch) -> None:
    """On a torch release whose order is not verified, a guard step runs torch's own call."""
    assert needs_guard("9.1.0") and needs_guard("2.3.1") and not needs_guard("2.13.0+cpu")
    assert torch_version("2.13.0+cpu") == (2, 13) and torch_version("2.10.0+cu128") == (2, 10)
    import freezeview.engine.freeze.pipeline_run as pipeline_mod

    monkeypatch.setattr(pipeline_mod, "needs_guard", lambda: True)
    pipe = Pipeline(_script(ConvBn), Plan.default())
    steps = pipe.run_all()
    guard = [s for s in steps if s.name == "optimize_frozen_graph"]
    assert len(guard) == 1 and not guard[0].changed
    assert pipe.warnings == []


def _pass_order_reader():  # type: ignore[no-untyped-def]
    """scripts/torch_pass_order.py, imported as a module."""
    import importlib.util
    import sys

    path = ROOT / "scripts" / "torch_pass_order.py"
    spec = importlib.util.spec_from_file_location("torch_pass_order", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_installed_torch_runs_the_verified_order() -> None:
    """The table of verified releases holds on the torch the suite runs on: its _freeze.py
    and the machine code of OptimizeFrozenGraph / optimize_for_inference call freezeview's
    default order (with the fold loop), and the guard runs only off the table."""
    reader = _pass_order_reader()
    default = list(default_passes())
    inference = [p for p in default_passes(True, True) if p not in default]
    folds = [reader.CPP[p] for p in default if REGISTRY[p].group == "loop"]
    try:
        order = reader.read_torch(folds)
    except reader.Unreadable as exc:
        pytest.skip(f"cannot read this torch's pass order: {exc}")
    found = reader.differences(order, default, inference)
    if torch_version() in VERIFIED_TORCH:
        assert found == [], f"torch {torch.__version__} is in VERIFIED_TORCH but {found}"
        assert not needs_guard()
    else:
        assert needs_guard()
    assert all(v.startswith(f"{a}.{b}.") for (a, b), v in VERIFIED_RELEASES.items())
    # The reader tells a different order apart (so the check above can fail).
    swapped = [default[1], default[0], *default[2:]]
    assert reader.differences(order, swapped, inference) != []
    assert reader.differences(order, default, inference[::-1]) != []
    assert reader.python_calls("def freeze(m):\n    out = _freeze_module(m)\n")["freeze"] == [
        "_freeze_module"
    ]


def test_dropout_in_other_methods_is_removed_like_torch() -> None:
    """freezeview's graph-level dropout removal matches torch's on a copy."""
    from freezeview.engine.freeze.pass_runners import remove_dropout_in_graph

    frozen = torch._C._freeze_module(_script(DropoutNet)._c, [])
    a = frozen._get_method("forward").graph
    b = a.copy()
    torch._C._jit_pass_remove_dropout(frozen)
    assert remove_dropout_in_graph(b)
    # Copies renumber values; canonical form numbers them by position.
    canon = torch._C._jit_pass_canonicalize
    assert _MANGLE.sub("", str(canon(a))) == _MANGLE.sub("", str(canon(b)))


def test_diagnosis_never_raises() -> None:
    """A diagnosis that trips over an odd graph still gives a sentence."""
    from dataclasses import replace

    info = replace(REGISTRY["fold_conv_bn"], diagnose=_raiser)
    step_snapshot = _our_step("fold_conv_bn", ConvBnTwoUses).snapshot
    assert "while explaining why" in info.why_not(step_snapshot)


def _raiser(snapshot: object) -> str:
    raise ValueError("odd")
