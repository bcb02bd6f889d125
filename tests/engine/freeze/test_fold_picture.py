"""The fold step's picture (``engine/freeze/fold_picture.py``) as ``freezeview freeze``
reads it: folded in place, its attribute reads found once, its kinds counted as it is
made (no printout), and every row the same as a reader of the whole run gets."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from corpus import CASES, Case

import freezeview.engine.freeze.fold_picture as fold_picture
import freezeview.engine.freeze.freeze_phase as phase
from freezeview.engine.freeze import lazy_graph as steps_module
from freezeview.engine.freeze.lazy_graph import _text_kinds
from freezeview.engine.freeze.pipeline import Pipeline, Step
from freezeview.engine.freeze.steps import release_graphs
from freezeview.engine.measure.measured_run import MeasuredRun

FREEZABLE = [c for c in CASES if c.expect_error is None]


class _ConvBn(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def _row(step: Step) -> tuple[object, ...]:
    return (
        step.changed,
        step.node_count,
        step.nodes_added,
        step.nodes_removed,
        step.nodes_changed,
        step.first_note,
        step.folded,
        step.kept,
    )


def _model() -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    return torch.jit.script(_ConvBn().eval())


@pytest.mark.parametrize("measured", [True, False], ids=["measured", "counts-first"])
def test_the_cli_folds_in_place_walks_the_reads_once_and_prints_no_folded_graph(
    monkeypatch: pytest.MonkeyPatch, measured: bool
) -> None:
    """Read as ``freezeview freeze`` reads it (measured, row by row, releases, the
    pipeline told so), a large graph is folded in place, its attribute reads are walked
    once, the folded graph is never printed, and every row is what a reader of the
    whole run gets; also when the counts are read before anything builds the folded
    graph. (The limit is lowered so a small model counts as large.)"""
    monkeypatch.setattr(steps_module, "FULL_DIFF_LIMIT", 10)
    whole = [_row(s) for s in Pipeline(_model()).run_all()]

    walks: list[object] = []
    folded: list[torch._C.Graph] = []
    built: list[torch._C.Graph] = []
    real_walk, real_fold, real_pick = (
        fold_picture._attribute_chains,
        phase.fold_graph,
        phase.pick_graph,
    )

    def walk(graph: torch._C.Graph, cmod: object) -> object:
        walks.append(graph)
        return real_walk(graph, cmod)  # type: ignore[arg-type]

    def pick(graphs: object, method: str) -> object:
        build = real_pick(graphs, method)  # type: ignore[arg-type]
        return lambda: built.append(build()) or built[-1]

    monkeypatch.setattr(fold_picture, "_attribute_chains", walk)
    monkeypatch.setattr(
        phase, "fold_graph", lambda g, *a, **k: folded.append(g) or real_fold(g, *a, **k)
    )
    monkeypatch.setattr(phase, "pick_graph", pick)
    pipe = Pipeline(_model())
    pipe.read_in_order = True
    steps: list[Step] = []
    rows = []
    for step in MeasuredRun(pipe).run() if measured else pipe.run():
        steps.append(step)
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        rows.append(_row(step))
        if step.name == "fold_attributes":
            picture = step._graphs["forward"]
            assert picture._text is None  # counted without a printout
            graph = picture.graph()
            assert graph is not None
            assert picture.kinds() == _text_kinds(str(graph))
        if len(steps) > 1:
            release_graphs(steps[-2], step)
    assert rows == whole
    assert len(built) == len(folded) == 1 and folded[0] is built[0]
    assert len(walks) == 1


@pytest.mark.slow
@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_the_fold_tally_is_the_printouts(case: Case) -> None:
    """The kinds the fold counts as it inserts constants and removes reads are the kinds
    of the folded graph's printout, on every module of the corpus."""
    module = case.build()
    frozen = torch._C._freeze_module(module._c, list(case.preserved_attrs), True)
    kept, _ = fold_picture.module_paths(frozen)
    for method in ("forward", *case.preserved_attrs):
        if not module._c._has_method(method):
            continue
        graph = module._c._get_method(method).graph.copy()
        torch._C._jit_pass_inline(graph)
        tally: Counter[str] = _text_kinds(str(graph))
        chains = fold_picture.attribute_chains(graph, module._c)
        predicted = fold_picture.fold_tally(chains, kept, tally)
        fold_picture.fold_graph(graph, module._c, kept, tally=tally)
        assert tally == _text_kinds(str(graph)), (case.name, method)
        # Worked out without folding, the same kinds (when it dares to say).
        assert predicted is None or predicted == tally, (case.name, method)


def test_the_cli_copies_no_graph_a_pass_rewrites(monkeypatch: pytest.MonkeyPatch) -> None:
    """Read in order, a large picture of the working graph is held through each pass
    (let go if the pass changes the graph) instead of copied: the rows are the same."""
    monkeypatch.setattr(steps_module, "FULL_DIFF_LIMIT", 10)
    copies: list[int] = []
    real = torch._C.Graph.copy

    def copy(self: torch._C.Graph) -> torch._C.Graph:
        copies.append(1)
        return real(self)

    monkeypatch.setattr(torch._C.Graph, "copy", copy)
    seen = {}
    for in_order in (False, True):
        copies.clear()
        pipe = Pipeline(_model())
        pipe.read_in_order = in_order
        steps: list[Step] = []
        rows = []
        for step in MeasuredRun(pipe).run():
            steps.append(step)
            if len(steps) > 1:
                release_graphs(steps[-2], step, settled=True)
            rows.append(_row(step))
            if len(steps) > 1:
                release_graphs(steps[-2], step)
        changed = sum(1 for s in steps if s.kind == "optimize" and s.changed)
        seen[in_order] = (rows, len(copies), changed)
    assert seen[True][0] == seen[False][0]
    # The clean-up's picture and each changed pass's were copied before the next pass.
    assert seen[True][1] == seen[False][1] - 1 - seen[False][2]


def test_the_cli_table_counts_a_large_fold_without_folding(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``freezeview freeze``'s table (no ``--json``, no sample inputs) reads the fold
    step's counts only: on a large graph they follow from the attribute reads, and the
    folded graph is never made; its rows are those of a reader of the whole run. Asked
    for afterwards, the picture is built, and its printout has the kinds the row told."""
    monkeypatch.setattr(steps_module, "FULL_DIFF_LIMIT", 10)
    whole = [_row(s) for s in Pipeline(_model()).run_all()]
    folded: list[torch._C.Graph] = []
    real_fold = phase.fold_graph
    monkeypatch.setattr(
        phase, "fold_graph", lambda g, *a, **k: folded.append(g) or real_fold(g, *a, **k)
    )
    pipe = Pipeline(_model())
    pipe.read_in_order = True
    run = MeasuredRun(pipe, defer_constants=True)
    steps: list[Step] = []
    rows = []
    for step in run.run():
        steps.append(step)
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        rows.append(_row(step))
        if step.name == "fold_attributes":
            assert folded == []
            picture = step._graphs["forward"]
            told = picture.kinds()
            graph = picture.graph()
            assert graph is not None and len(folded) == 1
            assert told == _text_kinds(str(graph))
    assert rows == whole
