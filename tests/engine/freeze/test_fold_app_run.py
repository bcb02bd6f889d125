"""The fold step as the app's run reads it (``session/local.py`` ``run_steps``): on a large
graph its counts follow from the inlined graph's attribute reads (``fold_tally``), the
folded picture is built only when a view asks for the step's graph, and the row is the
one ``freezeview freeze`` shows (read in order) and the one the built picture's printout
gives. (The limit is lowered so the corpus's small modules count as large.)"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest
import torch
from corpus import Case, case_by_name

import freezeview.engine.freeze.freeze_phase as phase
import freezeview.session.local as session_module
from freezeview.engine.freeze import lazy_graph as lazy_module
from freezeview.engine.freeze.lazy_graph import _text_kinds
from freezeview.engine.freeze.pipeline import Pipeline, Step
from freezeview.engine.freeze.steps import release_graphs
from freezeview.engine.load import LoadedModel
from freezeview.engine.measure.measured_run import MeasuredRun
from freezeview.session.local import Session

CASES = [
    case_by_name(name)
    for name in (
        "params_buffers",
        "nested_submodules",
        "shared_submodule_scripted",
        "control_flow",
        "module_list_loop",
        "setattr_on_submodule",
        "preserve_tensor_attribute",
        "preserve_submodule",
        "preserve_dotted_attribute",
        "preserve_exported_method",
        "tiny_resnet",
    )
]


def _in_order_rows(case: Case, preserved: tuple[str, ...]) -> dict[str, tuple[Any, ...]]:
    """Each step's row as ``freezeview freeze``'s table reads it (in order, released)."""
    pipe = Pipeline(case.build(), session_module._plan(preserved, _passes()))
    pipe.read_in_order = True
    steps: list[Step] = []
    rows = {}
    for step in MeasuredRun(pipe, defer_constants=True).run():
        steps.append(step)
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        rows[step.name] = (
            step.changed,
            step.node_count,
            step.nodes_added,
            step.nodes_removed,
            step.nodes_changed,
        )
        if len(steps) > 1:
            release_graphs(steps[-2], step)
        if step.name == "fold_attributes":
            break
    return rows


def _passes() -> list[str]:
    return [p.id for p in Session.available_passes() if p.default]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_app_counts_a_large_fold_without_building_it(
    case: Case, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Run as the app runs it (and re-run with other preserved names, the inline step
    shown again), the fold step's row is read-in-order's and the built picture's, and
    the folded graph is built only when the step's graph is asked for."""
    monkeypatch.setattr(lazy_module, "FULL_DIFF_LIMIT", 2)
    folds: list[torch._C.Graph] = []
    real_fold = phase.fold_graph
    monkeypatch.setattr(
        phase, "fold_graph", lambda g, *a, **k: folds.append(g) or real_fold(g, *a, **k)
    )
    shown: list[Step] = []
    at_fold: list[int] = []
    real_view = session_module._step_view

    def view(step: Step, *args: Any) -> Any:
        shown.append(step)
        answer = real_view(step, *args)
        if step.name == "fold_attributes":
            at_fold.append(len(folds))  # the fold step's row read: no picture for it
        return answer

    monkeypatch.setattr(session_module, "_step_view", view)
    session = Session(loaded=LoadedModel.from_module(case.build()))
    # A first run with nothing preserved, then the case's names if it has any: the
    # second run shows the first run's inline step again and folds from its graph.
    for preserved in dict.fromkeys(((), case.preserved_attrs)):
        shown.clear()
        folds.clear()
        at_fold.clear()
        views = {v.name: v for v in session.run_steps(preserved, _passes())}
        assert not any(v.error for v in views.values()), views
        fold = next(s for s in shown if s.name == "fold_attributes")
        inline = next(s for s in shown if s.name == "inline")
        row = views["fold_attributes"]
        assert at_fold == [0], "the folded picture was built for the fold step's row"
        cleanup = next(s for s in shown if s.name == "cleanup")
        if all(
            fold._graphs[m].kinds() != cleanup._graphs[m].kinds()
            for m in fold._graphs
            if m in cleanup._graphs
        ):
            # Nor for the clean-up's row: its kinds differ (else the printouts are
            # compared, which prints the folded picture).
            assert folds == [], "the folded picture was built during the run"
            assert all(p._graph is None for p in fold._graphs.values())
        expected = _in_order_rows(case, preserved)["fold_attributes"]
        assert (row.changed, row.node_count, row.added, row.removed, row.changed_nodes) == (
            expected
        )
        # Asked for (the app's view of the step), the picture is built: its printout has
        # the kinds the row told, and the row's counts are its difference to the inline
        # step's pictures.
        told = {method: picture.kinds() for method, picture in fold._graphs.items()}
        before = len(folds)
        snapshot = session.step_graph(row.graph)
        assert len(folds) == 1
        assert before in (0, 1)
        assert snapshot.node_count == row.node_count
        delta: Counter[str] = Counter()
        for method, picture in fold._graphs.items():
            assert told[method] == _text_kinds(picture.text), method
            delta.update(told[method])
            delta.subtract(inline._graphs[method].kinds())
        assert len(folds) == len(fold._graphs)
        if row.changed:
            assert row.added == sum(n for n in delta.values() if n > 0)
            assert row.removed == -sum(n for n in delta.values() if n < 0)


def test_a_fold_picture_never_built_is_freed_with_its_step(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The app's run leaves the fold step's picture unbuilt; dropped, it is freed at
    once (no reference cycle waits for a collection of the cyclic garbage)."""
    import gc
    import weakref

    monkeypatch.setattr(lazy_module, "FULL_DIFF_LIMIT", 2)
    shown: list[Step] = []
    real_view = session_module._step_view
    monkeypatch.setattr(
        session_module, "_step_view", lambda step, *a: shown.append(step) or real_view(step, *a)
    )
    session = Session(loaded=LoadedModel.from_module(case_by_name("tiny_resnet").build()))
    views = list(session.run_steps((), _passes()))
    fold = next(s for s in shown if s.name == "fold_attributes")
    picture = fold._graphs["forward"]
    assert picture._graph is None and picture._build is not None  # not built
    ref = weakref.ref(picture)
    gc.collect()
    gc.disable()
    try:
        del fold, picture, views
        shown.clear()
        session._pictures = {}
        session._picture_steps = None
        session._step_graphs = {}
        assert ref() is None
    finally:
        gc.enable()
