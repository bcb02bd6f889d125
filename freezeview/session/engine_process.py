"""The engine process: the child side of :class:`~freezeview.session.remote.RemoteSession`.

``python -m freezeview.session.engine_process FD`` reads the screen's requests from the
socket ``FD`` (the protocol is in :mod:`freezeview.session.remote`), runs each on a
real :class:`~freezeview.session.local.Session` in its own thread, streams the answers back
and forwards every warning. Only this process imports torch. Once torch's leftovers of
re-runs have grown it by :data:`RELOAD_MARGIN` over its size after the first run, it
loads the model anew while idle (:meth:`_Engine.watch_memory`).
"""

from __future__ import annotations

import contextlib
import gc
import inspect
import os
import sys
import threading
import traceback
import warnings
from collections.abc import Callable, Iterator
from functools import partial
from multiprocessing.connection import Connection
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.graph import GraphSnapshot
from ..engine.plumbing import FreezeviewError, give_back_freed_memory, resident_bytes
from .contract import ENGINE_CALLS, SessionOptions
from .graph_wire import dump_in_slices
from .remote import ERROR_TYPES, EngineError
from .summaries import AttrSummary
from .summaries_wire import SummariesEncoder

if TYPE_CHECKING:
    from .local import Session

__all__ = ["IDLE_RELOAD", "RELOAD_MARGIN", "RELOAD_RUNS", "error_info", "forward_warnings", "serve"]

#: How much the engine process may grow over its size after the first run before it
#: loads the model anew (:meth:`_Engine.watch_memory`). (A smaller margin had a model of
#: many small classes reload every RELOAD_RUNS runs, and rest above the margin when the
#: last run set a reload off.)
RELOAD_MARGIN = 0.08
#: Runs of the steps at least between two loads (and before the first) while the user
#: goes on running: a load holds the engine's GIL most of its time, and a run after it
#: makes its inline and fold steps anew instead of showing the last run's again. (More
#: runs between loads let the engine grow much further, for no re-run measurably
#: faster.)
RELOAD_RUNS = 5
#: Seconds without a call after which an engine over its limit loads the model anew,
#: however few runs ago the last load was: nobody waits on the engine then.
IDLE_RELOAD = 1.0


def error_info(exc: BaseException) -> tuple[str, str, str | None, str]:
    """An exception as the tuple the screen rebuilds it from (name, message, hint, detail)."""
    if isinstance(exc, FreezeviewError):
        # Subclasses elsewhere in the engine travel as their nearest known class.
        name = next(c.__name__ for c in type(exc).__mro__ if c.__name__ in ERROR_TYPES)
        return (name, exc.detail, exc.hint, "")
    return (type(exc).__name__, str(exc), None, traceback.format_exc())


