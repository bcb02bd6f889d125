"""Export's work grows no faster than the graph (issue 23): the boxes a diff picture opens,
Graphviz running beside freezeview's own work, the page's source lines."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Iterable
from types import SimpleNamespace
from typing import Any

import pytest

from freezeview.engine.draw import render_plan
from freezeview.engine.draw.render_plan import RenderOptions, changed_splits
from freezeview.engine.draw.view_scopes import box_prefix, count_at_level, opened_scopes


def _stack(blocks: int) -> tuple[Counter[str], list[str]]:
    """Scopes of a flat stack of Conv-BN-ReLU blocks (ops per scope), and the changed ones."""
    counts: Counter[str] = Counter()
    changed: list[str] = []
    for i in range(blocks):
        for part, ops in (("conv", 3), ("bn", 9), ("relu", 1)):
            counts[f"blocks.{i}.{part}"] = ops
        changed += [f"blocks.{i}.bn"] * 9 + [f"blocks.{i}.conv"]
    return counts, changed


def _splits(
    monkeypatch: pytest.MonkeyPatch, blocks: int, budget: int
) -> tuple[tuple[str, ...], float]:
    counts, changed = _stack(blocks)

    def drawn(_snapshot: Any, _constants: str, ids: Iterable[int], _modules: Any) -> list[str]:
        return changed if ids else []

    monkeypatch.setattr(render_plan, "drawn_scopes", drawn)
    diff: Any = SimpleNamespace(added={1}, changed={}, removed=set(), after=None, before=None)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        opened = changed_splits(diff, counts, 2, RenderOptions(budget=budget))
        best = min(best, time.process_time() - start)
    return opened, best


def _reference(counts: Counter[str], changed: list[str], budget: int) -> tuple[str, ...]:
    """changed_splits as first written: every candidate counted with count_at_level."""
    opened: list[str] = []
    tried: set[str] = set()
    while True:
        split = tuple(opened)
        now_open = opened_scopes((), split)
        boxes: Counter[str] = Counter()
        for scope in changed:
            box = box_prefix(scope, 2, (), now_open)
            if box is not None and box not in tried:
                boxes[box] += 1
        if not boxes:
            return split
        box = min(boxes, key=lambda b: (-boxes[b], b))
        tried.add(box)
        if count_at_level(counts, 2, (), (*split, box)) <= budget:
            opened.append(box)


@pytest.mark.parametrize("budget", [5, 250, 401])
def test_changed_splits_on_a_long_stack_opens_what_counting_opens(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    counts, changed = _stack(200)
    opened, _ = _splits(monkeypatch, 200, budget)
    assert opened == _reference(counts, changed, budget)


def test_changed_splits_grows_linearly_with_the_boxes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every block is a changed box and none fits the budget: each is a candidate that
    # is counted. Counting the whole picture per candidate grew as blocks^2 (6 s on a
    # 2,048-block stack); eight times the blocks must cost about eight times the time.
    _, small = _splits(monkeypatch, 400, 300)
    opened, big = _splits(monkeypatch, 3200, 300)
    assert opened == ()
    assert big < 0.5, big
    assert big / max(small, 1e-3) < 24, (small, big)
