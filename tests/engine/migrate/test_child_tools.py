"""The migrate children's shared life (engine/migrate/child_tools.py): a child whose parent
has gone (the app quit while its converter ran) ends instead of running to its limit."""

from __future__ import annotations

import pytest

from freezeview.engine.migrate import child_tools


def test_a_child_leaves_once_its_parent_has_gone(monkeypatch: pytest.MonkeyPatch) -> None:
    # The parent's id three times while the child runs, then init's: the parent has gone
    # and the child was handed to init.
    parents = iter([4242, 4242, 4242, 1])
    monkeypatch.setattr(child_tools.os, "getppid", lambda: next(parents, 1))
    left: list[int] = []
    watcher = child_tools.leave_with_parent(4242, 0.001, left.append)
    watcher.join(5)
    assert not watcher.is_alive() and left == [1]
    assert next(parents, None) is None  # it looked while the parent was there


def test_a_child_whose_parent_went_before_it_looked_leaves_too() -> None:
    import os

    left: list[int] = []
    gone = os.getppid() + 1  # not this process's parent: gone, as far as it knows
    child_tools.leave_with_parent(gone, 0.001, left.append).join(5)
    assert left == [1]
