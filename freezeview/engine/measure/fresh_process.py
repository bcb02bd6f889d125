"""Fresh Python processes for the round trip, each a fork of one that imported torch only.

The round trip (:mod:`.portability`) loads the saved file in a process that has nothing
of freezeview's, so that what loads and runs there would load and run anywhere torch is.
Starting a new interpreter for each one spends most of its time importing torch, again
for every run of a session. Here one interpreter is started (``python -c``, torch
imported, nothing of freezeview's, no model loaded), and each round trip runs in a fork
of it: a process as fresh as a new one, started in milliseconds. The server starts on
the first round trip and ends when this process does (its standard input closes).

Why not ``multiprocessing``'s forkserver: its children import the parent's ``__main__``
script (for the ``freezeview`` command, freezeview itself) before they run anything, and
its preload list is one per process, shared with whatever else uses it. What is needed
here is smaller: one line in (the code to run and its arguments), the child's pid and
its exit status out.

Only Linux forks here (macOS's system libraries are not safe to use after a fork, and
Windows has none); elsewhere every round trip starts its own interpreter, as
``subprocess.run`` does.
"""

from __future__ import annotations

import atexit
import contextlib
import json
import os
import select
import signal
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path

from ..plumbing import renewed_in_children

__all__ = ["Finished", "run_fresh"]

# The server: imports torch, then forks a child per request line and reports the
# child's pid, then its wait status, one line each. It ignores Ctrl-C (the parent gets
# it too and stops the child it waits for) and ends when its standard input closes.
# The child sends its output to a log file of its own, reads nothing, takes Ctrl-C as
# a new process would, and never returns into the server's loop.
_SERVER = """
import json, os, signal, sys, traceback, warnings
signal.signal(signal.SIGINT, signal.SIG_IGN)
warnings.simplefilter("ignore")
import torch
sys.stdout.write("ready\\n")
sys.stdout.flush()
for line in sys.stdin:
    request = json.loads(line)
    pid = os.fork()
    if pid == 0:
        try:
            log = os.open(request["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            os.dup2(log, 1)
            os.dup2(log, 2)
            nothing = os.open(os.devnull, os.O_RDONLY)
            os.dup2(nothing, 0)
            signal.signal(signal.SIGINT, signal.SIG_DFL)
            sys.argv = ["-c", *request["argv"]]
            exec(compile(request["code"], "<fresh process>", "exec"), {"__name__": "__main__"})
        except BaseException:
            traceback.print_exc()
        finally:
            sys.stdout.flush()
            sys.stderr.flush()
            os._exit(1)
    sys.stdout.write(f"{pid}\\n")
    sys.stdout.flush()
    sys.stdout.write(f"{os.waitpid(pid, 0)[1]}\\n")
    sys.stdout.flush()
"""


@dataclass(frozen=True)
class Finished:
    """How a fresh process's run ended."""

    #: False when it was stopped at the time limit.
    in_time: bool
    #: What it printed (standard output and error together).
    output: str
    #: False when no fresh process could be started at all (nothing of the model ran).
    started: bool = True
    #: Its exit code as ``subprocess`` gives it (minus the signal's number when a signal
    #: ended it); None when it was stopped at the time limit or never started.
    returncode: int | None = None


