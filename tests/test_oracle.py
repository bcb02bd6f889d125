"""The oracle itself: what tests/oracle.py says torch does, checked on obvious modules.

If the oracle were wrong, every agreement test built on it would prove nothing, so each
of its answers is checked here against a module whose outcome is plain from its code,
and against torch's frozen module directly.
"""

from __future__ import annotations

import os
import re
import warnings

import oracle
import pytest
import torch
from corpus import CASES, Case, params, scripted
from torch import nn


class Plain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.unused = nn.Parameter(torch.zeros(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)


class Written(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("counter", torch.zeros(1))
        self.register_buffer("scale", torch.ones(4))
        self.limit = 3

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.counter.add_(1.0)
        return x * self.scale + self.limit


class Branchy(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.gate = 0.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if bool(x.sum() > self.gate):
            x = x.relu()
        for _ in range(2):
            x = x + 1
        return x


class Leaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.w


class SharedOnePath(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        leaf = torch.jit.script(Leaf())
        self.a = leaf
        self.b = leaf
        self.c = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.a(x)


class ForkedLeaf(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.inner = Leaf()
        self.other = Leaf()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.inner, x)
        return torch.jit.wait(future) + self.other(x)


def _script(cls: type[nn.Module]) -> torch.jit.ScriptModule:
    return scripted(cls)()


def test_plain_module_everything_read_is_inlined() -> None:
    module = _script(Plain)
    frozen = oracle.torch_freeze(module)
    assert oracle.frozen_attribute_paths(frozen) == set()
    assert oracle.torch_inlined_paths(module) == {"fc.weight", "fc.bias"}
    status = oracle.status_from_torch(module)
    assert set(status) == set(oracle.attribute_paths(module))
    assert status["fc.weight"] == status["fc.bias"] == status["fc"] == "inlined"
    assert status["unused"] == status["fc.training"] == "dropped"


def test_written_buffer_is_kept_and_the_rest_inlined() -> None:
    module = _script(Written)
    assert oracle.frozen_attribute_paths(oracle.torch_freeze(module)) == {"counter"}
    status = oracle.status_from_torch(module)
    assert status["counter"] == "kept"
    assert status["scale"] == status["limit"] == "inlined"


def test_preserved_names_are_kept() -> None:
    module = _script(Written)
    status = oracle.status_from_torch(module, ["scale", "limit"])
    assert status["scale"] == status["limit"] == status["counter"] == "kept"
    assert oracle.frozen_attribute_paths(oracle.torch_freeze(module, ["limit"])) == {
        "counter",
        "limit",
    }


def test_shared_module_paths_count_the_same() -> None:
    module = _script(SharedOnePath)
    aliases = oracle.module_aliases(module)
    assert aliases["b"] == "a"
    assert aliases["c"] == "c"
    # Probing put the module back as it was.
    assert not module.a.training and not module.b.training and not module.c.training
    status = oracle.status_from_torch(module)
    assert status["a.w"] == status["b.w"] == "inlined"
    assert status["c.w"] == status["c"] == "dropped"


def test_fork_subgraph_names_resolve_to_the_forked_submodule() -> None:
    module = _script(ForkedLeaf)
    log = oracle.freeze_with_log(module)
    # torch names the forked module's weight relative to that module...
    assert "w" in log.folded
    assert "inner.w" in log.paths
    # ...and the oracle maps it back to its path from the root.
    assert oracle.torch_inlined_paths(module, log=log) == {"inner.w", "other.w"}


def test_freeze_log_is_torch_own_log() -> None:
    module = _script(Written)
    before = torch._C._jit_get_logging_option()
    log = oracle.freeze_with_log(module)
    assert torch._C._jit_get_logging_option() == before
    assert any("has inplace writer" in line and "counter" in line for line in log.lines)
    assert sorted(log.folded) == ["limit", "scale"]
    assert oracle.frozen_attribute_paths(log.frozen) == {"counter"}


def test_capture_fd2_sees_c_level_writes() -> None:
    with oracle.capture_fd2() as lines:
        os.write(2, b"below python\n")
    assert lines == ["below python"]


def test_graph_signature_counts_nested_blocks() -> None:
    module = _script(Branchy)
    signature = oracle.frozen_graph_signature(module.graph)
    assert signature["prim::If"] == 1
    assert signature["prim::Loop"] == 1
    assert signature["aten::relu"] == 1  # inside the If block
    assert signature["aten::add"] >= 1  # inside the Loop block
    flat = [node.kind() for node in module.graph.nodes()]
    assert "aten::relu" not in flat
    assert sum(signature.values()) > len(flat)


def test_graph_signature_sees_freezing_fold_batchnorm() -> None:
    module = next(case for case in CASES if case.name == "conv_bn_relu").build()
    assert oracle.frozen_graph_signature(module.graph)["prim::GetAttr"] > 0
    frozen = oracle.torch_freeze(module)
    signature = oracle.frozen_graph_signature(frozen.graph)
    assert signature["prim::GetAttr"] == 0
    assert signature["aten::batch_norm"] == 0
    assert signature["aten::conv2d"] == 1
    unoptimized = oracle.torch_freeze(module, optimize_numerics=False)
    assert oracle.frozen_graph_signature(unoptimized.graph)["aten::batch_norm"] == 1


def test_corpus_is_big_and_varied() -> None:
    assert len(CASES) >= 35
    assert any(case.traced for case in CASES)
    assert sum(not case.traced for case in CASES) >= 30
    assert any(case.preserved_attrs for case in CASES)
    assert any(case.expect_error for case in CASES)


@pytest.mark.parametrize("case", params())
def test_corpus_case_builds_and_torch_agrees_with_expectation(case: Case) -> None:
    """Each case builds fresh, and torch freezes it or refuses it as the case says."""
    first, second = case.build(), case.build()
    assert isinstance(first, torch.jit.ScriptModule)
    # An already-frozen module has no `training` flag left: freezing removed it.
    assert not getattr(first, "training", False)
    assert first is not second
    if case.expect_error:
        with pytest.raises(RuntimeError, match=case.expect_error):
            oracle.torch_freeze(first, case.preserved_attrs)
        return
    frozen = oracle.torch_freeze(second, case.preserved_attrs)
    # Two seeded builds are identical and inputs() is seeded per call, so even modules
    # that update their own state on every call give the same first outputs.
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        expected = case.run(first)
    with warnings.catch_warnings(), torch.random.fork_rng(devices=[]):
        warnings.simplefilter("ignore")
        torch.manual_seed(2)
        got = case.run(frozen)
    torch.testing.assert_close(got, expected, rtol=1e-4, atol=1e-5)
    # The logged freeze and torch.jit.freeze leave the same attributes behind.
    log = oracle.freeze_with_log(case.build(), case.preserved_attrs)
    assert oracle.frozen_attribute_paths(log.frozen) == oracle.frozen_attribute_paths(frozen)
    status = oracle.status_from_torch(case.build(), case.preserved_attrs)
    assert set(status.values()) <= {"inlined", "kept", "dropped"}
    for name in case.preserved_attrs:
        if name in status:
            assert status[name] == "kept", f"preserved {name!r} is {status[name]}"
    # Every logged constant names a real attribute (the log format is what we parse).
    assert len(log.paths) >= len(log.folded)
    assert set(log.paths) <= set(oracle.attribute_paths(first))
    assert all(re.fullmatch(r"[\w.]+", name) for name in log.folded)
