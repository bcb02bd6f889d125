"""What the app's re-runs spare (``freezeview/session/local.py``): the work nobody is shown.

torch stays the oracle: every explain still freezes the model with torch, and every run
still runs torch's freeze and passes; what is spared is freezeview's own work whose
answer is known already or never read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch

from freezeview.engine import reasons
from freezeview.engine.reasons import torch_freeze, verdicts
from freezeview.engine.reasons.explanation_memo import KEPT as EXPLANATIONS_KEPT
from freezeview.session.local import Session


def counting(monkeypatch: pytest.MonkeyPatch, owner: Any, name: str) -> list[int]:
    """One item for every call of ``owner.name`` from now on (which still runs)."""
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
    replays = counting(monkeypatch, verdicts, "_explain")
    freezes = counting(monkeypatch, torch._C, "_freeze_module")
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
    replays = counting(monkeypatch, verdicts, "_explain")
    real = torch_freeze.torch_outcome

    def other(*args: Any, **kwargs: Any) -> Any:
        outcome = real(*args, **kwargs)
        return replace(outcome, kept=outcome.kept | {"not.what.torch.kept"})

    monkeypatch.setattr(reasons, "torch_outcome", other)  # where the session reads it
    session.explain([])
    assert len(replays) == 1


def test_explanations_kept_are_bounded(small_pt: Path) -> None:
    """Memory stays flat: only the last few sets of preserved names keep theirs."""
    session = Session(path=small_pt)
    session.open()
    names = [[], ["scale"], ["head"], ["scale", "head"], ["head.weight"], ["head.bias"]]
    for preserved in names:
        session.explain(preserved)
    assert len(session._explainer.memo) == EXPLANATIONS_KEPT
    assert tuple(names[-1]) in session._explainer.memo


def test_a_run_counts_no_constant_bytes(small_pt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The app's steps carry no constant bytes: a run neither counts them nor builds the
    fold step's picture to count them."""
    from freezeview.engine.measure import measured_run

    counted = counting(monkeypatch, measured_run, "constant_bytes")
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    steps = list(session.run_steps([], passes))
    assert steps and not any(s.error for s in steps)
    assert counted == []


def _facts(views: list[Any]) -> list[tuple[Any, ...]]:
    """What the app shows of each step (its graph key and time aside)."""
    return [
        (v.name, v.changed, v.node_count, v.added, v.removed, v.changed_nodes, v.error)
        for v in views
    ]