class _Server:
    """The one interpreter that forks the fresh processes (started at most once at a
    time; started again if it ended)."""

    def __init__(self) -> None:
        self._lock = renewed_in_children(threading.Lock())
        self._proc: subprocess.Popen[bytes] | None = None
        #: The process that started the server: a forked copy of it starts its own
        #: (the pipes are the parent's conversation).
        self._owner = os.getpid()
        self._buffer = b""
        self._ready = False

    def _start(self) -> None:
        if self._proc is not None and self._owner != os.getpid():
            self._proc = None
        if self._proc is not None and self._proc.poll() is None:
            return
        self._owner = os.getpid()
        self._proc = subprocess.Popen(
            [sys.executable, "-c", _SERVER],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
            bufsize=0,
            # Its own session: Ctrl-C in the terminal reaches the parent, which stops
            # the child it waits for; the server goes when the parent's pipe closes.
            start_new_session=True,
        )
        self._buffer = b""
        self._ready = False

    def _line(self, deadline: float) -> str | None:
        """The server's next line, or None at the deadline or if it ended."""
        proc = self._proc
        assert proc is not None and proc.stdout is not None
        fd = proc.stdout.fileno()
        while b"\n" not in self._buffer:
            left = deadline - time.monotonic()
            if left <= 0 or not select.select([fd], [], [], left)[0]:
                return None
            chunk = os.read(fd, 4096)
            if not chunk:
                return None
            self._buffer += chunk
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()

    def _stop(self) -> None:
        """End the server and any child of it still running (their process group)."""
        proc, self._proc = self._proc, None
        if proc is not None:
            with contextlib.suppress(OSError):
                os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
            for pipe in (proc.stdin, proc.stdout):
                if pipe is not None:
                    pipe.close()

    def close(self) -> None:
        """End the server (its standard input closes; it exits when it reads that)."""
        with self._lock:
            proc, self._proc = self._proc, None
            if proc is None or self._owner != os.getpid():
                return
            if proc.stdin is not None:
                proc.stdin.close()
            try:
                proc.wait(timeout=2)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
            if proc.stdout is not None:
                proc.stdout.close()

    def run(self, code: str, argv: list[str], timeout: float) -> Finished:
        """Run ``code`` as ``python -c code *argv`` would, in a fork of the server."""
        with self._lock, tempfile.TemporaryDirectory(prefix="freezeview-fresh-") as tmp:
            log = Path(tmp) / "output.txt"
            deadline = time.monotonic() + timeout
            try:
                for _ in range(2):  # a server that ended meanwhile is started once more
                    finished = self._run_once(code, argv, str(log), deadline)
                    if finished is not None:
                        return finished
            except BaseException:
                # Ctrl-C (or any error here): the child goes too, and the server with
                # it, since its answer about this child would never be read.
                self._stop()
                raise
            return Finished(True, "", started=False)

    def _run_once(self, code: str, argv: list[str], log: str, deadline: float) -> Finished | None:
        """One request to the server; None if the server was found ended."""
        self._start()
        proc = self._proc
        assert proc is not None and proc.stdin is not None
        if not self._ready:
            ready = self._line(deadline)
            if ready != "ready":
                self._stop()
                return Finished(False, "") if time.monotonic() >= deadline else None
            self._ready = True
        request = {"code": code, "argv": argv, "log": log}
        try:
            proc.stdin.write((json.dumps(request) + "\n").encode())
        except OSError:
            self._stop()
            return None
        pid_line = self._line(deadline)
        if pid_line is None:
            self._stop()
            return Finished(False, "") if time.monotonic() >= deadline else None
        pid = int(pid_line)
        status_line = self._line(deadline)
        if status_line is None:
            # Past the time limit: the child is stopped; the server goes on if it
            # answers for it, else it goes too.
            _kill(pid)
            if self._line(time.monotonic() + 5) is None:
                self._stop()
            return Finished(False, _read(Path(log)))
        exit_code = os.waitstatus_to_exitcode(int(status_line))
        return Finished(True, _read(Path(log)), returncode=exit_code)


def _kill(pid: int) -> None:
    with contextlib.suppress(OSError):
        os.kill(pid, signal.SIGKILL)


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


_SERVER_ONE = _Server()
atexit.register(_SERVER_ONE.close)


def _forks() -> bool:
    return sys.platform.startswith("linux") and hasattr(os, "fork")


def run_fresh(code: str, argv: list[str], *, timeout: float) -> Finished:
    """Run ``code`` with ``sys.argv[1:] == argv`` in a fresh process that has torch
    imported and nothing of freezeview's; at most ``timeout`` seconds, start included.

    The code should end with ``os._exit``: what it writes to files is its answer.
    """
    if not _forks():
        try:
            done = subprocess.run(
                [sys.executable, "-c", code, *argv],
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
            )
        except subprocess.TimeoutExpired:
            return Finished(False, "")
        return Finished(True, done.stdout + done.stderr, returncode=done.returncode)
    return _SERVER_ONE.run(code, argv, timeout)