class _Engine:
    """Runs the screen's calls on a real Session, each in its own thread."""

    def __init__(
        self, path: Path, options: SessionOptions, send: Callable[[tuple[Any, ...]], None]
    ) -> None:
        self.session: Session | None = None
        self.send = send
        self.cancels: dict[int, threading.Event] = {}
        # Work a call leaves for after its answer (see _after_call).
        self._after: dict[int, Callable[[], None] | None] = {}
        self._inventory_sent: Any = None
        # Summaries go as changes to the last summaries sent: encoded and sent under one lock.
        self._summaries = SummariesEncoder()
        self._summaries_lock = threading.Lock()
        self._open_error: BaseException | None = None
        self._open_done = threading.Event()
        # Calls under way, and whether the model loaded anew is being put in place (no
        # call starts meanwhile): see watch_memory.
        self._idle = threading.Condition()
        self._active = 0
        self._calls = 0  # calls started so far (a reload when idle waits for none to)
        self._switching = False
        # The process's size after the first run, the size it may grow to before the
        # model is loaded again, and the reload under way (if any).
        self._first = 0
        self._limit: float | None = None
        self._reload: threading.Thread | None = None
        self._reloads_possible = True
        # Models put in place so far, and the least size of the runs since the last.
        self._swaps = 0
        self._rest = 0
        self._over = False  # the last size measured was over the limit
        self._runs = -1  # runs ended since the first one, or since the last reload
        # Off the main thread, which must stay free to read "close" while torch imports.
        threading.Thread(
            target=self._open, args=(path, options), name="freezeview-open", daemon=True
        ).start()

    @property
    def _session(self) -> Session:
        """The session, for the engine's own work after a call or a run (which come
        only after the model opened)."""
        assert self.session is not None
        return self.session

    def _open(self, path: Path, options: SessionOptions) -> None:
        # Loading starts before the screen asks: the screen is still starting Textual.
        try:
            from .local import Session  # imports torch: only the engine process does

            # The run's .code is read when the screen's .code view asks (read_final_code).
            self.session = Session(path=path, options=options, code_at_end=False)
            self.session.open()
            # The loaded model, torch's and freezeview's modules stay for the process's
            # life: out of every later collection's walk (see _send_final_code).
            gc.freeze()
        except BaseException as exc:
            self._open_error = exc
        finally:
            self._open_done.set()

    def handle(self, rid: int, method: str, args: tuple[Any, ...]) -> None:
        """Run one call of :data:`~.contract.ENGINE_CALLS` on the session and send its
        answer: what a method yields goes as items, what it returns as the answer."""
        with self._idle:
            while self._switching:  # the switch only: the new model is loaded already
                self._idle.wait()
            self._active += 1
            self._calls += 1
        try:
            if method not in ENGINE_CALLS:
                raise EngineError(f"the engine has no call named {method!r}.")
            self._open_done.wait()
            if self.session is None:  # torch or freezeview's engine failed to import
                raise self._open_error or EngineError("the engine did not start.")
            if self._open_error is not None:
                raise self._open_error
            call = getattr(self.session, method)
            params = inspect.signature(call).parameters
            extra: dict[str, Any] = {}
            if "cancel" in params:
                extra["cancel"] = self.cancels.setdefault(rid, threading.Event())
            if "statuses" in params:
                extra["statuses"] = self._summaries_streamed(rid)
            # Set before the call, as a failed run leaves garbage to collect too.
            self._after[rid] = self._after_call(method)
            value = call(*args, **extra)
            if isinstance(value, Iterator):
                for item in value:
                    self.send(("item", rid, item))
                value = None
            elif isinstance(value, GraphSnapshot):
                # In slices: the screen unpickles a big graph a slice at a time.
                for piece in dump_in_slices(value):
                    self.send(("item", rid, piece))
                value = None
        except BaseException as exc:
            self.send(("error", rid, error_info(exc)))
        else:
            if isinstance(value, list) and all(isinstance(v, AttrSummary) for v in value):
                # A toggle changes a few of many summaries: only those cross.
                self._send_summaries("done", rid, value, self._inventory_once())
            else:
                self.send(("done", rid, value))
        finally:
            self.cancels.pop(rid, None)
            after = self._after.pop(rid, None)
            with self._idle:
                self._active -= 1
                self._idle.notify_all()
        if after is not None:
            # What the screen waits for has been answered; this is extra.
            with contextlib.suppress(Exception):
                after()

    def _after_call(self, method: str) -> Callable[[], None] | None:
        """The engine's own work once a call is answered: after a run of the steps, or
        an explain (whose replay of the reasons may end after a run's collection), what
        they let go of is collected and the process's size watched."""
        if method == "run_steps":
            return partial(self._after_run, ran=True, swaps=self._swaps)
        if method == "explain":
            return partial(self._after_run, ran=False)
        return None

    def _summaries_streamed(self, rid: int) -> Callable[[list[AttrSummary]], None]:
        """An explain's ``statuses``: torch's statuses at once, reasons pending, as an
        item of the call; the summaries with the reasons are its answer."""

        def statuses(summaries: list[AttrSummary]) -> None:
            self._send_summaries("item", rid, summaries, self._inventory_once(), pending=True)

        return statuses

    def _send_summaries(
        self, kind: str, rid: int, summaries: list[Any], inventory: Any, pending: bool = False
    ) -> None:
        # A toggle changes a few of many summaries: only those cross (summaries_wire).
        with self._summaries_lock:
            self.send((kind, rid, self._summaries.encode(summaries, inventory, pending)))

    def _inventory_once(self) -> Any:
        # The module tree is the model's, the same for every plan: sent once, not with
        # each preserved attribute toggled (on a big model it is megabytes pickled).
        inventory = self._session.inventory
        if inventory is self._inventory_sent:
            return None
        self._inventory_sent = inventory
        return inventory

    def _after_run(self, ran: bool = True, swaps: int | None = None) -> None:
        # The run's pipeline, steps and torch freeze are let go of by now (but the frozen
        # module its .code is read from), some of them in reference cycles: collected
        # here, once a run, or the engine grows with every re-run, and the C heap's freed
        # pages given back (else the next run's graphs take new pages now and then, and
        # the process grows in jumps). The screen has every step and is not waiting for
        # this.
        gc.collect()
        give_back_freed_memory()
        self.watch_memory(swaps if ran else None)

    def watch_memory(self, run_from: int | None) -> None:
        """Load the model anew once this process has grown :data:`RELOAD_MARGIN` over
        its size after the first run (``run_from``: a run of the steps just ended, which
        started with that many reloads done; None after an explain).

        What grows is torch's: each freeze registers its clone's class types, methods
        and graphs in the loaded model's compilation unit for good
        (:meth:`~freezeview.session.local.Session.load_again`). The model is loaded in the
        background while calls go on with the old one; it is put in place when no call
        is under way, and a call that arrives meanwhile waits for that (a moment).

        While the user goes on running, loads are :data:`RELOAD_RUNS` runs apart; once
        no call has come for :data:`IDLE_RELOAD` seconds, an engine over its limit loads
        the model anew however few runs ago the last load was, and lets the old model
        go at the switch (:meth:`_load_again`).
        """
        size = resident_bytes()
        if size is None or not self._reloads_possible or self.session is None:
            return
        if run_from is not None:
            self._runs += 1
        if self._limit is None:
            if run_from is not None:  # the size after the first run
                self._limit = size * (1 + RELOAD_MARGIN)
                self._first = size
            return
        if run_from is not None and not self._swaps and self._runs < RELOAD_RUNS:
            # The size to grow from is the least after the first runs (none may reload
            # anyway): one measured while other work of the engine's was under way is
            # no rest size (read too high, it let the engine grow far past the margin
            # before its first reload).
            self._first = min(self._first, size)
            self._limit = self._first * (1 + RELOAD_MARGIN)
        if self._swaps and run_from == self._swaps and self._runs <= RELOAD_RUNS:
            # The old model went at the start of the first run after the reload (with
            # the last run's graphs). What the process holds beside its model (the
            # explanations kept, ...) stays with a reload: the next one waits until it
            # has grown half the margin over the least size of the runs since, too.
            self._rest = min(self._rest, size)
            rest = self._rest * (1 + RELOAD_MARGIN / 2)
            self._limit = max(self._first * (1 + RELOAD_MARGIN), rest)
        over_before, self._over = self._over, size > self._limit
        # While a call is under way its own memory counts too: over the limit twice in
        # a row, then.
        if not self._over or (self._active and not over_before):
            return
        if self._runs >= RELOAD_RUNS:
            self._start_reload()
        elif self._runs >= 1:
            # Too soon for a user who goes on running; once they stop, the memory goes
            # back all the same.
            self._when_idle(self._reload_if_idle)

    def _when_idle(self, then: Callable[[int], None]) -> None:
        """Call ``then(calls)`` :data:`IDLE_RELOAD` seconds from now, with the number of
        calls started so far (it does nothing if another has started since)."""
        timer = threading.Timer(IDLE_RELOAD, then, args=(self._calls,))
        timer.daemon = True
        timer.start()

    def _reload_if_idle(self, calls: int) -> None:
        """Load the model anew if no call has started since ``calls`` and the process is
        still over its limit (:data:`IDLE_RELOAD`)."""
        with self._idle:
            quiet = self._calls == calls and not self._active and not self._switching
        size = resident_bytes()
        if quiet and size is not None and self._limit is not None and size > self._limit:
            self._start_reload(idle=True)

    def _start_reload(self, idle: bool = False) -> None:
        if self._reload is not None and self._reload.is_alive():
            return
        self._reload = threading.Thread(
            target=self._load_again, args=(idle,), name="freezeview-reload", daemon=True
        )
        self._reload.start()

    def _load_again(self, idle: bool = False) -> None:
        try:
            fresh = self._session.load_again()
        except Exception:  # never the user's call: the session keeps its model
            fresh = None
        if fresh is None:
            self._reloads_possible = False  # the file changed on disk (or is gone)
            return
        if idle:
            # The last run's frozen module, kept for its .code, is a clone of the old
            # model and holds its compilation unit, with every freeze's leftovers: its
            # .code read now (holding the GIL, while nobody waits), the old model goes
            # at the switch rather than at the next run, and the memory at rest with it.
            # A user at work runs again soon anyway; if they stop, it is read then
            # (_let_go_if_idle).
            self._session.read_final_code()
        with self._idle:
            while self._active:
                self._idle.wait()
            self._switching = True
        try:
            self._session.take_reloaded(fresh)
            del fresh
            self._swaps += 1
            self._runs, self._rest = 0, sys.maxsize
            # The old model goes with the last run's graphs (the next run's start), or
            # now; what the switch let go of is collected either way.
            gc.collect()
            give_back_freed_memory()
        finally:
            with self._idle:
                self._switching = False
                self._idle.notify_all()
        self._when_idle(self._let_go_if_idle)

    def _let_go_if_idle(self, calls: int) -> None:
        """After a reload: if no call has started since ``calls``, the last run (on the
        old model) is still the last, and holds the old model. Its frozen module, kept
        for its .code, is a clone of it: (after a reload at work) its .code is read and
        the clone let go. Its torch graphs share the C heap's pages with what the old
        model let go of: the small ones become snapshots (Session.settle_last_run), so
        those pages can be given back (it shows on a model of many small classes whose
        last re-run set a reload off).
        Without a reload there is nothing of the old model for them to hold back."""
        with self._idle:
            if self._calls != calls or self._active or self._switching:
                return
            self._active += 1  # no switch meanwhile
        try:
            self._session.settle_last_run(stop=lambda: self._calls != calls)
            self._session.read_final_code()
            gc.collect()
            give_back_freed_memory()
        finally:
            with self._idle:
                self._active -= 1
                self._idle.notify_all()

    def cancel(self, rid: int) -> None:
        """Ask a running call to stop at its next step."""
        event = self.cancels.get(rid)
        if event is not None:
            event.set()


