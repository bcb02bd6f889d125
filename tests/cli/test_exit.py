"""A finished subcommand ends its process without the interpreter's teardown (cli._leave).

The process runs the console script's ``main()`` (argv from ``sys.argv``), as the
``freezeview`` script and ``python -m freezeview`` do; outputs, streams and other exit
handlers must be complete, the exit code kept, and only the teardown skipped.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from bad_inputs.catalogue import save_tiny

# Runs `freezeview ARGS...` through main() in a fresh interpreter. After main() returns,
# it registers an exit handler (it must still run) and leaves an object whose __del__
# would only run in the interpreter's teardown (it must not).
_SCRIPT = """
import atexit, sys
marks = sys.argv.pop(1)
sys.argv[0] = "freezeview"
from freezeview.cli import main
try:
    code = main()
except SystemExit as stop:  # --help
    code = stop.code
atexit.register(lambda: open(marks, "a").write("handler\\n"))
import os
fd = os.open(marks, os.O_WRONLY | os.O_APPEND)
class Teardown:
    def __del__(self, write=os.write, fd=fd):
        write(fd, b"teardown\\n")
keep = Teardown()
sys.exit(code)
"""


def _run(tmp_path: Path, *args: str) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    marks = tmp_path / "marks.txt"
    marks.write_text("")
    done = subprocess.run(
        [sys.executable, "-c", _SCRIPT, str(marks), *args],
        capture_output=True,
        text=True,
        timeout=300,
    )
    return done, marks.read_text().split()


@pytest.mark.slow
def test_a_finished_command_skips_only_the_teardown(tmp_path: Path) -> None:
    model = save_tiny(tmp_path / "m.pt")
    out = tmp_path / "out"
    done, marks = _run(tmp_path, "export", str(model), "-o", str(out), "--format", "dot", "--json")
    assert done.returncode == 0, done.stderr
    report = json.loads(done.stdout)  # the whole report reached the pipe
    assert Path(report["index"]).is_file()
    assert marks == ["handler"]  # exit handlers ran; the teardown did not


def test_the_exit_code_of_a_failed_command_is_kept(tmp_path: Path) -> None:
    done, marks = _run(tmp_path, "explain", str(tmp_path / "missing.pt"))
    assert done.returncode == 2
    assert "does not exist" in done.stderr and "Traceback" not in done.stderr
    assert marks == ["handler"]


@pytest.mark.parametrize(
    "buffered",
    [
        pytest.param(True, id="buffered"),
        pytest.param(False, marks=pytest.mark.slow, id="unbuffered"),
    ],
)
def test_a_report_that_cannot_be_written_is_not_a_success(tmp_path: Path, buffered: bool) -> None:
    """A full disk behind `> report.json`: the buffered report fails at the last flush, an
    unbuffered one at its first write, in the middle of the command."""
    model = save_tiny(tmp_path / "m.pt")
    out = tmp_path / "out"
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}
    if not buffered:
        env["PYTHONUNBUFFERED"] = "1"
    argv = ["export", str(model), "-o", str(out), "--format", "dot", "--json"]
    with open("/dev/full", "w") as full:
        done = subprocess.run(
            [sys.executable, "-m", "freezeview", *argv],
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            timeout=300,
        )
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: freezeview could not write to standard output: No space left on device."
    ]
    assert (out / "index.html").is_file()  # the files themselves were written


@pytest.mark.slow
def test_help_ends_the_usual_way(tmp_path: Path) -> None:
    done, marks = _run(tmp_path, "passes", "--help")
    assert done.returncode == 0 and "usage" in done.stdout
    assert marks == ["handler", "teardown"]
