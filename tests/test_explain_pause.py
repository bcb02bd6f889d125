"""explain's ``pause`` (the app's engine lets a run of the steps go first): called
between the replay's stages and within its long ones, never changing the answer, and
abandoning the replay when it raises. Statuses are checked against torch's freeze."""

from __future__ import annotations

import oracle
import pytest
import torch
from torch import nn

import freezeview.engine.reasons.replay as replay
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
