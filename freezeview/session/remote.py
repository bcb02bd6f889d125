"""The app's torch work, in a child process: :class:`RemoteSession`.

``freezeview MODEL.pt`` keeps its screen in one process and every torch call in another.
torch holds the GIL through long calls (``torch.jit.load``, each freezing
pass), so in a thread of the screen's own process it stalls key handling and ``q``
cannot quit at once. In a child process the screen's event loop never waits for torch:

- the child imports torch and loads the model on the second core while Textual starts,
  so the loaded model's IR comes sooner than with a thread;
- ``q`` quits at once: the child is told to stop and, if torch does not let it, killed;
- a crash inside torch (a segfault on a damaged model) ends the child, not the app: the
  steps already shown stay, the app says what happened, and the next action starts a
  new child.

The screen process never imports torch: what crosses over is small and torch-free
(snapshots, inventories, the summaries in :mod:`freezeview.session.summaries`).

The protocol is pickled tuples over a socket pair (:mod:`multiprocessing.connection`
frames and pickles them; nothing else fits better, see
:func:`~freezeview.session.spawn.spawn_engine`):

- screen → engine: ``("init", path, options)`` once (a
  :class:`~freezeview.session.contract.SessionOptions`), then ``("call", id, method,
  args)`` for a method of :data:`~freezeview.session.contract.ENGINE_CALLS` (the
  protocol's), ``("cancel", id)`` and finally ``("close",)``;
- engine → screen: ``("item", id, value)`` for each streamed value, then
  ``("done", id, value)`` or ``("error", id, info)``; ``("warning", text)`` at any time.
  An explain's summaries come as a :class:`~freezeview.session.summaries_wire.SummariesSent`, the
  changes to the summaries sent before (decoded in order by the reader thread).

A run's steps carry no graph: the screen asks for a step's graph (``step_graph``, sent in
slices, :mod:`freezeview.session.graph_wire`) when it shows it, and for the frozen
module's ``.code`` (``final_code``) when the ``.code`` view shows it.

:class:`RemoteSession` keeps the :class:`~freezeview.session.contract.EngineSession`
contract, as :class:`~freezeview.session.local.Session` does, with the same blocking
behaviour (the screen calls it from workers). The child's side of the protocol is
:mod:`freezeview.session.engine_process`, which runs each call on a real ``Session``.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import pickle
import queue
import subprocess
import threading
import time
from collections.abc import Callable, Generator, Iterator, Mapping, Sequence
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.plumbing import BadInputError, FreezeviewError, OutputError, PlanError
from . import collector
from .contract import Preserved, SessionOptions, Written
from .graph_wire import load_in_slices
from .spawn import death_sentence, spawn_engine
from .summaries_wire import SummariesDecoder, SummariesSent

if TYPE_CHECKING:
    from ..engine.graph import GraphSnapshot, Inventory
    from .canvas import Canvas
    from .summaries import AttrSummary, MigrationSummary, NodeTimes, OpenedSummary, StepSummary

__all__ = ["ERROR_TYPES", "EngineError", "RemoteSession"]

ERROR_TYPES: dict[str, type[FreezeviewError]] = {
    cls.__name__: cls for cls in (FreezeviewError, BadInputError, PlanError, OutputError)
}
# How long a closing engine gets to leave by itself before it is killed: torch may hold
# the GIL so the engine cannot even read the request, and ``q`` must quit at once.
_CLOSE_GRACE = 0.05


class EngineError(FreezeviewError):
    """The engine process failed in a way freezeview did not foresee, or stopped."""

    def __init__(self, message: str, *, detail: str = "") -> None:
        super().__init__(message)
        #: The engine's Python traceback, when there was one.
        self.traceback = detail


@dataclasses.dataclass
class _Call:
    """One request in flight: where its answers go and which child it went to."""

    answers: queue.SimpleQueue[tuple[Any, ...]]
    generation: int


class RemoteSession:
    """A :class:`~freezeview.session.local.Session` living in a child process.

    Creating one starts the child at once, and the child starts loading the model at
    once, so call this as early as possible (the CLI does, before importing Textual).

    Args:
        path: the ``.pt`` file.
        options: how it is opened and run (the engine process imports and loads what
            they name before the model).
        on_warning: called (from a reader thread) with each warning torch raised.
    """

    def __init__(
        self,
        path: str | Path,
        options: SessionOptions | None = None,
        *,
        on_warning: Callable[[str], None] | None = None,
    ) -> None:
        self.path = Path(path)
        self.options = options if options is not None else SessionOptions()
        self.on_warning = on_warning
        #: The inventory from the last explanation (the inspector reads it).
        self.inventory: Inventory | None = None
        #: ``.code`` of the frozen module at the end of the last run (None before, and
        #: until :meth:`read_final_code` asked the engine for it).
        self.final_code: str | None = None
        self._last_run = 0
        self._opened: OpenedSummary | None = None
        self._lock = threading.Lock()
        self._ids = itertools.count(1)
        self._calls: dict[int, _Call] = {}
        self._generation = 0
        self._conn: Connection | None = None
        self._proc: subprocess.Popen[bytes] | None = None
        self._stderr: Any = None
        self._closed = False
        # The child that died between calls (its process and stderr), not yet reported.
        self._lost: tuple[subprocess.Popen[bytes], Any] | None = None
        # The current run's graphs taken from the engine, by key (StepSummary.graph); the
        # epoch counts the runs forgotten, so a late answer for an earlier run is not kept.
        self._graphs: dict[int, GraphSnapshot] = {}
        self._epoch = 0
        # Graphs on their way: key -> set when it has arrived (or failed).
        self._fetching: dict[int, threading.Event] = {}
        with self._lock:
            self._start()

    # -- the child process -------------------------------------------------------------
    def _start(self) -> None:
        """Start a child (the lock is held)."""
        self._generation += 1
        self._graphs = {}
        self._epoch += 1
        self._opened = None
        conn, proc, stderr = spawn_engine()
        self._conn, self._proc, self._stderr = conn, proc, stderr
        conn.send(("init", self.path, self.options))
        threading.Thread(
            target=self._read,
            args=(conn, proc, stderr, self._generation),
            name="freezeview-engine-reader",
            daemon=True,
        ).start()

    def _read(
        self, conn: Connection, proc: subprocess.Popen[bytes], stderr: Any, generation: int
    ) -> None:
        """Hand each message from one child to the call waiting for it."""
        # An explain's summaries come as changes to the last ones: every summaries message of
        # this child is decoded, in order, even one nobody waits for any more.
        summaries = SummariesDecoder()
        try:
            while True:
                # No local name holds a message while the next is awaited: the last one
                # (a step's graph) would stay alive until the next message came.
                self._deliver(_receive(conn), summaries)
        except (EOFError, OSError):
            pass
        with self._lock:
            if self._conn is conn:
                self._conn = None
            waiting = [(rid, c) for rid, c in self._calls.items() if c.generation == generation]
            closing = self._closed
            if not waiting and not closing:
                # Nobody was waiting (it died between calls): the next call says so.
                self._lost = (proc, stderr)
        if not waiting:
            return
        sentence = "freezeview is closing." if closing else death_sentence(proc, stderr)
        for rid, call in waiting:
            call.answers.put(("error", rid, ("EngineError", sentence, None, "")))

    def _deliver(self, message: tuple[Any, ...], summaries: SummariesDecoder) -> None:
        """One message from the child, to the call waiting for it (or kept here)."""
        if message[0] in ("item", "done") and isinstance(message[2], SummariesSent):
            message = (message[0], message[1], summaries.decode(message[2]))
        if message[0] == "warning":
            if self.on_warning is not None:
                self.on_warning(str(message[1]))
        else:
            call = self._calls.get(message[1])
            if call is not None:
                call.answers.put(message)

    @property
    def pid(self) -> int | None:
        """The engine process's id (None once closed)."""
        return self._proc.pid if self._proc is not None and not self._closed else None

    def close(self) -> None:
        """Stop the engine process now (torch work in flight is abandoned)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            conn, proc = self._conn, self._proc
            self._conn = None
            if conn is not None:
                with contextlib.suppress(OSError):
                    conn.send(("close",))
        if proc is not None:
            try:
                proc.wait(timeout=_CLOSE_GRACE)
            except subprocess.TimeoutExpired:
                proc.kill()
                # A killed process holding a big model takes a while to free its memory;
                # nobody needs to watch that, only to collect its exit status.
                threading.Thread(
                    target=proc.wait, name="freezeview-engine-reap", daemon=True
                ).start()
        if conn is not None:
            conn.close()
        if self._stderr is not None:
            self._stderr.close()

    # -- calls ---------------------------------------------------------------------------
    def _send(self, message: tuple[Any, ...]) -> None:
        with self._lock:
            if self._conn is not None:
                with contextlib.suppress(OSError):
                    self._conn.send(message)

    def _request(self, method: str, *args: Any) -> tuple[int, _Call]:
        with self._lock:
            if self._closed:
                raise EngineError("freezeview is closing.")
            if self._conn is None and self._lost is not None:
                # The child died while nobody was waiting for it: whatever asks first
                # learns why (as a call in flight would have), the next one restarts.
                proc, stderr = self._lost
                self._lost = None
                raise EngineError(death_sentence(proc, stderr))
            if self._conn is None:
                self._start()  # the last child stopped (a crash): start a new one
            assert self._conn is not None
            rid = next(self._ids)
            call = _Call(queue.SimpleQueue(), self._generation)
            self._calls[rid] = call
            # If the child is gone, the reader thread reports its end to this call.
            with contextlib.suppress(OSError):
                self._conn.send(("call", rid, method, args))
        return rid, call

    def _answers(
        self,
        rid: int,
        call: _Call,
        cancel: threading.Event | None = None,
        timeout: float | None = None,
    ) -> Generator[Any, None, Any]:
        """Values the call streams; its final value is the generator's return value.

        With ``timeout`` (seconds from now), :class:`TimeoutError` once it has passed
        without the call's end; the engine is told to drop the call, as for a cancel.
        """
        done = False
        deadline = None if timeout is None else time.monotonic() + timeout
        try:
            while True:
                if cancel is not None and cancel.is_set():
                    return None  # answers already on their way are dropped
                wait = 0.05 if cancel is not None else None
                if deadline is not None:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        raise TimeoutError(
                            f"freezeview's engine did not answer within {timeout:g} s."
                        )
                    wait = left if wait is None else min(wait, left)
                try:
                    message = call.answers.get(timeout=wait)
                except queue.Empty:
                    continue
                if message[0] == "item":
                    yield message[2]
                elif message[0] == "done":
                    done = True
                    return message[2]
                else:
                    done = True
                    raise _rebuild(message[2])
        finally:
            self._calls.pop(rid, None)
            if not done:
                self._send(("cancel", rid))

    def _call(self, method: str, *args: Any, timeout: float | None = None) -> Any:
        rid, call = self._request(method, *args)
        stream = self._answers(rid, call, timeout=timeout)
        while True:
            try:
                next(stream)
            except StopIteration as end:
                return end.value

    # -- what the screen calls (the names and meanings of Session's) ---------------------
    @property
    def name(self) -> str:
        """Display name of the model."""
        return self._opened.name if self._opened is not None else self.path.name

    def open(self) -> OpenedSummary:
        """Load the model (the engine began at start-up) and describe it."""
        opened: OpenedSummary = self._call("open")
        self._opened = opened
        return opened

    def check_plan(self, preserved: Preserved, display: str) -> None:
        """Wait for the model to load and check the preserved names (the CLI's check
        before the screen shows): raises the load's error, or PlanError with explain's
        sentence for a name the model does not have."""
        self._call("check_plan", preserved, display)

    def explain(
        self,
        preserved: Preserved,
        statuses: Callable[[list[AttrSummary]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> list[AttrSummary]:
        """Every attribute's verdict with ``preserved`` as ``preserved_attrs``; torch's
        statuses (reasons pending) go to ``statuses`` first when the engine has them
        before the reasons. A ``cancel`` set stops the engine's replay (the summaries given
        to ``statuses``, or none, are returned)."""
        rid, call = self._request("explain", preserved)
        stream = self._answers(rid, call, cancel)
        shown: list[AttrSummary] = []
        try:
            while True:
                try:
                    summaries, inventory = next(stream)
                except StopIteration as end:
                    if end.value is None:  # cancelled
                        return shown
                    summaries, inventory = end.value
                    self._take_inventory(inventory)
                    return list(summaries)
                self._take_inventory(inventory)
                shown = list(summaries)
                if statuses is not None:
                    statuses(shown)
        finally:
            stream.close()  # a cancelled explain stops the engine's replay now

    def _take_inventory(self, inventory: Inventory | None) -> None:
        if inventory is not None:  # sent with the first explanation only
            self.inventory = inventory

    def run_steps(
        self,
        preserved: Preserved,
        passes: tuple[str, ...],
        profile: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[StepSummary]:
        """Freeze with the given plan one step at a time (a blocking generator)."""
        rid, call = self._request("run_steps", preserved, passes, profile)
        self.final_code = None
        self._last_run = rid
        stream = self._answers(rid, call, cancel)
        try:
            while True:
                try:
                    summary: StepSummary = next(stream)
                except StopIteration:
                    return
                yield summary
        finally:
            stream.close()  # a consumer that stops early cancels the engine's run now

    def step_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of the last run's graph ``key`` (a step's ``graph``): kept here
        once taken, else asked of the engine, which snapshots it now (blocking; None if
        a re-run started meanwhile)."""
        while True:
            with self._lock:
                known = self._graphs.get(key)
                if known is not None:
                    return known
                # One transfer a graph: a second asker (the diff view wanting the graph
                # the IR view is taking) waits for the first, not for a copy of its own
                # (and asks itself if the first failed).
                other = self._fetching.get(key)
                if other is None:
                    fetching = self._fetching[key] = threading.Event()
                    break
            other.wait()
        epoch = self._epoch
        try:
            rid, call = self._request("step_graph", key)
            # Unpickled a slice at a time (the event loop gets the GIL in between),
            # abandoned once a re-run starts.
            slices = list(self._answers(rid, call))
            snapshot = load_in_slices(slices, stale=lambda: epoch != self._epoch)
            del slices
            with self._lock:
                if snapshot is not None and epoch == self._epoch:
                    snapshot = self._graphs.setdefault(key, snapshot)
        finally:
            with self._lock:
                self._fetching.pop(key, None)
            fetching.set()
        return snapshot

    def node_times(self, key: int) -> NodeTimes | None:
        """Each node's time in the last run's graph ``key``, when the run profiled it
        (asked of the engine; blocking)."""
        times: NodeTimes | None = self._call("node_times", key)
        return times

    def known_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of graph ``key`` if this side has it already (never blocks)."""
        return self._graphs.get(key)

    def read_final_code(self, timeout: float | None = None) -> str | None:
        """``.code`` of the last run's frozen module, read by the engine when first asked
        (blocking, for workers: torch prints it, slowly for a large model, so never
        after a run nobody looks at the ``.code`` of). None before a run has ended, or
        when it failed; :class:`TimeoutError` if the engine has not answered within
        ``timeout`` seconds (None: wait as long as it takes)."""
        run = self._last_run
        if self.final_code is None and run:
            code: str | None = self._call("read_final_code", timeout=timeout)
            if run == self._last_run:
                self.final_code = code
        return self.final_code

    @staticmethod
    def diff_text(before: GraphSnapshot, after: GraphSnapshot, a: str, b: str) -> str:
        """Unified IR diff between two snapshots (torch-free: computed here)."""
        from ..engine.diff import unified_ir_diff

        return unified_ir_diff(before, after, before_label=a, after_label=b)

    def forget_runs(self) -> list[GraphSnapshot]:
        """Let go of the earlier runs' graphs this side holds by key (a new run starts:
        they are never asked for again, and the screen frees them before it collects);
        returns them, for the caller to free (:func:`~freezeview.session.collector.let_go`)."""
        with self._lock:
            dropped, self._graphs = self._graphs, {}
            self._epoch += 1
        return list(dropped.values())

    def render_step(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        out_dir: Path,
        stem: str,
    ) -> Written:
        """Write the step's graph (and its diff against ``before``) into ``out_dir``; a
        graph is a step's key (the engine has it) or a snapshot (sent whole)."""
        written: Written = self._call("render_step", before, after, Path(out_dir), stem)
        return written

    def graph_canvas(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
        rows: int | None = None,
    ) -> Canvas | None:
        """The step's graph (or its diff against ``before``) laid out and drawn for the
        graph view: the diff, dot and the drawing run in the engine process (None when
        another layout was asked for before this one was made)."""
        canvas: Canvas | None = self._call(
            "graph_canvas", before, after, level, tuple(expand), dict(reasons or {}), rows
        )
        return canvas

    def graph_picture(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
    ) -> Path:
        """The graph view's picture as a PNG drawn by Graphviz in the engine process."""
        path: Path = self._call(
            "graph_picture", before, after, level, tuple(expand), dict(reasons or {})
        )
        return Path(path)

    def export(self, out_dir: Path, preserved: Preserved, passes: tuple[str, ...]) -> Written:
        """Write everything ``freezeview export`` writes into ``out_dir``."""
        written: Written = self._call("export", Path(out_dir), preserved, passes)
        return written

    def migrate(
        self, output: Path | None = None, force: bool = False, again: bool = False
    ) -> MigrationSummary:
        """``freezeview migrate`` in the engine process (whose converter runs in a child
        process of its own), run once (``again`` runs it anew); with ``output``, the
        program written there when it behaves the same, or with ``force``."""
        found: MigrationSummary = self._call(
            "migrate", Path(output) if output is not None else None, force, again
        )
        return found


# A message this large (a big graph's snapshot) is unpickled with the collector paused.
_LARGE_MESSAGE = 1 << 16


def _receive(conn: Connection) -> Any:
    """The next message. A snapshot is tens of thousands of small objects: built with
    the cyclic collector running, young collections rescan them again and again (a
    big graph unpickles several times faster paused). In the app, what
    it built joins the objects the screen keeps frozen (session/collector.py)."""
    data = conn.recv_bytes()
    if len(data) < _LARGE_MESSAGE:
        return pickle.loads(data)
    with collector.paused():
        return pickle.loads(data)


def _rebuild(info: tuple[str, str, str | None, str]) -> FreezeviewError:
    """The engine's error, as the exception the screen handles."""
    name, message, hint, detail = info
    cls = ERROR_TYPES.get(name)
    if cls is not None:
        return cls(message, hint=hint)
    if name == "EngineError":
        return EngineError(message, detail=detail)
    first = (message.strip().splitlines() or [name])[0]
    return EngineError(f"{name}: {first[:200]}", detail=detail)
