"""Run many freezeview command lines in one process, each as the console script would.

Starting the console script costs a torch import (2 s or more) per run; hundreds of
bad inputs would spend most of the test time importing torch. This driver imports it
once and calls ``freezeview.cli.main(argv)`` per job — the function the console script
calls — capturing file descriptors 1 and 2 (so C++ output from torch is caught too) and
setting each job's environment.

Usage (by ``run.run_batch``)::

    python driver.py JOBS.json RESULTS.jsonl

``JOBS.json`` is a list of ``{"id", "argv", "env", "timeout"}``; one JSON line per
finished job is appended to ``RESULTS.jsonl`` and flushed at once, so if a job crashes
the whole process (a segfault in torch) the jobs before it are kept and the caller
re-runs the rest one by one with the real console script.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import sys
import tempfile
import time
from collections.abc import Iterator
from typing import Any


class _JobTimeout(BaseException):
    """Raised by SIGALRM when a job overruns (only reachable while Python code runs)."""


def _on_alarm(signum: int, frame: object) -> None:
    raise _JobTimeout


@contextlib.contextmanager
def _captured() -> Iterator[dict[str, str]]:
    """Point fds 1 and 2 at temporary files; yield a dict filled with their text."""
    result: dict[str, str] = {}
    sys.stdout.flush()
    sys.stderr.flush()
    saved = {fd: os.dup(fd) for fd in (1, 2)}
    files = {fd: tempfile.TemporaryFile(mode="w+b") for fd in (1, 2)}  # noqa: SIM115
    try:
        for fd, fh in files.items():
            os.dup2(fh.fileno(), fd)
        yield result
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        for fd, old in saved.items():
            os.dup2(old, fd)
            os.close(old)
        for fd, fh in files.items():
            fh.seek(0)
            result["stdout" if fd == 1 else "stderr"] = fh.read().decode("utf-8", "replace")
            fh.close()


@contextlib.contextmanager
def _environment(overrides: dict[str, str]) -> Iterator[None]:
    saved = {k: os.environ.get(k) for k in overrides}
    os.environ.update(overrides)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def _run_job(job: dict[str, Any]) -> dict[str, Any]:
    from freezeview.cli import main

    record: dict[str, Any] = {"id": job["id"], "timed_out": False, "uncaught": None}
    start = time.perf_counter()
    with _environment(job.get("env") or {}), _captured() as streams:
        signal.alarm(max(1, int(job.get("timeout", 20))))
        try:
            code: int | None = main(list(job["argv"]))
        except SystemExit as exc:  # argparse usage errors exit through SystemExit
            code = exc.code if isinstance(exc.code, int) else (0 if exc.code is None else 2)
        except _JobTimeout:
            code = None
            record["timed_out"] = True
        except BaseException as exc:
            # main() must never let an exception out: that is a traceback for the user.
            code = 1
            record["uncaught"] = f"{type(exc).__name__}: {exc}"
            import traceback

            traceback.print_exc()
        finally:
            signal.alarm(0)
    record.update(
        returncode=code,
        stdout=streams["stdout"],
        stderr=streams["stderr"],
        seconds=time.perf_counter() - start,
    )
    return record


def main(argv: list[str]) -> int:
    """Run the jobs in ``argv[0]``, appending results to ``argv[1]``."""
    jobs_path, results_path = argv
    with open(jobs_path, encoding="utf-8") as fh:
        jobs = json.load(fh)
    signal.signal(signal.SIGALRM, _on_alarm)
    import freezeview.cli  # noqa: F401 - pay the torch import before the first job's clock

    with open(results_path, "a", encoding="utf-8") as out:
        for job in jobs:
            record = _run_job(job)
            out.write(json.dumps(record) + "\n")
            out.flush()
            os.fsync(out.fileno())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
