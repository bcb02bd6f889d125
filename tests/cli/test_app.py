"""``freezeview MODEL.pt`` where there is no terminal to draw on.

Piped or redirected (``freezeview model.pt | tee log``, ``> file``, a CI step, input from
a pipe), the app used to stay on "loading" forever, redrawing at 100 % CPU between two
screen sizes. It must say in one sentence that it needs a terminal, point at the
commands that write text, and exit 2 at once. The real console script runs here, in a
session of its own so that nothing it started outlives a failed test.
"""

from __future__ import annotations

import os
import pty
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from models.small import example_module

SCRIPT = Path(sys.executable).with_name("freezeview")
pytestmark = pytest.mark.skipif(not SCRIPT.exists(), reason="the console script is not installed")

# Well above the error's time (no torch is imported for it), well below a spinning app's.
TIMEOUT = 30.0


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "example.pt"
    torch.jit.save(example_module().build(), str(path))
    return path


def _run(model: Path, *, stdin: int, stdout: int, stderr: int, cwd: Path) -> tuple[int, float]:
    """Run ``freezeview MODEL.pt``; its exit code and seconds (the session is killed on timeout)."""
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    start = time.monotonic()
    proc = subprocess.Popen(
        [str(SCRIPT), str(model)],
        stdin=stdin,
        stdout=stdout,
        stderr=stderr,
        cwd=cwd,
        env=env,
        start_new_session=True,
    )
    try:
        code = proc.wait(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"freezeview {model.name} was still running after {TIMEOUT:g} s")
    return code, time.monotonic() - start


def _one_sentence(text: str) -> str:
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text)  # rich's colours on a terminal
    lines = [line for line in text.splitlines() if line.strip()]
    assert len(lines) == 1, text
    assert "Traceback" not in text
    return lines[0]


def _points_at_the_text_commands(sentence: str, model: Path) -> None:
    assert sentence.startswith("error: ")
    assert "terminal" in sentence
    assert f"freezeview explain {model}" in sentence
    assert "freezeview freeze" in sentence and "--json" in sentence


def test_piped_output_exits_2_with_one_sentence(model: Path, tmp_path: Path) -> None:
    out, err = tmp_path / "out.txt", tmp_path / "err.txt"
    with out.open("wb") as stdout, err.open("wb") as stderr:
        code, _ = _run(model, stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, cwd=tmp_path)
    assert code == 2
    assert out.read_bytes() == b""
    sentence = _one_sentence(err.read_text())
    _points_at_the_text_commands(sentence, model)
    assert "standard input" in sentence  # the first stream that is not a terminal
    assert not (tmp_path / f"freezeview-{model.stem}").exists()


def _on_a_terminal(model: Path, tmp_path: Path, *, piped: str) -> tuple[int, str]:
    """Run with every stream on a pseudo-terminal but ``piped``; exit code and what was said."""
    master, slave = pty.openpty()
    said = tmp_path / f"said-{piped}.txt"
    try:
        with said.open("wb") as file:
            streams = {"stdin": slave, "stdout": slave, "stderr": slave}
            streams[piped] = subprocess.PIPE if piped == "stdin" else file.fileno()
            code, seconds = _run(model, cwd=tmp_path, **streams)
        os.close(slave)
        slave = -1
        chunks = []
        while True:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the terminal's other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
        screen = b"".join(chunks).decode(errors="replace").replace("\r\n", "\n")
    finally:
        os.close(master)
        if slave >= 0:
            os.close(slave)
    assert seconds < TIMEOUT
    return code, screen + said.read_text()


@pytest.mark.parametrize(
    ("piped", "name"),
    [("stdin", "standard input"), ("stdout", "standard output"), ("stderr", "standard error")],
)
def test_one_stream_off_the_terminal_exits_2(
    model: Path, tmp_path: Path, piped: str, name: str
) -> None:
    code, said = _on_a_terminal(model, tmp_path, piped=piped)
    assert code == 2, said[-2000:]
    sentence = _one_sentence(said)
    _points_at_the_text_commands(sentence, model)
    assert name in sentence


def test_terminals_everywhere_pass_the_check(monkeypatch: pytest.MonkeyPatch) -> None:
    from freezeview.cli.app import terminal_missing

    class Tty:
        def isatty(self) -> bool:
            return True

    for name in ("stdin", "stdout", "stderr"):
        monkeypatch.setattr(sys, name, Tty())
    assert terminal_missing() is None
    monkeypatch.setattr(sys, "stdout", None)  # pythonw, a closed descriptor
    assert terminal_missing() == "standard output"
