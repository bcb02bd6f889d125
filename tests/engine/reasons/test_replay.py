"""The replay of freeze_module.cpp (``engine/reasons/replay.py``) runs torch's clean-up
passes once each: constant propagation eliminates the dead code it leaves itself."""

from __future__ import annotations

from typing import Any

import pytest
import torch
from corpus import CASES, Case
from models.small import Counter, scripted

from freezeview.engine import explain
from freezeview.engine.reasons.replay import FreezeReplay

FREEZABLE = [c for c in CASES if c.expect_error is None]


def test_the_replay_eliminates_dead_code_once_per_graph(monkeypatch: pytest.MonkeyPatch) -> None:
    """One dead-code elimination before constant propagation and none after it (torch's
    propagation cleans up after itself when it changes the graph)."""
    calls: list[str] = []
    real_dce = torch._C._jit_pass_dce
    real_cp = torch._C._jit_pass_constant_propagation

    def dce(graph: Any) -> Any:
        calls.append("dce")
        return real_dce(graph)

    def cp(graph: Any) -> Any:
        calls.append("cp")
        return real_cp(graph)

    real_propagate = FreezeReplay.propagate

    def propagate(self: FreezeReplay) -> None:
        calls.append("propagate")
        real_propagate(self)
        calls.append("done")

    monkeypatch.setattr(torch._C, "_jit_pass_dce", dce)
    monkeypatch.setattr(torch._C, "_jit_pass_constant_propagation", cp)
    monkeypatch.setattr(FreezeReplay, "propagate", propagate)
    explain(scripted(Counter))
    start = calls.index("propagate")
    assert calls[start : calls.index("done")] == ["propagate", "dce", "cp"]


@pytest.mark.slow
@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_constant_propagation_leaves_no_dead_code(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """On every module of the corpus, a dead-code elimination after the replay's constant
    propagation would change nothing (what lets the replay skip it)."""
    real_cp = torch._C._jit_pass_constant_propagation

    def cp(graph: Any) -> Any:
        result = real_cp(graph)
        text = str(graph)
        torch._C._jit_pass_dce(graph)
        assert str(graph) == text, case.name
        return result

    monkeypatch.setattr(torch._C, "_jit_pass_constant_propagation", cp)
    try:
        explain(case.build(), preserved_attrs=list(case.preserved_attrs))
    except Exception as exc:  # a refusal explain reports is not this test's business
        if "freez" not in str(exc).lower():
            raise
