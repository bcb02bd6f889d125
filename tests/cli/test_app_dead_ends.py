"""``freezeview MODEL.pt`` with a plan or a file it cannot open: it says so before the
screen shows, in the very sentence and with the exit code ``freezeview explain`` gives
for the same input (one wording per error), instead of opening an empty app.

The real console script runs on a pseudo-terminal (the app needs one), in a session of
its own so that nothing it started outlives a failed test.
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
TIMEOUT = 60.0


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "example.pt"
    torch.jit.save(example_module().build(), str(path))
    return path


def _words(text: str) -> str:
    """Text without colours, the ``error:`` prefix and line wrapping."""
    text = re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", text).replace("error:", "")
    return " ".join(text.split())


def _app_on_a_terminal(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``freezeview ARGV`` with every stream on a pseudo-terminal; exit code and screen."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        [str(SCRIPT), *argv],
        stdin=slave,
        stdout=slave,
        stderr=slave,
        cwd=cwd,
        start_new_session=True,
    )
    os.close(slave)
    chunks: list[bytes] = []
    deadline = time.monotonic() + TIMEOUT
    try:
        while time.monotonic() < deadline:
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the other end is closed and drained
                break
            if not chunk:
                break
            chunks.append(chunk)
            if b"\x1b[?1049h" in b"".join(chunks):  # the app took the screen
                break
        if b"\x1b[?1049h" in b"".join(chunks):
            os.killpg(proc.pid, signal.SIGKILL)  # the app is up: that is all to know
        code = proc.wait(timeout=max(1.0, deadline - time.monotonic()))
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        pytest.fail(f"freezeview {' '.join(argv)} was still running after {TIMEOUT:g} s")
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
        os.close(master)
    return code, b"".join(chunks).decode(errors="replace")


def _explain_run(argv: list[str], cwd: Path) -> tuple[int, str]:
    """``freezeview explain ARGV``: its exit code and its sentence."""
    done = subprocess.run(
        [str(SCRIPT), "explain", *argv], capture_output=True, text=True, cwd=cwd, timeout=TIMEOUT
    )
    assert done.returncode in (1, 2), done.stderr
    return done.returncode, _words(done.stderr)


def _explain_says(argv: list[str], cwd: Path) -> str:
    return _explain_run(argv, cwd)[1]


@pytest.mark.slow
@pytest.mark.parametrize("names", ["layer1.0.bn9", "head.fc.weight9,temperature"])
def test_an_unknown_preserved_name_fails_before_the_app_opens(
    model: Path, tmp_path: Path, names: str
) -> None:
    argv = [str(model), "--preserve", names]
    code, screen = _app_on_a_terminal(argv, tmp_path)
    assert "\x1b[?1049h" not in screen  # the screen never showed
    assert "Traceback" not in screen
    said = _words(screen)
    # A plan naming what the model lacks: explain's exit code (1, a bad plan) and words.
    assert (code, said) == _explain_run(argv, tmp_path)
    assert code == 1, screen[-2000:]
    assert said.startswith(f"unknown name '{names.split(',')[0]}'")


def _state_dict(folder: Path) -> Path:
    path = folder / "weights.pt"
    torch.save(example_module().build().state_dict(), str(path))
    return path


def _pickle(folder: Path) -> Path:
    import pickle

    path = folder / "plain.pkl"
    path.write_bytes(pickle.dumps({"a": 1}))
    return path


@pytest.mark.parametrize(
    "make", [pytest.param(_state_dict, marks=pytest.mark.slow, id="_state_dict"), _pickle]
)
def test_a_file_that_is_no_torchscript_fails_before_the_app_opens(
    tmp_path: Path, make: object
) -> None:
    path = make(tmp_path)  # type: ignore[operator]
    code, screen = _app_on_a_terminal([str(path)], tmp_path)
    assert code == 2, screen[-2000:]
    assert "\x1b[?1049h" not in screen
    said = _words(screen)
    assert said == _explain_says([str(path)], tmp_path)
    assert "not TorchScript" in said or "not a TorchScript model" in said


def test_the_file_kind_check_imports_no_torch(tmp_path: Path) -> None:
    """The app's start-up check of what the file is runs before torch is imported."""
    path = _pickle(tmp_path)
    code = (
        "import sys\n"
        "from freezeview.engine.load.archive import check_model_kind\n"
        "from freezeview.engine.plumbing.errors import BadInputError\n"
        f"try:\n    check_model_kind({str(path)!r})\nexcept BadInputError as e:\n    print(e)\n"
        "print('torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    lines = out.stdout.strip().splitlines()
    assert lines[-1] == "False" and "Python pickle" in lines[0], out.stdout


@pytest.mark.slow
def test_a_known_preserved_name_opens_the_app(model: Path, tmp_path: Path) -> None:
    _, screen = _app_on_a_terminal([str(model), "--preserve", "temperature"], tmp_path)
    assert "\x1b[?1049h" in screen, screen[-2000:]


@pytest.mark.slow
def test_serve_refuses_a_file_that_is_no_torchscript_before_any_browser(tmp_path: Path) -> None:
    path = _state_dict(tmp_path)
    done = subprocess.run(
        [str(SCRIPT), "serve", str(path), "--port", "0"],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=TIMEOUT,
    )
    assert done.returncode == 2, done.stderr
    assert _words(done.stderr) == _explain_says([str(path)], tmp_path)
