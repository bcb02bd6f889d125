"""freezeview's own work grows linearly with the number of modules of one type (issue 23).

Also here: explain's human output prints alike blocks once (the same rows at any size),
and check holds a rule per attribute without reading every verdict for each rule.

A flat stack of N identical blocks has N modules of each type. Looking a module up by
scanning every module of its type (to find one shared under two names) makes reading
the module tree, explain's module view and torch's statuses quadratic in N: 3 s of
explain at 2,048 blocks. These tests count the module comparisons such scans make at
two sizes: linear work grows 4x from 32 to 128 blocks, a scan 16x.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest
import torch
from torch import nn

from freezeview.engine import explain
from freezeview.engine.graph.inventory import build_inventory
from freezeview.engine.reasons.torch_freeze import module_statuses, torch_outcome

# Growth checks build stacks of 32 to 128 blocks: the slow set (make test) runs them.
pytestmark = pytest.mark.slow

SMALL, LARGE = 32, 128


def _stack(blocks: int) -> torch.jit.ScriptModule:
    """``blocks`` Linear-BatchNorm-ReLU blocks, each a Sequential of the same types."""
    return torch.jit.script(
        nn.Sequential(
            *(nn.Sequential(nn.Linear(4, 4), nn.BatchNorm1d(4), nn.ReLU()) for _ in range(blocks))
        ).eval()
    )


@pytest.fixture(scope="module")
def stacks() -> dict[int, torch.jit.ScriptModule]:
    return {n: _stack(n) for n in (SMALL, LARGE)}


@contextmanager
def _comparisons() -> Iterator[list[int]]:
    """Counts ``ScriptModule.__eq__`` calls (module objects compared) while open."""
    count = [0]
    original = torch._C.ScriptModule.__eq__

    def counted(a: object, b: object) -> bool:
        count[0] += 1
        return bool(original(a, b))  # type: ignore[arg-type]

    torch._C.ScriptModule.__eq__ = counted  # type: ignore[method-assign,assignment]
    try:
        yield count
    finally:
        torch._C.ScriptModule.__eq__ = original  # type: ignore[method-assign]


def _grows_linearly(small: int, large: int) -> bool:
    # 4x the blocks: linear work 4x (plus a constant), a scan over a type's modules 16x.
    return large <= 6 * max(small, 1)


@pytest.mark.parametrize(
    "work",
    [
        pytest.param(lambda m: build_inventory(m, {}), id="module-tree"),
        pytest.param(lambda m: explain(m), id="explain"),
        pytest.param(lambda m: module_statuses(torch_outcome(m._c), m._c), id="torch-statuses"),
    ],
)
def test_module_lookups_are_linear(stacks: dict[int, torch.jit.ScriptModule], work) -> None:  # type: ignore[no-untyped-def]
    counts = {}
    for n, model in stacks.items():
        with _comparisons() as count:
            work(model)
        counts[n] = count[0]
    assert _grows_linearly(counts[SMALL], counts[LARGE]), counts


# -- explain's printing and check's rules ---------------------------------------------------


class _CountedTable:
    """Counts rich table rows added (each one is laid out and printed) while open."""

    def __enter__(self) -> list[int]:
        from rich.table import Table

        self.count = [0]
        self.original = Table.add_row
        count, original = self.count, self.original

        def counted(table: Table, *cells: object, **kwargs: object) -> None:
            count[0] += 1
            original(table, *cells, **kwargs)  # type: ignore[arg-type]

        Table.add_row = counted  # type: ignore[method-assign]
        return self.count

    def __exit__(self, *exc: object) -> None:
        from rich.table import Table

        Table.add_row = self.original  # type: ignore[method-assign]


@pytest.fixture(scope="module")
def explained(stacks: dict[int, torch.jit.ScriptModule]) -> dict[int, object]:
    return {n: explain(model) for n, model in stacks.items()}


@pytest.mark.parametrize("each_module", [False, True], ids=["grouped", "each-module"])
def test_explain_prints_alike_blocks_once(explained: dict[int, object], each_module: bool) -> None:
    """Grouped, a stack prints the same rows at any size; module by module, linearly many."""
    import io

    from rich.console import Console

    from freezeview.cli.explain import render_explanation

    class Unprinted(Console):
        def print(self, *objects: object, **kwargs: object) -> None:
            pass  # the rows are counted as they are added; laying them out is rich's work

    rows = {}
    for n, result in explained.items():
        with _CountedTable() as count:
            render_explanation(
                Unprinted(file=io.StringIO(), width=200),
                result,  # type: ignore[arg-type]
                each_module=each_module,
            )
        rows[n] = count[0]
    if each_module:
        assert rows[LARGE] >= 3 * rows[SMALL] and _grows_linearly(rows[SMALL], rows[LARGE])
    else:
        assert rows[LARGE] == rows[SMALL], rows


@pytest.mark.parametrize("grouped", [False, True], ids=["a-rule-per-attribute", "as-written"])
def test_check_reads_each_verdict_a_bounded_number_of_times(
    stacks: dict[int, torch.jit.ScriptModule],
    tmp_path_factory: pytest.TempPathFactory,
    monkeypatch: pytest.MonkeyPatch,
    grouped: bool,
) -> None:
    """An expectations file with a rule per attribute (hand-written, or written before
    --write-expect grouped repeated blocks) is held reading the verdicts a number of
    times that grows with the model, not with rules x verdicts; the file --write-expect
    writes today (a stack's blocks as one index range) has as few rules at any size, and
    is held reading the verdicts linearly often too."""
    from freezeview.engine.ci import check as check_module
    from freezeview.engine.ci.check import check, expectations_text
    from freezeview.engine.ci.model_facts import gather_facts
    from freezeview.engine.freeze import Plan
    from freezeview.engine.load import LoadedModel

    reads, rules = {}, {}
    original = check_module._PathIndex.__init__

    class Counted(list):  # type: ignore[type-arg]
        count = 0

        def __iter__(self):  # type: ignore[no-untyped-def]
            for item in super().__iter__():
                Counted.count += 1
                yield item

    def counted_init(index: object, verdicts: object) -> None:
        original(index, verdicts)  # type: ignore[arg-type]
        index.verdicts = Counted(index.verdicts)  # type: ignore[attr-defined]

    folder = tmp_path_factory.mktemp("check-scaling")
    for n, model in stacks.items():
        loaded = LoadedModel.from_module(model)
        facts = gather_facts(loaded, Plan.default([]), reasons=False)
        expect = folder / f"{n}-{grouped}.toml"
        with monkeypatch.context() as patched:
            if not grouped:  # every inlined path its own rule
                patched.setattr(check_module, "group_paths", lambda paths, **_: list(paths))
            expect.write_text(expectations_text(facts))
        check_module._PathIndex.__init__ = counted_init  # type: ignore[method-assign]
        Counted.count = 0
        try:
            report = check(loaded, expect)
        finally:
            check_module._PathIndex.__init__ = original  # type: ignore[method-assign]
        assert report.ok
        rules[n] = len(report.results)
        reads[n] = Counted.count
    if grouped:
        assert rules[LARGE] == rules[SMALL] < 4 * SMALL, rules
    else:
        assert min(rules.values()) > 4 * SMALL and rules[LARGE] > 3 * rules[SMALL], rules
    assert _grows_linearly(reads[SMALL], reads[LARGE]), reads
