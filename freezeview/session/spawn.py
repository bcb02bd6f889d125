"""The app's engine process started, and its end put in one sentence.

:func:`spawn_engine` starts ``python -m freezeview.session.engine_process FD`` for
:class:`~freezeview.session.remote.RemoteSession`; :func:`death_sentence` says why it
ended when it ends unasked (a crash inside torch, a kill). Imports no torch.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any

__all__ = ["death_sentence", "spawn_engine"]


def spawn_engine() -> tuple[Connection, subprocess.Popen[bytes], Any]:
    """Start ``python -m freezeview.session.engine_process FD`` with one end of a socket pair.

    A plain subprocess rather than :mod:`multiprocessing`: its "spawn" start re-imports
    the parent's ``__main__`` (the console script, or pytest) in the child, which costs
    time and runs code nobody asked for; a socket pair plus ``Connection`` gives the same
    framed, pickled messages.
    """
    ours, theirs = socket.socketpair()
    # Kept open for the child's whole life (its last words explain a crash).
    stderr = tempfile.TemporaryFile(prefix="freezeview-engine-")  # noqa: SIM115
    package_root = str(Path(__file__).resolve().parents[2])
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (package_root, env.get("PYTHONPATH", "")) if p)
    proc = subprocess.Popen(
        [sys.executable, "-m", "freezeview.session.engine_process", str(theirs.fileno())],
        pass_fds=(theirs.fileno(),),
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=stderr,
        env=env,
        # Its own session: Ctrl-C and terminal signals go to the screen, which decides.
        start_new_session=True,
    )
    theirs.close()
    return Connection(ours.detach()), proc, stderr


def death_sentence(proc: subprocess.Popen[bytes], stderr: Any) -> str:
    """One sentence on why the engine process ended."""
    try:
        code = proc.wait(timeout=2)
    except subprocess.TimeoutExpired:
        code = None
    if code is not None and code < 0:
        try:
            how = f"was killed by {signal.Signals(-code).name}"
        except ValueError:
            how = f"was killed by signal {-code}"
    elif code is not None:
        how = f"exited with status {code}"
    else:
        how = "stopped answering"
    last = ""
    try:
        stderr.seek(0)
        lines = [x.strip() for x in stderr.read()[-4000:].decode(errors="replace").splitlines()]
        last = next((x for x in reversed(lines) if x), "")
    except (OSError, ValueError):
        pass
    said = f" (its last words: {last[:200]})" if last else ""
    return (
        f"freezeview's engine process {how}{said}; what is on screen stays, and the next "
        "action (r re-runs) starts a new one."
    )
