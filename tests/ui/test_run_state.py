"""The main screen's runs of the plan (``ui/screens/run_state.py``): one owner's state."""

from __future__ import annotations

from freezeview.ui.screens.run_state import Plan, RunState


def test_a_toggle_keeps_the_users_order_and_each_name_once() -> None:
    state = RunState(preserved=("a",))
    assert state.toggle("b") and state.preserved == ("a", "b")
    assert not state.toggle("a") and state.preserved == ("b",)
    assert state.toggle("a") and state.preserved == ("b", "a")


def test_a_new_explain_stops_the_last_and_only_its_answers_count() -> None:
    state = RunState()
    first = state.begin_explain()
    state.toggle("scale")
    second = state.begin_explain()
    assert first.cancel.is_set() and not second.cancel.is_set()
    assert second.preserved == ("scale",) and state.explaining
    assert not state.answers(first.request, first.preserved)
    assert state.answers(second.request, ("scale",))
    assert not state.answers(second.request, ())  # names changed since: stale


def test_the_run_waiting_for_the_explanation_starts_once() -> None:
    state = RunState()
    state.run_after_explain()
    state.begin_explain()
    assert state.explain_over() and not state.explaining
    assert not state.explain_over()


def test_a_new_run_stops_the_last_and_the_plan_goes_stale_when_it_changes() -> None:
    state = RunState(preserved=("scale",))
    assert not state.stale(["p1"])  # no run yet: nothing to be stale
    first = state.begin_run(["p1", "p2"])
    second = state.begin_run(["p1"])
    assert first.cancel.is_set() and not state.current(first) and state.current(second)
    assert (second.run_id, second.plan) == (2, Plan(("scale",), ("p1",)))
    assert not state.stale(["p1"])
    assert state.stale(["p1", "p2"])
    state.toggle("scale")
    assert state.stale(["p1"])
    state.cancel_run()
    assert not state.current(second)
