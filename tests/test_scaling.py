"""freezeview's own work grows linearly with the number of modules of one type (issue 23).

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
