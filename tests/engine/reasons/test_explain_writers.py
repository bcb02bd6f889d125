"""explain names the same writers as asking alias analysis about every writing node.

``GraphWriters.writers_of`` once asked torch's alias analysis, for each attribute read
with writers, about every written value of the graph: reads x writers (2,048 x 2,048 on
a stack of 2,048 BatchNorms). It now follows the read's aliases forward and looks its
writers up by the values they write, falling back to the full scan when that cannot be
sure. Every read of every corpus module (the fork bodies' graphs included) is asked both
ways here, at the moment explain asks, before anything in the graph is folded.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import torch
from corpus import CASES, Case
from torch import nn

from freezeview.engine import explain
from freezeview.engine.reasons.mutation import GraphWriters, Writer

OK_CASES = [case for case in CASES if not case.expect_error]
# Every case whose reads have writers, plus a few without: the fast set's share.
FAST_TAGS = {"mutation", "fork", "control-flow"}


def _full_scan(writers: GraphWriters, value: torch._C.Value) -> list[Writer]:
    """The old answer: every writer asked about ``value``."""
    hits = writers._scanned_hits(value)
    found = [writers._writer(node, written) for _, node, written in hits]
    return found or writers._fork_writers(value)


@contextmanager
def _compared() -> Iterator[dict[str, Any]]:
    """While open, each writers_of call is checked against the full scan, and the first
    call on a graph checks every attribute read of that graph with writers."""
    seen: dict[str, Any] = {"reads": 0, "indexed": 0, "mismatches": []}
    original = GraphWriters.writers_of
    swept: set[int] = set()

    def compare(writers: GraphWriters, value: torch._C.Value) -> list[Writer]:
        seen["reads"] += 1
        if writers._candidates(value) is not None:
            seen["indexed"] += 1
        got = original(writers, value)
        want = _full_scan(writers, value)
        if got != want:
            seen["mismatches"].append((value.debugName(), got, want))
        return got

    def checked(writers: GraphWriters, value: torch._C.Value) -> list[Writer]:
        if id(writers) not in swept:
            swept.add(id(writers))
            for node in writers.graph.findAllNodes("prim::GetAttr", True):  # type: ignore[attr-defined]
                if node.output() is not value and writers.has_writers(node.output()):
                    compare(writers, node.output())
        return compare(writers, value)

    GraphWriters.writers_of = checked  # type: ignore[method-assign]
    try:
        yield seen
    finally:
        GraphWriters.writers_of = original  # type: ignore[method-assign]


def _check(cases: list[Case]) -> dict[str, Any]:
    with _compared() as seen:
        for case in cases:
            try:
                module = case.build()
            except pytest.skip.Exception:
                continue  # a case this torch cannot build (its own test says why)
            explain(module, case.preserved_attrs)
    assert not seen["mismatches"], seen["mismatches"][:3]
    return seen


def test_writers_match_the_full_scan_on_mutating_cases() -> None:
    cases = [case for case in OK_CASES if case.tags & FAST_TAGS or "mutation" in case.name]
    seen = _check(cases)
    # The index answered for most reads: the comparison is not all fallback.
    assert seen["reads"] >= 15 and seen["indexed"] > seen["reads"] // 3, seen


@pytest.mark.slow
def test_writers_match_the_full_scan_on_the_whole_corpus() -> None:
    seen = _check(OK_CASES)
    assert seen["indexed"] > 0, seen


class _Escapes(nn.Module):
    """Reads the forward walk follows, one it cannot (a loop) and one in a list."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("listed", torch.zeros(3))
        self.register_buffer("looped", torch.zeros(3))
        self.register_buffer("viewed", torch.zeros(3))
        self.register_buffer("branched", torch.zeros(3))

    def forward(self, x: torch.Tensor, flag: bool) -> torch.Tensor:
        held = [self.listed]
        held[0].add_(1)  # through a list: the read joins the Tensor wildcard set
        y = self.looped
        for _ in range(2):
            y = y.view(3)
        y.mul_(2)
        self.viewed.view(3).sub_(1)  # a plain view: found by the walk
        z = self.branched if flag else x
        z.add_(1)  # through an if's output: found by the walk
        x.add_(1)  # a wildcard write: aliases only the list's read
        return x


def test_escaping_reads_fall_back_and_still_match() -> None:
    module = torch.jit.script(_Escapes().eval())
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    writers = GraphWriters(
        graph, "forward", module_types=frozenset({module._c._type().qualified_name()})
    )
    reads = {n.s("name"): n.output() for n in graph.findAllNodes("prim::GetAttr", True)}  # type: ignore[attr-defined]
    assert writers._candidates(reads["looped"]) is None
    assert writers._candidates(reads["viewed"]) is not None
    assert writers._candidates(reads["branched"]) is not None
    # In a list: the Tensor wildcard's writers are its candidates.
    assert writers._aliases(reads["listed"]) is not None
    assert writers._candidates(reads["listed"]) == writers._wild_writers
    for name, value in reads.items():
        assert writers.has_writers(value), name
        got = writers.writers_of(value)
        assert got == _full_scan(writers, value), name
        assert got, name
    # The list's read joined the Tensor wildcard set: every write of a wildcard tensor
    # (x, and z, which may be x) may write it.
    lines = {w.source.text for w in writers.writers_of(reads["listed"]) if w.source}
    assert {line.split("#")[0].strip() for line in lines} == {
        "held[0].add_(1)",
        "z.add_(1)",
        "x.add_(1)",
    }


def test_a_stack_of_batchnorms_asks_alias_analysis_linearly() -> None:
    """Each BatchNorm's num_batches_tracked read has one add_ writer among n: the
    questions asked grow with n, not n squared."""

    def questions(blocks: int) -> int:
        model = torch.jit.script(nn.Sequential(*(nn.BatchNorm1d(2) for _ in range(blocks))).eval())
        count = [0]
        original = GraphWriters._scanned_hits

        def counted(self: GraphWriters, value: Any, writers: Any = None) -> Any:
            count[0] += len(self._value_writers if writers is None else writers)
            return original(self, value, writers)

        GraphWriters._scanned_hits = counted  # type: ignore[method-assign]
        try:
            explain(model)
        finally:
            GraphWriters._scanned_hits = original  # type: ignore[method-assign]
        return count[0]

    small, large = questions(8), questions(32)
    assert small >= 8 and large <= 6 * small, (small, large)


@pytest.mark.slow
def test_a_transformer_layers_wildcard_reads_match_the_full_scan() -> None:
    """nn.MultiheadAttention puts its in_proj weights in lists: in the Tensor wildcard
    set, whose writers (every list append of the model) each such read shares."""
    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    model = torch.jit.script(
        nn.TransformerEncoder(layer, num_layers=2, enable_nested_tensor=False).eval()
    )
    wild = [0]
    original = GraphWriters._candidates

    def counted(self: GraphWriters, value: torch._C.Value) -> Any:
        found = original(self, value)
        wild[0] += found is not None and found is self._wild_writers
        return found

    GraphWriters._candidates = counted  # type: ignore[method-assign]
    try:
        with _compared() as seen:
            explain(model)
    finally:
        GraphWriters._candidates = original  # type: ignore[method-assign]
    assert not seen["mismatches"], seen["mismatches"][:3]
    assert wild[0] >= 4, (wild, seen)