def forward_warnings(send: Callable[[tuple[Any, ...]], None]) -> None:
    """Send every warning raised in this process to the screen (its help screen lists
    them; printed, they would land on nobody's terminal)."""

    def show(message: Any, category: type[Warning], *args: Any, **kwargs: Any) -> None:
        send(("warning", f"{category.__name__}: {message}"))

    warnings.simplefilter("default")
    warnings.showwarning = show  # type: ignore[assignment]


def serve(fd: int) -> None:
    """The engine process's main loop (``python -m freezeview.session.engine_process FD``)."""
    conn = Connection(fd)
    send_lock = threading.Lock()

    def send(message: tuple[Any, ...]) -> None:
        with send_lock:
            try:
                conn.send(message)
            except OSError:
                os._exit(0)  # the screen is gone: nobody to answer

    try:
        kind, path, options = conn.recv()
    except (EOFError, OSError, ValueError):
        return
    if kind != "init":
        return

    forward_warnings(send)
    engine = _Engine(path, options, send)
    while True:
        try:
            message = conn.recv()
        except (EOFError, OSError):
            break
        if message[0] == "call":
            rid, method, args = message[1], message[2], message[3]
            engine.cancels[rid] = threading.Event()
            threading.Thread(target=engine.handle, args=(rid, method, args), daemon=True).start()
        elif message[0] == "cancel":
            engine.cancel(message[1])
        elif message[0] == "close":
            break
    # Leave now, without waiting for torch work in flight: its results have no reader.
    # Files are written atomically, so an abandoned export leaves no partial file.
    os._exit(0)


if __name__ == "__main__":
    serve(int(sys.argv[1]))
