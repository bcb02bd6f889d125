"""Tests for freezeview.engine.plumbing.forked: a forked helper's results, every way it fails."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from freezeview.engine.plumbing import forked
from freezeview.engine.plumbing.forked import Forked, can_fork, renewed_in_children

needs_fork = pytest.mark.skipif(not can_fork(), reason="needs Linux and a second CPU")
PARENT = os.getpid()


def in_child() -> bool:
    return os.getpid() != PARENT


def squares(n: int) -> Iterator[tuple[int, int]]:
    """(i, i*i), with the pid that made it in the first slot's sign: negative in a child."""
    for i in range(n):
        yield (-i - 1 if in_child() else i + 1), i * i


def values(results: list[tuple[int, int]]) -> list[int]:
    return [square for _, square in results]


@needs_fork
def test_results_come_from_the_child_in_order() -> None:
    with Forked(lambda: squares(5), enabled=True) as helper:
        assert helper.started
        got = list(helper)
    assert values(got) == [0, 1, 4, 9, 16]
    assert all(marker < 0 for marker, _ in got), "made in this process, not the child"
    assert helper.from_helper == 5 and not helper.started


def test_disabled_runs_the_work_here_one_result_at_a_time() -> None:
    made: list[int] = []

    def work() -> Iterator[int]:
        for i in range(3):
            made.append(i)
            yield i

    with Forked(work, enabled=False) as helper:
        assert not helper.started and made == []
        assert next(helper) == 0 and made == [0]
        assert list(helper) == [1, 2]
    assert helper.from_helper == 0


def test_one_cpu_means_no_child(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(forked.os, "sched_getaffinity", lambda _pid: {0})
    assert not can_fork()
    with Forked(lambda: squares(2), enabled=True) as helper:
        assert not helper.started
        assert values(list(helper)) == [0, 1]


@needs_fork
@pytest.mark.parametrize("how", ["exception", "killed", "exit 0 early"])
def test_a_child_that_stops_midway_leaves_the_rest_to_this_process(how: str) -> None:
    def work() -> Iterator[tuple[int, int]]:
        for index, item in enumerate(squares(4)):
            if index == 2 and in_child():
                if how == "exception":
                    raise RuntimeError("helper failed")
                if how == "killed":
                    os.kill(os.getpid(), signal.SIGKILL)
                os._exit(0)
            yield item

    with Forked(work, enabled=True) as helper:
        got = list(helper)
    assert values(got) == [0, 1, 4, 9]
    assert [marker < 0 for marker, _ in got] == [True, True, False, False]
    assert helper.from_helper == 2


class _Unloadable:
    """Pickles in the child; unpickling it in the parent fails."""

    def __reduce__(self) -> tuple[object, tuple[int]]:
        return (_refuse, (os.getpid(),))


def _refuse(pid: int) -> None:
    raise ValueError(f"made in {pid}")


@needs_fork
def test_a_result_that_does_not_unpickle_is_made_here() -> None:
    def work() -> Iterator[object]:
        yield "first"
        yield _Unloadable() if in_child() else "second, made here"
        yield "third"

    with Forked(work, enabled=True) as helper:
        assert list(helper) == ["first", "second, made here", "third"]
    assert helper.from_helper == 1


@needs_fork
def test_big_results_never_make_the_child_wait_for_the_parent() -> None:
    """Results much larger than a pipe's 64 KiB: the child goes on before they are read."""

    def work() -> Iterator[object]:
        yield "x" * (8 << 20)
        yield time.monotonic()  # when the child got past the first result

    with Forked(work, enabled=True) as helper:
        time.sleep(1.0)
        asked = time.monotonic()
        first = next(helper)
        finished = next(helper)
    assert first == "x" * (8 << 20)
    assert isinstance(finished, float) and finished < asked - 0.5


@needs_fork
def test_the_child_ignores_ctrl_c() -> None:
    def work() -> Iterator[int]:
        time.sleep(0.5)
        yield 7

    with Forked(work, enabled=True) as helper:
        time.sleep(0.2)
        os.kill(helper._pid or 0, signal.SIGINT)
        assert list(helper) == [7]
    assert helper.from_helper == 1


@needs_fork
def test_leaving_the_block_stops_a_child_still_working() -> None:
    def work() -> Iterator[int]:
        time.sleep(60)
        yield 1

    start = time.monotonic()
    with Forked(work, enabled=True) as helper:
        pid = helper._pid
        assert pid is not None
    assert time.monotonic() - start < 10
    assert not helper.started
    with pytest.raises(ChildProcessError):
        os.waitpid(pid, os.WNOHANG)  # already reaped: no zombie left


@needs_fork
def test_an_error_in_the_parent_stops_the_child() -> None:
    def work() -> Iterator[int]:
        time.sleep(60)
        yield 1

    with pytest.raises(KeyError), Forked(work, enabled=True) as helper:
        pid = helper._pid
        raise KeyError("the export failed")
    with pytest.raises(ChildProcessError):
        os.waitpid(pid or 0, os.WNOHANG)


@needs_fork
def test_the_child_does_not_write_the_parents_buffered_output(
    capfd: pytest.CaptureFixture[str],
) -> None:
    """The child ends with os._exit: what the parent had buffered is written once."""
    print("buffered in the parent", end="", file=sys.stdout)
    with Forked(lambda: iter([1]), enabled=True) as helper:
        assert list(helper) == [1]
    sys.stdout.flush()
    out = capfd.readouterr().out
    assert out.count("buffered in the parent") == 1


def test_fork_failure_falls_back_to_this_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def no_fork() -> int:
        raise OSError(11, "Resource temporarily unavailable")

    monkeypatch.setattr(forked, "can_fork", lambda: True)
    monkeypatch.setattr(forked.os, "fork", no_fork)
    before = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else 0
    with Forked(lambda: squares(3), enabled=True) as helper:
        assert not helper.started
        assert values(list(helper)) == [0, 1, 4]
    if before:
        assert len(os.listdir("/proc/self/fd")) == before, "file descriptors leaked"


@needs_fork
def test_by_default_a_process_with_other_threads_does_not_fork() -> None:
    """A lock held by another thread would stay held in the child: no fork unless vouched."""
    stop = threading.Event()
    other = threading.Thread(target=stop.wait)
    other.start()
    try:
        with Forked(lambda: squares(2)) as helper:
            assert not helper.started
            assert values(list(helper)) == [0, 1]
        with Forked(lambda: squares(2), enabled=True) as helper:
            assert helper.started
            assert values(list(helper)) == [0, 1] and helper.from_helper == 2
    finally:
        stop.set()
        other.join()


@needs_fork
def test_a_renewed_lock_held_by_another_thread_is_free_in_the_child() -> None:
    renewed = renewed_in_children(threading.Lock())
    plain = threading.Lock()
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with renewed, plain:
            held.set()
            release.wait()

    holder = threading.Thread(target=hold)
    holder.start()
    held.wait()
    try:
        with Forked(
            lambda: iter([(renewed.acquire(timeout=2), plain.acquire(timeout=0.2))]), enabled=True
        ) as helper:
            assert list(helper) == [(True, False)]
        assert helper.from_helper == 1
    finally:
        release.set()
        holder.join()


def test_a_renewed_lock_nobody_holds_is_freed() -> None:
    """The fork hook Python keeps for good holds a renewed lock weakly: one made per
    object (each helper server's) goes with its object."""
    import weakref

    from freezeview.engine.plumbing.forked import RenewedLock

    lock = RenewedLock()
    with lock:
        assert lock.locked()
    assert not lock.locked()
    gone = weakref.ref(lock)
    del lock
    assert gone() is None
