"""The round trip's fresh processes (freezeview/engine/measure/fresh_process.py): each a
fork of one interpreter that imported torch only, as fresh as a new one."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from freezeview.engine.measure import fresh_process
from freezeview.engine.measure.fresh_process import run_fresh

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the fork server runs on Linux"
)

#: Writes what the fresh process holds: freezeview's modules, torch's, a mark left by
#: an earlier child, and who forked it.
_PROBE = """
import os, sys
import torch
out = sys.argv[1]
seen = [
    str(sum(name.startswith("freezeview") for name in sys.modules)),
    str("torch" in sys.modules),
    str(hasattr(torch, "_left_by_an_earlier_child")),
    str(os.getppid()),
]
torch._left_by_an_earlier_child = True
print("said by the child")
with open(out, "w") as f:
    f.write(" ".join(seen))
os._exit(0)
"""


def _probe(path: Path) -> list[str]:
    finished = run_fresh(_PROBE, [str(path)], timeout=120)
    assert finished.in_time
    assert "said by the child" in finished.output
    return path.read_text().split()


def test_each_child_is_fresh_and_forked_by_one_server(tmp_path: Path) -> None:
    first = _probe(tmp_path / "1.txt")
    second = _probe(tmp_path / "2.txt")
    assert first[:3] == ["0", "True", "False"]
    assert second[:3] == ["0", "True", "False"]
    assert first[3] == second[3] != str(os.getpid())


def test_a_child_past_its_time_is_stopped_and_the_next_runs(tmp_path: Path) -> None:
    run_fresh("import os\nos._exit(0)", [], timeout=120)  # the server is up
    started = time.monotonic()
    finished = run_fresh(
        "import time\nprint('started', flush=True)\ntime.sleep(60)", [], timeout=1.0
    )
    assert not finished.in_time and "started" in finished.output
    assert time.monotonic() - started < 10
    assert _probe(tmp_path / "after.txt")[:3] == ["0", "True", "False"]


def test_a_child_that_crashes_or_raises_says_so(tmp_path: Path) -> None:
    crashed = run_fresh("import os\nprint('before', flush=True)\nos.abort()", [], timeout=120)
    assert crashed.in_time and "before" in crashed.output
    # The exit status as subprocess gives it: minus the signal that ended the child.
    assert crashed.returncode == -6
    raised = run_fresh("raise ValueError('the cause')", [], timeout=120)
    assert raised.in_time and "ValueError: the cause" in raised.output
    assert raised.returncode == 1
    assert run_fresh("import os\nos._exit(3)", [], timeout=120).returncode == 3
    assert _probe(tmp_path / "after.txt")[0] == "0"


@pytest.mark.slow
def test_a_server_that_ended_is_started_again(tmp_path: Path) -> None:
    server = int(_probe(tmp_path / "1.txt")[3])
    os.kill(server, 9)
    again = int(_probe(tmp_path / "2.txt")[3])
    assert again != server


@pytest.mark.slow
def test_the_server_ends_with_the_process_that_started_it(tmp_path: Path) -> None:
    out = tmp_path / "probe.txt"
    script = (
        "import sys\n"
        "from freezeview.engine.measure.fresh_process import run_fresh\n"
        f"run_fresh({_PROBE!r}, [sys.argv[1]], timeout=120)\n"
    )
    done = subprocess.run([sys.executable, "-c", script, str(out)], timeout=180, check=False)
    assert done.returncode == 0
    server = int(out.read_text().split()[3])
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and Path(f"/proc/{server}").exists():
        with open(f"/proc/{server}/stat") as f:
            if f.read().split(") ")[1].startswith("Z"):
                break
        time.sleep(0.05)
    assert not Path(f"/proc/{server}").exists() or "Z" in Path(f"/proc/{server}/stat").read_text()


@pytest.mark.slow
def test_where_nothing_forks_each_run_starts_its_own_interpreter(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fresh_process, "_forks", lambda: False)
    seen = _probe(tmp_path / "own.txt")
    assert seen[:3] == ["0", "True", "False"] and seen[3] == str(os.getpid())


@pytest.mark.slow
def test_a_forked_copy_of_the_process_starts_a_server_of_its_own(tmp_path: Path) -> None:
    """A fork of a process whose server runs (compare's helper is one) never talks to
    its parent's server: the pipes are the parent's conversation."""
    parent_server = int(_probe(tmp_path / "parent.txt")[3])
    pid = os.fork()
    if pid == 0:  # the forked copy: its answer is its exit status
        code = 4
        try:
            code = 0 if int(_probe(tmp_path / "child.txt")[3]) != parent_server else 3
        finally:
            os._exit(code)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert int(_probe(tmp_path / "parent-again.txt")[3]) == parent_server


def test_no_fresh_process_means_the_round_trip_was_not_checked(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that cannot start says nothing of the model: the round trip is "not
    checked", never "unsaveable"."""
    import torch

    from freezeview.engine.measure.portability import roundtrip

    monkeypatch.setattr(fresh_process, "_SERVER", "import sys\nsys.exit(3)")
    monkeypatch.setattr(fresh_process, "_SERVER_ONE", fresh_process._Server())
    finished = run_fresh(_PROBE, [str(tmp_path / "never.txt")], timeout=60)
    assert not finished.started and not (tmp_path / "never.txt").exists()
    frozen = torch.jit.freeze(torch.jit.script(torch.nn.Linear(2, 2).eval()))
    x = torch.ones(1, 2)
    outcome, sentence = roundtrip(frozen, (x,), frozen(x))
    assert outcome is None and sentence.startswith("round trip not checked:")
