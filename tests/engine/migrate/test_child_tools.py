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
    import subprocess

    left: list[int] = []
    started = subprocess.Popen(["true"])
    started.wait()  # gone (and reaped) before the child looks
    child_tools.leave_with_parent(started.pid, 0.001, left.append).join(5)
    assert left == [1]


def test_a_forked_child_watches_the_process_that_asked_not_the_server() -> None:
    """A converter forked by the fresh-process server has the server for its parent:
    it stays while the process that asked for it (``parent``) is there, and leaves once
    that process has gone."""
    import subprocess
    import time

    left: list[int] = []
    asker = subprocess.Popen(["sleep", "30"])
    watcher = child_tools.leave_with_parent(asker.pid, 0.01, left.append)
    time.sleep(0.1)
    assert watcher.is_alive() and left == []
    asker.kill()
    asker.wait()
    watcher.join(5)
    assert left == [1]
