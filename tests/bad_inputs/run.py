"""Run freezeview's real console script and classify how each run ended.

A run is *clean* when it ends by itself within its time limit with exit 0, 1 or 2, and
— on error — says exactly one line on stderr, starting with ``error:``, with no
Python traceback anywhere. Anything else is a defect: a crash signal (a segfault in
torch), a hang, a traceback, a multi-line or empty error.
"""

from __future__ import annotations

import contextlib
import functools
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "FREEZEVIEW",
    "Job",
    "Outcome",
    "command_options",
    "run_batch",
    "run_cli",
]

#: The console script installed in the project's virtualenv.
FREEZEVIEW = Path(sys.executable).with_name("freezeview")

_TRACEBACK = re.compile(r"Traceback \(most recent call last\)|^\s+File \".*\", line \d+", re.M)


@dataclass(frozen=True)
class Outcome:
    """How one freezeview run ended.

    Attributes:
        argv: the arguments given (after the script name).
        returncode: the exit code, or ``-N`` when killed by signal N (``None`` on timeout).
        stdout / stderr: the captured text.
        timed_out: the run exceeded its time limit and was killed.
        seconds: wall time.
    """

    argv: tuple[str, ...]
    returncode: int | None
    stdout: str
    stderr: str
    timed_out: bool = False
    seconds: float = 0.0
    via: str = "console script"

    @property
    def signal_name(self) -> str | None:
        """``SIGSEGV`` & co. when the process was killed by a signal."""
        if self.returncode is not None and self.returncode < 0:
            try:
                return signal.Signals(-self.returncode).name
            except ValueError:
                return f"signal {-self.returncode}"
        return None

    @property
    def error_lines(self) -> list[str]:
        """The non-empty lines on stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]

    @property
    def error(self) -> str:
        """The error sentence without its ``error:`` prefix ('' if none)."""
        lines = self.error_lines
        if not lines:
            return ""
        return re.sub(r"^\s*error:\s*", "", lines[0])

    @property
    def has_traceback(self) -> bool:
        """A Python traceback appeared on stdout or stderr."""
        return bool(_TRACEBACK.search(self.stderr) or _TRACEBACK.search(self.stdout))

    def problems(self) -> list[str]:
        """Everything that makes this run unclean (empty list: clean)."""
        out = []
        if self.timed_out:
            out.append("did not finish within its time limit")
        elif self.signal_name:
            out.append(f"crashed with {self.signal_name}")
        elif self.returncode not in (0, 1, 2):
            out.append(f"exit code {self.returncode} (expected 0, 1 or 2)")
        if self.has_traceback:
            out.append("printed a Python traceback")
        if self.returncode in (1, 2):
            lines = self.error_lines
            if len(lines) != 1:
                out.append(f"said {len(lines)} lines on stderr instead of one")
            if not lines or not lines[0].startswith("error:"):
                out.append("stderr does not start with 'error:'")
        return out

    @property
    def ending(self) -> str:
        """One word for the summary table: ``ok``, ``exit 2``, ``SIGSEGV``, ``timeout``."""
        if self.timed_out:
            return "timeout"
        if self.signal_name:
            return self.signal_name
        return "ok" if self.returncode == 0 else f"exit {self.returncode}"

    def describe(self) -> str:
        """A readable account for assertion messages."""
        return (
            f"freezeview {' '.join(self.argv)}\n  -> {self.ending}\n"
            f"  stderr: {self.stderr.strip()[:2000]!r}\n  stdout: {self.stdout.strip()[:500]!r}"
        )


def run_cli(
    argv: Sequence[str],
    *,
    env: Mapping[str, str] | None = None,
    timeout: float = 60.0,
    cwd: Path | None = None,
) -> Outcome:
    """Run ``freezeview ARGV...`` (the real console script) and classify the ending.

    Args:
        argv: arguments after the script name.
        env: variables to set on top of the current environment.
        timeout: seconds before the process (group) is killed and reported as a hang.
        cwd: working directory.

    Returns:
        The :class:`Outcome`.
    """
    full_env = dict(os.environ)
    # Wide, colourless, non-interactive: the same text a CI log would show.
    full_env.update({"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
    full_env.pop("FORCE_COLOR", None)
    full_env.update(env or {})
    start = time.perf_counter()
    proc = subprocess.Popen(
        [str(FREEZEVIEW), *argv],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=full_env,
        cwd=cwd,
        start_new_session=True,  # so a hang can be killed with everything it started
    )
    try:
        out, err = proc.communicate(timeout=timeout)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return Outcome(
        argv=tuple(argv),
        returncode=None if timed_out else proc.returncode,
        stdout=out,
        stderr=err,
        timed_out=timed_out,
        seconds=time.perf_counter() - start,
    )


def interrupt_after(args: Sequence[str], delay: float) -> tuple[int, str]:
    """Run ``freezeview ARGS``, send it SIGINT after ``delay`` seconds; (exit code, stderr)."""
    proc = subprocess.Popen(
        [str(FREEZEVIEW), *args], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    time.sleep(delay)
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    return proc.returncode, err


def _help_text(*argv: str) -> str:
    """What ``freezeview ARGV... --help`` prints, asked of ``freezeview.cli.main`` here.

    The console script calls the same function with the same parser; asking it in this
    process (which has torch loaded already) spares a torch import per question.
    """
    from freezeview.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.suppress(SystemExit):
        main([*argv, "--help"])
    return out.getvalue()


@functools.cache
def command_options(command: str) -> frozenset[str]:
    """The ``--options`` ``freezeview COMMAND --help`` offers."""
    return frozenset(re.findall(r"(?<![\w-])(--[a-z][\w-]*)", _help_text(command)))


def dot_available() -> bool:
    """Graphviz's ``dot`` is on PATH."""
    return shutil.which("dot") is not None


