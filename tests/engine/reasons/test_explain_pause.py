"""explain's ``pause`` (the app's engine lets a run of the steps go first): called
between the replay's stages and within its long ones, never changing the answer, and
abandoning the replay when it raises. Statuses are checked against torch's freeze."""

from __future__ import annotations

import dataclasses
import itertools
from typing import Any

import oracle
import pytest
import torch
from torch import nn

import freezeview.engine.reasons.replay as replay
from freezeview.engine.reasons.torch_freeze import torch_outcome
from freezeview.engine.reasons.verdicts import explain


class _Stack(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(6)])
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) * self.scale


def _module() -> torch.jit.ScriptModule:
    return torch.jit.script(_Stack().eval())


def test_pauses_leave_the_answer_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    module = _module()
    plain = explain(module, ["scale"])
    monkeypatch.setattr(replay, "_PAUSE_EVERY", 1)  # a pause at every node too
    calls: list[int] = []
    paused = explain(module, ["scale"], pause=lambda: calls.append(1))
    # Between the six stages, and every node of the long ones.
    assert len(calls) > 6 + 12
    assert [(v.path, v.status, v.reasons) for v in paused.attributes] == [
        (v.path, v.status, v.reasons) for v in plain.attributes
    ]
    torch_says = oracle.status_from_torch(module, ["scale"])
    assert {v.path: v.status for v in paused.attributes if v.path in torch_says} == torch_says


def test_a_pause_that_raises_abandons_the_replay() -> None:
    class Stop(Exception):
        pass

    calls: list[int] = []

    def pause() -> None:
        calls.append(1)
        if len(calls) == 3:
            raise Stop

    with pytest.raises(Stop):
        explain(_module(), [], pause=pause)
    assert len(calls) == 3


class _Branch(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x)


class _Busy(nn.Module):
    """Every kind of torch's bigger calls explain makes: methods inlined (a preserved
    one, an unpreserved one), a fork's body, alias analysis, writers searched for (an
    in-place write of a buffer), dead-code elimination and constant propagation."""

    def __init__(self) -> None:
        super().__init__()
        self.branch = _Branch()
        self.layers = nn.Sequential(*[nn.Linear(4, 4) for _ in range(3)])
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.branch, x)
        self.count.add_(1)
        return self.layers(x) + torch.jit.wait(future)

    @torch.jit.export
    def other(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x) * 2

    @torch.jit.export
    def unused(self, x: torch.Tensor) -> torch.Tensor:
        return self.branch(x) - 1


def test_a_pause_comes_between_any_two_of_torchs_bigger_calls(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each of torch's bigger calls (inlining, alias analysis, the graph's printout the
    writers are searched in, dead-code elimination, constant propagation) holds the GIL
    for a while on a big model: a run of the steps waits for one of them at most."""
    import freezeview.engine.reasons.mutation as mutation
    import freezeview.engine.reasons.replay_graphs as replay_graphs

    module = torch.jit.script(_Busy().eval())
    plain = explain(module, ["other"])
    # As the app asks: torch's freeze made first, its facts handed over.
    facts = dataclasses.replace(torch_outcome(module._c, ["other"]), frozen=None)
    events: list[str] = []

    def logged(name: str, call: Any) -> Any:
        def run(*args: Any, **kwargs: Any) -> Any:
            events.append(name)
            return call(*args, **kwargs)

        return run

    for name in ("_jit_pass_inline", "_jit_pass_dce", "_jit_pass_constant_propagation"):
        monkeypatch.setattr(torch._C, name, logged(name, getattr(torch._C, name)))

    class Writers(mutation.GraphWriters):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            events.append("alias analysis")
            super().__init__(*args, **kwargs)

    class Kinds:
        def findall(self, text: str) -> list[str]:
            events.append("printout")
            return list(real_kinds.findall(text))

    real_kinds = mutation._KIND_RE
    monkeypatch.setattr(replay_graphs, "GraphWriters", Writers)
    monkeypatch.setattr(mutation, "_KIND_RE", Kinds())
    paused = explain(module, ["other"], outcome=facts, pause=lambda: events.append("pause"))
    heavy = [e for e in events if e != "pause"]
    # Every kind of call is made (the model exercises them all).
    assert {"_jit_pass_inline", "alias analysis", "printout", "_jit_pass_dce"} <= set(heavy)
    assert "_jit_pass_constant_propagation" in heavy
    assert heavy.count("_jit_pass_inline") >= 4  # forward, other, the fork, unused
    together = [(a, b) for a, b in itertools.pairwise(events) if "pause" not in (a, b)]
    assert together == []
    assert [(v.path, v.status, v.reasons) for v in paused.attributes] == [
        (v.path, v.status, v.reasons) for v in plain.attributes
    ]
    torch_says = oracle.status_from_torch(module, ["other"])
    assert {v.path: v.status for v in paused.attributes if v.path in torch_says} == torch_says
