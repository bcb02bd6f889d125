"""The app's explain in two parts (issue 23): torch's statuses at once, freezeview's reasons
after, a run of the steps before those reasons, and reasons nobody waits for any more
abandoned. Statuses are checked against torch's own freeze of the same module."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import oracle
import pytest
import torch

import freezeview.engine.reasons as reasons
from freezeview.session.explain_turns import PENDING_REASON, Superseded, TorchTurns, reasons_pending
from freezeview.session.local import Session
from freezeview.session.summaries import AttrSummary


@pytest.fixture
def replays(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, ...]]:
    """The names of every replay of freeze_module.cpp explain runs, in order."""
    calls: list[tuple[str, ...]] = []
    real = reasons.explain

    def counting(*args: Any, **kwargs: Any) -> Any:
        calls.append(tuple(kwargs.get("preserved_attrs", ())))
        return real(*args, **kwargs)

    monkeypatch.setattr(reasons, "explain", counting)
    return calls


def _torch_statuses(path: Path, preserved: list[str]) -> dict[str, str]:
    return oracle.status_from_torch(torch.jit.load(str(path)).eval(), preserved)


def _statuses(views: list[AttrSummary]) -> dict[str, str]:
    return {v.path: v.status for v in views}


def test_torch_statuses_come_before_the_replay(
    small_pt: Path, replays: list[tuple[str, ...]]
) -> None:
    """The statuses handed over first are torch's, every reason pending, and no replay
    has run yet; the answer then carries the replay's reasons, the same statuses."""
    session = Session(path=small_pt)
    session.open()
    seen: list[tuple[list[AttrSummary], int]] = []
    views = session.explain(["scale"], statuses=lambda v: seen.append((v, len(replays))))
    assert len(seen) == 1
    first, replays_then = seen[0]
    assert replays_then == 0
    torch_says = _torch_statuses(small_pt, ["scale"])
    assert {p: s for p, s in _statuses(first).items() if p in torch_says} == torch_says
    assert all(v.reasons == (PENDING_REASON,) and reasons_pending(v) for v in first)
    assert _statuses(views) == _statuses(first)
    assert replays == [("scale",)]
    assert not any(reasons_pending(v) for v in views)
    scale = next(v for v in views if v.path == "scale")
    assert scale.status == "kept" and scale.reasons[0].code == "preserved"
    # Names explained before: the reasons at once, no statuses first, no replay again.
    again: list[list[AttrSummary]] = []
    assert session.explain(["scale"], statuses=again.append) == views
    assert again == [] and replays == [("scale",)]


def test_a_run_started_on_the_statuses_shows_every_step_before_the_replay(
    small_pt: Path, replays: list[tuple[str, ...]]
) -> None:
    """The user toggles and presses r: the run takes explain's torch freeze and yields
    all its steps before the replay of the reasons starts."""
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    events: list[str] = []
    runner: list[threading.Thread] = []

    def run() -> None:
        for _ in session.run_steps(["scale"], passes):
            events.append(f"step after {len(replays)} replays")

    def statuses(views: list[AttrSummary]) -> None:
        thread = threading.Thread(target=run)
        runner.append(thread)
        thread.start()
        turns: TorchTurns = session._explainer.turns
        while not turns.first_active and thread.is_alive():
            threading.Event().wait(0.005)

    views = session.explain(["scale"], statuses=statuses)
    runner[0].join(timeout=60)
    assert events and set(events) == {"step after 0 replays"}
    assert replays == [("scale",)]
    assert not any(reasons_pending(v) for v in views)


def test_a_newer_explain_abandons_the_pending_reasons(
    small_pt: Path, replays: list[tuple[str, ...]]
) -> None:
    """A toggle while the reasons are worked out: the earlier names' replay never runs,
    their answer is torch's statuses with the reasons still pending, and nothing of them
    is kept as their explanation."""
    session = Session(path=small_pt)
    session.open()
    newer: list[list[AttrSummary]] = []
    older = session.explain(["scale"], statuses=lambda _: newer.append(session.explain(["head"])))
    assert replays == [("head",)]
    assert all(reasons_pending(v) for v in older)
    torch_says = _torch_statuses(small_pt, ["scale"])
    assert {p: s for p, s in _statuses(older).items() if p in torch_says} == torch_says
    assert not any(reasons_pending(v) for v in newer[0])
    assert ("scale",) not in session._explainer.memo
    assert ("head",) in session._explainer.memo


def test_a_cancel_abandons_the_pending_reasons(
    small_pt: Path, replays: list[tuple[str, ...]]
) -> None:
    session = Session(path=small_pt)
    session.open()
    cancel = threading.Event()
    views = session.explain(["scale"], statuses=lambda _: cancel.set(), cancel=cancel)
    assert replays == []
    assert views and all(reasons_pending(v) for v in views)


