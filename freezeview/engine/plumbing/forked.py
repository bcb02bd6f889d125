"""Pure-Python work done by a forked copy of the process, on the machine's second core.

Python runs one thread at a time, so freezeview's own work (diffing snapshots, IR
diffs) cannot overlap with the rest of an export on threads. A forked child can: it
starts with the parent's memory (copy-on-write, so the snapshots already built are
there with nothing to send), does the work, and sends back only its pickled results.
The parent takes each result when it needs it; if the child failed in any way (an
exception, a signal, a result that does not unpickle) the parent makes what is missing
itself, so the answer never depends on the helper.

Results travel through an anonymous in-memory file (``memfd``), with a pipe saying
where each one ends: the child never waits for the parent to read (a pipe alone would
stop it at 64 KiB until the parent came by), and the parent reads each result whole.

What is handed over must be pure Python: the child never calls into torch (whose thread
pools and CUDA state do not survive a fork), never writes files and never prints. The
one exception is :mod:`.compare_fork`, whose child freezes a model with torch set to a
single intra-op thread first (its module docstring says why that is safe). It
ignores Ctrl-C (the parent gets it too and stops the child), and it ends with
``os._exit`` so nothing of the parent (exit handlers, buffered output) runs twice.

Why not ``multiprocessing`` or ``concurrent.futures.ProcessPoolExecutor``: both send a
task's function and arguments to the worker by pickling them (here, 17k-node snapshots:
as slow as the diff itself), start a resource-tracker process and a result thread in
the parent, and cannot stop a worker mid-task before Python 3.14. A fork that reads
what is already in memory, with results in a ``memfd``, needs about 200 lines.

Only Linux forks here: macOS's system libraries are not safe to use after a fork, and
Windows has none. Elsewhere, and on a single CPU, the work runs in the parent, one
result at a time as it is asked for, as it would without this module.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import pickle
import signal
import struct
import sys
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType
from typing import Generic, TypeVar

__all__ = ["Forked", "RenewedLock", "can_fork", "renewed_in_children"]

_T = TypeVar("_T")

# Where one result lies in the results file: offset and length. The last frame, with
# no length, says that every result was sent; a child that ends without it failed.
_FRAME = struct.Struct("<QQ")
_DONE = _FRAME.pack(0, 0)


class RenewedLock:
    """A lock that every forked child of this process gets afresh, released.

    A forked child has only the thread that forked: a lock another thread held at that
    moment would stay held there forever. Python's own answer is
    ``os.register_at_fork(after_in_child=...)``: here it puts a new ``threading.Lock``
    in place of the old one in the child. Used as the lock it holds (``with``,
    ``acquire``, ``release``, ``locked``).
    """

    __slots__ = ("__weakref__", "_lock")

    def __init__(self, lock: threading.Lock | None = None) -> None:
        self._lock = lock if lock is not None else threading.Lock()
        # A weak reference: registered hooks are never removed, and a lock made per
        # object (one per helper server) must not live as long as the process.
        renew = weakref.WeakMethod(self._renew)
        os.register_at_fork(after_in_child=lambda: _call_if_alive(renew))

    def _renew(self) -> None:
        self._lock = threading.Lock()

    def acquire(self, blocking: bool = True, timeout: float = -1) -> bool:
        """As ``threading.Lock.acquire``."""
        return self._lock.acquire(blocking, timeout)

    def release(self) -> None:
        """As ``threading.Lock.release``."""
        self._lock.release()

    def locked(self) -> bool:
        """As ``threading.Lock.locked``."""
        return self._lock.locked()

    def __enter__(self) -> bool:
        return self._lock.acquire()

    def __exit__(self, *exc: object) -> None:
        self._lock.release()


def _call_if_alive(method: weakref.WeakMethod[Callable[[], None]]) -> None:
    bound = method()
    if bound is not None:
        bound()


def renewed_in_children(lock: threading.Lock) -> RenewedLock:
    """``lock``, released afresh in every forked child of this process (a new lock in
    its place there, :class:`RenewedLock`). Module-level locks the helper's work may take
    are made with this."""
    return RenewedLock(lock)


def can_fork() -> bool:
    """True when a forked helper can run on another CPU (Linux, two usable CPUs or more)."""
    if not sys.platform.startswith("linux") or not hasattr(os, "memfd_create"):
        return False
    try:
        return len(os.sched_getaffinity(0)) > 1
    except OSError:  # pragma: no cover - sched_getaffinity always works on Linux
        return (os.cpu_count() or 1) > 1


class Forked(Generic[_T]):
    """``work()``'s results, made by a forked child while this process goes on.

    Args:
        work: a function of no arguments yielding picklable results. It must only read
            what the parent built (it runs on a copy) and never call torch (but see
            :mod:`.compare_fork`, which sets torch to one thread before it does).
        enabled: False runs ``work`` in this process, as results are asked for. True
            forks when :func:`can_fork` says a second CPU is there; the caller vouches
            that no other thread of this process holds a lock ``work`` needs (a forked
            child has only the thread that forked, and a lock another thread held
            stays held there forever). None forks only when this process runs no other
            thread.

    Use it as a context manager: leaving the block stops a child whose results were not
    all taken (an error in the parent, Ctrl-C) and reaps it.

    Example::

        with Forked(lambda: (expensive(s) for s in snapshots)) as helper:
            other_work()
            first = next(helper)
            rest = list(helper)
    """

    def __init__(self, work: Callable[[], Iterator[_T]], *, enabled: bool | None = None) -> None:
        self._work = work
        self._pid: int | None = None
        self._frames_fd: int | None = None
        self._results_fd: int | None = None
        self._taken = 0
        self._local: Iterator[_T] | None = None
        #: how long this process waited for the child's results
        self.wait_seconds = 0.0
        #: how many results came from the child (the others were made here)
        self.from_helper = 0
        alone = threading.active_count() == 1
        if (enabled or (enabled is None and alone)) and can_fork():
            self._start()

    @property
    def started(self) -> bool:
        """True while a child process runs or has results not yet taken."""
        return self._pid is not None

    def _start(self) -> None:
        try:
            results_fd = os.memfd_create("freezeview-helper", os.MFD_CLOEXEC)
        except OSError:
            return
        read_fd, write_fd = os.pipe()
        # Ctrl-C is held across the fork: in the child it must not raise before the
        # child ignores it (it would unwind into the parent's code, running in the
        # child), and in the parent not before the child is known, to be stopped.
        mask = signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT})
        with warnings.catch_warnings():
            # Python 3.12+ warns about forking a process that has threads (the CLI's
            # progress spinner has one). The child only runs `work`, which takes no lock
            # another thread may hold (the engine's module locks are renewed_in_children).
            warnings.simplefilter("ignore", DeprecationWarning)
            try:
                pid = os.fork()
            except OSError:
                signal.pthread_sigmask(signal.SIG_SETMASK, mask)
                for fd in (results_fd, read_fd, write_fd):
                    os.close(fd)
                return
        if pid == 0:  # pragma: no cover - runs in the child, which never returns
            self._child(results_fd, read_fd, write_fd, mask)
        os.close(write_fd)
        self._pid, self._frames_fd, self._results_fd = pid, read_fd, results_fd
        try:
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
        except BaseException:  # a Ctrl-C that came during the fork
            self.close()
            raise

    def _child(
        self, results_fd: int, read_fd: int, write_fd: int, mask: set[int | signal.Signals]
    ) -> None:  # pragma: no cover - runs in the child only
        code = 1
        try:
            signal.signal(signal.SIGINT, signal.SIG_IGN)
            signal.pthread_sigmask(signal.SIG_SETMASK, mask)
            os.close(read_fd)
            offset = 0
            for item in self._work():
                data = memoryview(pickle.dumps(item, protocol=pickle.HIGHEST_PROTOCOL))
                start, rest = offset, data
                while rest:
                    written = os.pwrite(results_fd, rest, offset)
                    rest, offset = rest[written:], offset + written
                # 16 bytes: a pipe takes thousands of them before a write could wait.
                os.write(write_fd, _FRAME.pack(start, len(data)))
            os.write(write_fd, _DONE)
            code = 0
        except BaseException:  # any failure: the parent makes what is missing
            pass
        finally:
            os._exit(code)

    def __iter__(self) -> Iterator[_T]:
        return self

    def __next__(self) -> _T:
        """The next result: the child's, waiting for it, or made here after a failure."""
        if self._local is None and self._pid is not None:
            start = time.perf_counter()
            data = self._next_frame()
            self.wait_seconds += time.perf_counter() - start
            if data is not None:
                try:
                    value: _T = pickle.loads(data)
                except Exception:  # a torn result: the rest is made here
                    self.close()
                else:
                    self._taken += 1
                    self.from_helper += 1
                    return value
        if self._local is None:
            # No child, or it stopped early: make the results it did not send.
            self._local = itertools.islice(self._work(), self._taken, None)
        value = next(self._local)
        self._taken += 1
        return value

    def _next_frame(self) -> bytes | None:
        """The child's next result as bytes; None once it ended (then it is reaped)."""
        assert self._frames_fd is not None and self._results_fd is not None
        header = b""
        while len(header) < _FRAME.size:
            chunk = os.read(self._frames_fd, _FRAME.size - len(header))
            if not chunk:  # the child ended before sending all its results
                self._reap()
                return None
            header += chunk
        if header == _DONE:
            self._reap()
            self._local = iter(())
            return None
        offset, length = _FRAME.unpack(header)
        parts = []
        while length:
            part = os.pread(self._results_fd, length, offset)
            if not part:  # cannot happen to a memfd; if it did, the rest is made here
                self.close()
                return None
            parts.append(part)
            offset, length = offset + len(part), length - len(part)
        return b"".join(parts)

    def _reap(self) -> None:
        """Close the fds and wait for the child, which has ended or is about to."""
        self._close_fds()
        if self._pid is not None:
            pid, self._pid = self._pid, None
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def _close_fds(self) -> None:
        for fd in (self._frames_fd, self._results_fd):
            if fd is not None:
                os.close(fd)
        self._frames_fd = self._results_fd = None

    def close(self) -> None:
        """Stop and reap the child if it still runs (results not taken are made here)."""
        self._close_fds()
        if self._pid is not None:
            pid, self._pid = self._pid, None
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)
            with contextlib.suppress(ChildProcessError):
                os.waitpid(pid, 0)

    def __enter__(self) -> Forked[_T]:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
