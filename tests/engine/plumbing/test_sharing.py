"""``engine/plumbing/sharing.py``: equal values held once, by path."""

from __future__ import annotations

from dataclasses import dataclass

from freezeview.engine.plumbing import reuse_equal


@dataclass(frozen=True)
class _Item:
    path: str
    status: str


def test_equal_items_become_the_kept_ones_and_the_rest_stay() -> None:
    kept = [_Item("a", "kept"), _Item("b", "inlined"), _Item("c", "dropped")]
    items = [_Item("a", "kept"), _Item("b", "kept"), _Item("d", "inlined")]
    changed, new = items[1], items[2]
    reuse_equal(items, kept)
    assert items[0] is kept[0]
    assert items[1] is changed  # a different value keeps its own object
    assert items[2] is new  # a path the kept list lacks
    assert items == [_Item("a", "kept"), _Item("b", "kept"), _Item("d", "inlined")]