def test_a_plain_rerun_shows_the_last_runs_inline_and_fold_steps(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``r`` with the same plan: torch freezes again and runs its passes again, but the
    inline and fold pictures of the unchanged model are not made again; every step
    shows what a fresh run shows, and the final graph is torch.jit.freeze's."""
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    first = list(session.run_steps([], passes))
    inlines = counting(monkeypatch, torch._C, "_jit_pass_inline")
    freezes = counting(monkeypatch, torch._C, "_freeze_module")
    again = list(session.run_steps([], passes))
    assert inlines == [] and len(freezes) == 1
    assert _facts(again) == _facts(first)
    # Their graphs are this run's to show (by new keys).
    assert session.step_graph(again[0].graph).node_count == first[0].node_count
    assert session.step_graph(again[1].graph).node_count == first[1].node_count
    frozen = torch.jit.freeze(torch.jit.load(str(small_pt)).eval())
    final = session.step_graph(again[-1].graph)
    assert sorted(final.kinds().elements()) == sorted(n.kind() for n in _all_nodes(frozen.graph))


def _all_nodes(graph: Any) -> list[Any]:
    found, stack = [], [graph.block()]
    while stack:
        for node in stack.pop().nodes():
            found.append(node)
            stack.extend(node.blocks())
    return found


def test_the_fold_step_is_made_anew_when_torch_keeps_other_attributes(
    small_pt: Path,
) -> None:
    """The fold picture follows from what torch's freeze keeps: offered steps made
    beside another torch result give the inline step only."""
    from dataclasses import replace

    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    list(session.run_steps([], passes))
    offered = session._picture_steps
    assert offered is not None
    session._picture_steps = replace(offered, kept_paths=offered.kept_paths | {"other"})
    list(session.run_steps([], passes))
    now = session._picture_steps
    assert now.inline is offered.inline and now.fold is not offered.fold
    assert now.fold.kept == offered.fold.kept and now.fold.folded == offered.fold.folded


def test_other_preserved_names_make_their_own_fold_step(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Another freeze (a preserved attribute toggled) shows the same inline step, made
    from the same methods, and its own fold step, made from the inline step's graph;
    both as a fresh run with those names shows them."""
    from freezeview.engine.freeze import lazy_graph

    # Counted by node kind, as a large model's steps are: no snapshot replaces the
    # inline step's graph (a small graph's full diff would, and then it is inlined anew).
    monkeypatch.setattr(lazy_graph, "FULL_DIFF_LIMIT", 0)
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    list(session.run_steps([], passes))
    offered = session._picture_steps
    inlines = counting(monkeypatch, torch._C, "_jit_pass_inline")
    toggled = list(session.run_steps(["scale"], passes))
    assert inlines == []
    now = session._picture_steps
    assert now.inline is offered.inline and now.fold is not offered.fold
    assert "scale" in now.fold.kept and "scale" not in offered.fold.kept
    fresh = Session(path=small_pt)
    fresh.open()
    assert _facts(toggled) == _facts(list(fresh.run_steps(["scale"], passes)))
    # A preserved method is another picture: inlined anew.
    list(session.run_steps(["forward"], passes))
    assert inlines


def test_a_toggle_undone_gives_the_same_views_again(small_pt: Path) -> None:
    """The views of a kept explanation are made once; each explain hands out its own
    list of them, with the preserved marks of its names."""
    session = Session(path=small_pt)
    session.open()
    first = session.explain([])
    on = session.explain(["scale"])
    again = session.explain([])
    assert again == first and again is not first
    assert all(a is b for a, b in zip(again, first, strict=True))
    assert next(v for v in on if v.path == "scale").preserved
    assert not next(v for v in again if v.path == "scale").preserved


def test_a_rerun_takes_the_counts_of_steps_diffed_before(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step whose graphs print as a step of an earlier run did needs neither snapshots
    nor a diff for its counts (0.15 s of a 512-block stack's re-run); a graph not seen
    before is diffed. Every count is what a fresh session finds."""
    import freezeview.engine.diff as diff_package
    from freezeview.engine.freeze.steps import forget_known_counts

    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    first = list(session.run_steps([], passes))
    diffs = counting(monkeypatch, diff_package, "diff_snapshots")
    again = list(session.run_steps([], passes))
    assert diffs == []
    assert _facts(again) == _facts(first)
    other = list(session.run_steps(["scale"], passes[:-1]))
    assert diffs  # its fold and pass steps print otherwise
    forget_known_counts()
    fresh = Session(path=small_pt)
    fresh.open()
    expected = list(fresh.run_steps(["scale"], passes[:-1]))
    assert _facts(other) == _facts(expected)


def test_other_names_fold_the_inline_step_shown_again_without_reading_it_again(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run with other preserved names folds the same inlined graph (the inline step
    shown again): its attribute reads, found by the run before, are not looked for
    again; the fold step shows what a fresh run with those names shows."""
    from freezeview.engine.freeze import fold_picture, lazy_graph

    # Counted by node kind, as a large model's steps are (see above).
    monkeypatch.setattr(lazy_graph, "FULL_DIFF_LIMIT", 0)
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    list(session.run_steps([], passes))
    scans = counting(monkeypatch, fold_picture, "_attribute_chains")
    toggled = list(session.run_steps(["scale"], passes))
    assert scans == []
    fresh = Session(path=small_pt)
    fresh.open()
    expected = list(fresh.run_steps(["scale"], passes))
    assert scans  # a model run for the first time: its reads are found
    assert _facts(toggled) == _facts(expected)
    fold = session.step_graph(toggled[1].graph)
    assert fold.text == fresh.step_graph(expected[1].graph).text