def test_the_replay_gives_way_between_its_stages() -> None:
    """Work that goes first waits for the replay's current stage only, never runs beside
    it, and the replay goes on once that work is over."""
    turns = TorchTurns()
    log: list[str] = []
    stage_running = threading.Event()
    finish_stage = threading.Event()

    def replay() -> None:
        with turns.background(lambda: True) as pause:
            log.append("stage 1 starts")
            stage_running.set()
            finish_stage.wait(10)
            log.append("stage 1 ends")
            pause()
            log.append("stage 2")

    def run() -> None:
        with turns.first():
            log.append("run")

    background = threading.Thread(target=replay)
    background.start()
    stage_running.wait(10)
    first = threading.Thread(target=run)
    first.start()
    while not turns.first_active:
        threading.Event().wait(0.002)
    finish_stage.set()
    for thread in (first, background):
        thread.join(10)
    assert log == ["stage 1 starts", "stage 1 ends", "run", "stage 2"]


def test_a_replay_that_fails_after_the_statuses_says_so(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The statuses on screen stay torch's; the reasons say freezeview could not work
    them out, instead of staying pending for ever."""

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the replay broke")

    monkeypatch.setattr(reasons, "explain", broken)
    session = Session(path=small_pt)
    session.open()
    first: list[list[AttrSummary]] = []
    views = session.explain(["scale"], statuses=first.append)
    assert _statuses(views) == _statuses(first[0])
    torch_says = _torch_statuses(small_pt, ["scale"])
    assert {p: s for p, s in _statuses(views).items() if p in torch_says} == torch_says
    assert all(v.reasons[0].code == "undetermined" for v in views)
    assert "the replay broke" in views[0].reasons[0].message


def test_a_run_asked_on_a_toggles_statuses_goes_before_the_replay(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After a first run, a toggle to names never explained: a run asked on the statuses
    starts before the replay's first stage (it waits for none), and the replay starts
    once the run is over, not when the grace is."""
    import freezeview.engine.reasons.replay_graphs as replay_graphs

    events: list[str] = []
    real = replay_graphs.ReplayGraphs.prepare_graphs

    def prepare(self: Any) -> None:
        events.append("replay")
        real(self)

    monkeypatch.setattr(replay_graphs.ReplayGraphs, "prepare_graphs", prepare)
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    session._explainer.grace = 60.0  # longer than the test: only a run ends it
    session.explain([])  # the first explain: no grace, its replay runs at once
    assert events == ["replay"]
    list(session.run_steps([], passes))
    events.clear()
    shown = threading.Event()
    answer: list[list[AttrSummary]] = []

    def statuses(views: list[AttrSummary]) -> None:
        events.append("statuses")
        shown.set()

    toggle = threading.Thread(
        target=lambda: answer.append(session.explain(["scale"], statuses=statuses))
    )
    toggle.start()
    assert shown.wait(30)
    # A user's key press comes a moment later (the replay used to be under way by then).
    threading.Event().wait(0.2)
    for _ in session.run_steps(["scale"], passes):
        events.append("step")
    toggle.join(30)
    assert not toggle.is_alive()
    assert events[0] == "statuses" and events[-1] == "replay"
    assert set(events[1:-1]) == {"step"}
    torch_says = _torch_statuses(small_pt, ["scale"])
    assert {p: s for p, s in _statuses(answer[0]).items() if p in torch_says} == torch_says
    assert not any(reasons_pending(v) for v in answer[0])


def test_background_work_with_a_grace_starts_when_first_work_ends() -> None:
    """The grace ends with the first work asked meanwhile, which waited for nothing."""
    turns = TorchTurns()
    log: list[str] = []
    holding_off = threading.Event()

    def wanted() -> bool:
        holding_off.set()
        return True

    def replay() -> None:
        with turns.background(wanted, grace=60.0):
            log.append("stage")

    background = threading.Thread(target=replay)
    background.start()
    assert holding_off.wait(10)
    with turns.first():
        log.append("run")
    background.join(30)
    assert not background.is_alive()
    assert log == ["run", "stage"]


def test_a_grace_is_abandoned_when_the_work_is_no_longer_wanted() -> None:
    turns = TorchTurns()
    wanted = threading.Event()
    wanted.set()
    outcome: list[str] = []

    def replay() -> None:
        try:
            with turns.background(wanted.is_set, grace=60.0):
                outcome.append("ran")
        except Superseded:
            outcome.append("abandoned")

    background = threading.Thread(target=replay)
    background.start()
    wanted.clear()
    background.join(30)
    assert outcome == ["abandoned"]


def test_background_work_lets_ended_first_work_answer_before_its_stage(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The thread of a run that has just ended gets to send its answer before the next
    stage starts (a stage in torch would hold the GIL through it)."""
    import freezeview.session.explain_turns as session_explain

    monkeypatch.setattr(session_explain, "SETTLE", 0.5, raising=False)
    turns = TorchTurns()
    log: list[str] = []
    in_stage = threading.Event()
    go_on = threading.Event()

    def replay() -> None:
        with turns.background(lambda: True) as pause:
            in_stage.set()
            go_on.wait(10)
            pause()
            log.append("stage 2")

    def run() -> None:
        with turns.first():
            log.append("run")
        threading.Event().wait(0.05)  # the run's answer sent, the GIL let go meanwhile
        log.append("answer")

    background = threading.Thread(target=replay)
    background.start()
    assert in_stage.wait(10)
    first = threading.Thread(target=run)
    first.start()
    while not turns.first_active:
        threading.Event().wait(0.002)
    go_on.set()
    for thread in (first, background):
        thread.join(10)
    assert log == ["run", "answer", "stage 2"]