@dataclass(frozen=True)
class Job:
    """One command line for :func:`run_batch`."""

    id: str
    argv: tuple[str, ...]
    env: Mapping[str, str] | None = None
    timeout: float = 20.0


_DRIVER = Path(__file__).with_name("driver.py")


def run_batch(jobs: Sequence[Job], *, cwd: Path | None = None) -> dict[str, Outcome]:
    """Run ``jobs`` through ``driver.py`` (few processes); return outcomes by job id.

    When a job kills the driver (a crash signal inside torch) or hangs it inside C++
    where no alarm can interrupt, the first unfinished job is re-run alone with the
    real console script (:func:`run_cli`) — so the crash is attributed to the right
    job and classified exactly as a user would see it — and a fresh driver carries on
    with the jobs after it.

    Args:
        jobs: the command lines.
        cwd: working directory for the driver and the re-runs.

    Returns:
        ``{job.id: Outcome}`` for every job.
    """
    outcomes: dict[str, Outcome] = {}
    pending = list(jobs)
    while pending:
        outcomes.update(_run_driver(pending, cwd))
        rest = [j for j in pending if j.id not in outcomes]
        if not rest:
            break
        culprit = rest[0]
        outcomes[culprit.id] = run_cli(
            culprit.argv, env=culprit.env, timeout=culprit.timeout, cwd=cwd
        )
        pending = rest[1:]
    return outcomes


def _run_driver(jobs: Sequence[Job], cwd: Path | None) -> dict[str, Outcome]:
    """One driver process over ``jobs``; outcomes of the jobs it finished."""
    by_id = {j.id: j for j in jobs}
    outcomes: dict[str, Outcome] = {}
    with tempfile.TemporaryDirectory(prefix="fv-batch-") as tmp:
        jobs_file = Path(tmp) / "jobs.json"
        results_file = Path(tmp) / "results.jsonl"
        jobs_file.write_text(
            json.dumps(
                [
                    {
                        "id": j.id,
                        "argv": list(j.argv),
                        "env": dict(j.env or {}),
                        "timeout": j.timeout,
                    }
                    for j in jobs
                ]
            )
        )
        env = dict(os.environ)
        env.update({"COLUMNS": "200", "NO_COLOR": "1", "TERM": "dumb"})
        env.pop("FORCE_COLOR", None)
        budget = 60 + sum(j.timeout for j in jobs)
        proc = subprocess.Popen(
            [sys.executable, str(_DRIVER), str(jobs_file), str(results_file)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            env=env,
            cwd=cwd,
            start_new_session=True,
        )
        try:
            proc.wait(timeout=budget)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        if not results_file.exists():
            return outcomes
        for line in results_file.read_text().splitlines():
            try:
                rec = json.loads(line)
            except json.JSONDecodeError:
                continue  # the last line of a killed driver may be cut short
            job = by_id[rec["id"]]
            stderr = rec["stderr"]
            if rec.get("uncaught"):
                stderr += f"\n[driver] main() raised: {rec['uncaught']}"
            outcomes[job.id] = Outcome(
                argv=job.argv,
                returncode=rec["returncode"],
                stdout=rec["stdout"],
                stderr=stderr,
                timed_out=rec["timed_out"],
                seconds=rec["seconds"],
                via="in-process batch",
            )
    return outcomes
