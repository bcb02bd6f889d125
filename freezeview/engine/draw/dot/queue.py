"""Graphviz runs in the background, one at a time, while freezeview goes on.

Graphviz's ``dot`` is a program of its own: while it lays out one picture, this process
can explain the freeze, build the next picture's DOT or write the page. An export of a
48-layer transformer spends about as long in ``dot`` (four pictures, 8 s) as in its own
Python work after the freeze, so running them side by side on a two-core machine takes
most of that off the wall time.

A :class:`DotQueue` runs the jobs handed to it on one worker thread, one ``dot`` at a
time in the order given: two layouts at once on a busy machine would each take longer,
and a layout is timed against ``RenderOptions.timeout`` from its own start. Only when
the caller waits for a result (it has nothing else to do) does the caller's thread run
the next job still queued itself, so the machine's two cores draw two pictures.

The worker only waits on a child process, which releases the interpreter; it touches no
freezeview state. A job's outcome (bytes, or the Graphviz error) is kept for the one who
asks; leaving the queue's block stops the jobs not started and kills the ``dot`` still
running (Ctrl-C, an error), so no layout outlives the export that asked for it.
"""

from __future__ import annotations

import contextlib
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from types import TracebackType

__all__ = ["DotJob", "DotQueue", "tracked"]

# Graphviz processes running now, by any thread: a queue that is closed early kills the
# ones its jobs started (see tracked()).
_RUNNING: dict[int, tuple[subprocess.Popen[bytes], int]] = {}
_RUNNING_LOCK = threading.Lock()
_KILLED: set[int] = set()  # queues closed by an error: what their jobs start is killed
_OWNER = threading.local()


@contextlib.contextmanager
def tracked(proc: subprocess.Popen[bytes]) -> Iterator[None]:
    """Remember ``proc`` while it runs, so that the queue whose job started it can kill it."""
    owner = getattr(_OWNER, "queue", 0)
    with _RUNNING_LOCK:
        _RUNNING[proc.pid] = (proc, owner)
        killed = owner in _KILLED
    if killed:  # its queue was closed between the job's start and this process's
        with contextlib.suppress(OSError):
            proc.kill()
    try:
        yield
    finally:
        with _RUNNING_LOCK:
            _RUNNING.pop(proc.pid, None)


@dataclass
class DotJob:
    """One ``dot`` run asked for: the function that runs it, and what came out.

    A job is run once, by whichever thread claims it first (:meth:`claim`): the queue's
    worker, or a caller of :meth:`DotQueue.wait` with nothing else to do.

    Attributes:
        run: runs Graphviz and returns its output (it raises Graphviz's errors).
        seconds: how long the run took (set once done).
    """

    run: Callable[[], bytes]
    seconds: float = 0.0
    _claimed: bool = False
    _data: bytes | None = None
    _error: BaseException | None = None
    _done: threading.Event = field(default_factory=threading.Event)

    def claim(self) -> bool:
        """Take the job to run (or to drop): True for the first caller only.

        Not a lock of its own: callers claim under their queue's lock.
        """
        if self._claimed:
            return False
        self._claimed = True
        return True

    def execute(self, owner: int) -> None:
        """Run the claimed job in this thread for queue ``owner`` (whose closing kills the
        Graphviz process it starts), keeping its output or the error it raised."""
        _OWNER.queue = owner
        start = time.perf_counter()
        try:
            self._data = self.run()
        except BaseException as exc:  # kept for the caller, who raises it
            self._error = exc
        finally:
            self.seconds = time.perf_counter() - start
            _OWNER.queue = 0
            self._done.set()

    def fail(self, error: BaseException) -> None:
        """End the claimed job without running it: :meth:`result` raises ``error``."""
        self._error = error
        self._done.set()

    @property
    def done(self) -> bool:
        """True once the job ran (or failed without running)."""
        return self._done.is_set()

    def wait_done(self) -> None:
        """Block until the job is done, whichever thread runs it."""
        self._done.wait()

    def result(self) -> bytes:
        """The output of the finished job; raises what its run raised."""
        if self._error is not None:
            raise self._error
        assert self._data is not None
        return self._data


class DotQueue:
    """Graphviz jobs run one at a time on a worker thread, in the order submitted.

    Args:
        background: False runs every job at once in the submitting thread (what
            :func:`~freezeview.engine.draw.pictures.render.render_snapshot` and its siblings do
            when no queue is given).

    Example::

        with DotQueue() as dots:
            job = dots.submit(lambda: run_dot(source, "svg", options))
            other_work()
            data = dots.wait(job)
    """

    def __init__(self, *, background: bool = True) -> None:
        self._jobs: deque[DotJob] = deque()
        self._lock = threading.Lock()
        self._ready = threading.Condition(self._lock)
        self._closed = False
        self._id = id(self)
        #: how long callers of wait() waited for Graphviz (or ran it themselves)
        self.wait_seconds = 0.0
        self._thread: threading.Thread | None = None
        if background:
            self._thread = threading.Thread(target=self._work, name="freezeview-dot", daemon=True)
            self._thread.start()

    def submit(self, run: Callable[[], bytes]) -> DotJob:
        """Queue ``run`` (a Graphviz run); returns its job, to :meth:`wait` for."""
        job = DotJob(run)
        if self._thread is None:
            job.claim()
            job.execute(self._id)
            return job
        with self._ready:
            if self._closed:
                raise RuntimeError("the Graphviz queue is closed")
            self._jobs.append(job)
            self._ready.notify()
        return job

    def wait(self, job: DotJob) -> bytes:
        """``job``'s output, once it ran; raises what the run raised.

        While ``job`` is not done, this thread runs jobs nobody started yet (``job``
        first, if it is one of them), so a caller with nothing else to do draws too.
        """
        start = time.perf_counter()
        while not job.done:
            taken = self._claim(job)
            if taken is None:
                job.wait_done()
            else:
                taken.execute(self._id)
        if self._thread is not None:  # without a worker, the run was the caller's own work
            self.wait_seconds += time.perf_counter() - start
        return job.result()

    def _claim(self, preferred: DotJob | None = None) -> DotJob | None:
        """A queued job nobody runs yet (``preferred`` if it is one), now claimed."""
        with self._lock:
            if preferred is not None and preferred.claim():
                return preferred
            while self._jobs:
                job = self._jobs.popleft()
                if job.claim():
                    return job
        return None

    def _work(self) -> None:
        while True:
            with self._ready:
                while not self._jobs and not self._closed:
                    self._ready.wait()
                if self._closed:
                    return
            job = self._claim()
            if job is not None:
                job.execute(self._id)

    def close(self, *, kill: bool = False) -> None:
        """Stop the worker: jobs not started are dropped; with ``kill``, running
        Graphviz processes this queue started are killed, else they are waited for."""
        with self._ready:
            self._closed = True
            dropped = list(self._jobs)
            self._jobs.clear()
            self._ready.notify_all()
        for job in dropped:
            if job.claim():
                job.fail(RuntimeError("the Graphviz queue was closed first"))
        if kill:
            with _RUNNING_LOCK:
                _KILLED.add(self._id)
                mine = [proc for proc, owner in _RUNNING.values() if owner == self._id]
            for proc in mine:
                with contextlib.suppress(OSError):
                    proc.kill()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        with _RUNNING_LOCK:
            _KILLED.discard(self._id)

    def __enter__(self) -> DotQueue:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close(kill=exc_type is not None)
