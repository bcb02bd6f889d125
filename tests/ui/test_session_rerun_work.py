"""What the app's re-runs spare (``freezeview/ui/session.py``): the work nobody is shown.

torch stays the oracle: every explain still freezes the model with torch, and every run
still runs torch's freeze and passes; what is spared is freezeview's own work whose
answer is known already or never read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from freezeview.engine.reasons import torch_freeze, verdicts
from freezeview.ui.session import EXPLANATIONS_KEPT, Session


def _counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    calls: list[int] = []
    real = getattr(owner, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, counted)
    return calls


def _statuses(views: list[Any]) -> dict[str, str]:
    return {v.path: v.status for v in views}


def test_a_toggle_undone_replays_no_explain(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A preserved attribute toggled on, then off: torch freezes the model each time,
    but the replay for names explained before is not run again, and the verdicts are
    the first explain's (and torch's)."""
    session = Session(path=small_pt)
    session.open()
    replays = _counting(monkeypatch, verdicts, "_explain")
    freezes = _counting(monkeypatch, torch._C, "_freeze_module")
    first = session.explain([])
    on = session.explain(["scale"])
    off = session.explain([])
    assert len(freezes) == 3  # torch is asked every time
    assert len(replays) == 2  # the replay for [] ran once
    assert _statuses(off) == _statuses(first)
    assert _statuses(on) != _statuses(first)
    # And the run with those names still takes explain's freeze (no second freeze).
    passes = [p.id for p in session.available_passes() if p.default]
    steps = list(session.run_steps([], passes))
    assert steps and not any(s.error for s in steps)
    assert len(freezes) == 3


def test_an_explanation_is_replayed_when_torch_decides_otherwise(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The kept explanation stands only beside the same torch result: when torch's
    freeze keeps or folds other attributes, the replay runs again."""
    from dataclasses import replace

    session = Session(path=small_pt)
    session.open()
    session.explain([])
    replays = _counting(monkeypatch, verdicts, "_explain")
    real = torch_freeze.torch_outcome

    def other(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        return replace(outcome, kept=outcome.kept | {"not.what.torch.kept"})

    monkeypatch.setattr(torch_freeze, "torch_outcome", other)
    session.explain([])
    assert len(replays) == 1


def test_explanations_kept_are_bounded(small_pt: Path) -> None:
    """Memory stays flat: only the last few sets of preserved names keep theirs."""
    session = Session(path=small_pt)
    session.open()
    names = [[], ["scale"], ["head"], ["scale", "head"], ["head.weight"], ["head.bias"]]
    for preserved in names:
        session.explain(preserved)
    assert len(session._explanations) == EXPLANATIONS_KEPT
    assert tuple(names[-1]) in session._explanations


def test_a_run_counts_no_constant_bytes(small_pt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's steps carry no constant bytes: a run neither counts them nor builds the
    fold step's picture to count them."""
    from freezeview.engine.measure import measured_run

    counted = _counting(monkeypatch, measured_run, "constant_bytes")
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    steps = list(session.run_steps([], passes))
    assert steps and not any(s.error for s in steps)
    assert counted == []
