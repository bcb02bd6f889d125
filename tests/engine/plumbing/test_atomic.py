"""freezeview.engine.plumbing.atomic: files are written whole or not at all.

In-process tests cover the helpers; subprocess tests interrupt real ``freezeview
freeze`` and ``freezeview export`` runs with SIGINT while they write (a test hook in
``bad_inputs/slow_write/sitecustomize.py`` stalls the first write at a known point) and
check that the previous output is intact, no partial or temporary file is left, and
the model is untouched.
"""

from __future__ import annotations

import errno
import hashlib
import os
import signal
import subprocess
import time
import zipfile
from pathlib import Path

import pytest
import torch
from bad_inputs.catalogue import save_tiny
from bad_inputs.run import FREEZEVIEW, interrupt_after
from repo_paths import TESTS

from freezeview.engine.plumbing import atomic
from freezeview.engine.plumbing.atomic import (
    atomic_directory,
    atomic_path,
    check_output_path,
    save_module,
    write_bytes,
    write_text,
)
from freezeview.engine.plumbing.errors import OutputError

SLOW_WRITE = TESTS / "bad_inputs" / "slow_write"


def _leftovers(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if "freezeview-tmp" in p.name)


# --------------------------------------------------------------------------- helpers


def test_write_text_and_bytes(tmp_path: Path) -> None:
    umask = os.umask(0)
    os.umask(umask)
    text = write_text(tmp_path / "a.txt", "héllo\n")
    data = write_bytes(tmp_path / "b.bin", b"\x00\x01")
    assert text.read_text(encoding="utf-8") == "héllo\n"
    assert data.read_bytes() == b"\x00\x01"
    assert text.stat().st_mode & 0o777 == 0o666 & ~umask
    assert _leftovers(tmp_path) == []


def test_replacing_keeps_the_old_files_mode(tmp_path: Path) -> None:
    target = tmp_path / "report.json"
    target.write_text("old")
    target.chmod(0o640)
    write_text(target, "new")
    assert target.read_text() == "new"
    assert target.stat().st_mode & 0o777 == 0o640


@pytest.mark.parametrize("exc", [RuntimeError("pass failed"), KeyboardInterrupt()])
def test_failure_inside_leaves_previous_file(tmp_path: Path, exc: BaseException) -> None:
    target = tmp_path / "frozen.pt"
    target.write_bytes(b"previous")
    with pytest.raises(type(exc)), atomic_path(target) as tmp:
        tmp.write_bytes(b"half of the new")
        assert tmp.parent == target.parent  # same directory: the rename is atomic
        raise exc
    assert target.read_bytes() == b"previous"
    assert _leftovers(tmp_path) == []


def test_failure_inside_leaves_nothing_new(tmp_path: Path) -> None:
    target = tmp_path / "new.svg"
    with pytest.raises(ValueError), atomic_path(target) as tmp:
        tmp.write_text("<svg")
        raise ValueError("dot crashed")
    assert not target.exists()
    assert list(tmp_path.iterdir()) == []


def test_disk_full_is_an_output_error(tmp_path: Path) -> None:
    target = tmp_path / "out.svg"
    target.write_text("previous")

    def full(_: Path) -> None:
        raise OSError(errno.ENOSPC, "No space left on device")

    with pytest.raises(OutputError, match=r"no space left on the device.*unchanged"):
        atomic._write(target, full)
    assert target.read_text() == "previous"
    assert _leftovers(tmp_path) == []


def test_save_module_round_trip(tmp_path: Path) -> None:
    module = torch.jit.load(str(save_tiny(tmp_path / "model.pt"))).eval()
    out = save_module(module, tmp_path / "copy.pt")
    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(torch.jit.load(str(out))(x), module(x))
    assert _leftovers(tmp_path) == []
    # The records are named after copy.pt, as a plain torch.jit.save names them.
    plain = tmp_path / "plain" / "copy.pt"
    plain.parent.mkdir()
    torch.jit.save(module, str(plain))
    with zipfile.ZipFile(out) as ours, zipfile.ZipFile(plain) as theirs:
        assert ours.namelist() == theirs.namelist()
        assert ours.namelist()[0].startswith("copy/")


def test_save_module_failure(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("\nPytorchStreamWriter failed writing file data/0: file write failed")

    monkeypatch.setattr(torch.jit, "save", broken)
    target = tmp_path / "frozen.pt"
    target.write_bytes(b"previous")
    with pytest.raises(OutputError, match=r"torch\.jit\.save failed \(PytorchStreamWriter"):
        save_module(object(), target)
    assert target.read_bytes() == b"previous"
    assert _leftovers(tmp_path) == []


# --------------------------------------------------------------------------- checks


def test_check_output_path_accepts_a_new_file(tmp_path: Path) -> None:
    assert check_output_path(tmp_path / "out.pt") == tmp_path / "out.pt"
    assert list(tmp_path.iterdir()) == []  # the writability probe cleans up


def test_check_output_path_refusals(tmp_path: Path) -> None:
    existing = tmp_path / "out.pt"
    existing.write_bytes(b"x")
    with pytest.raises(OutputError, match=r"out\.pt already exists: pass --force"):
        check_output_path(existing)
    assert check_output_path(existing, force=True) == existing
    with pytest.raises(OutputError, match="is a directory"):
        check_output_path(tmp_path)
    # A missing directory is made when the file is written (as mkdir -p), not refused.
    assert check_output_path(tmp_path / "nope" / "out.pt") == tmp_path / "nope" / "out.pt"
    assert not (tmp_path / "nope").exists()
    with pytest.raises(OutputError, match=r"out\.pt is a file, not a directory"):
        check_output_path(existing / "deeper" / "x.pt")


def test_check_output_path_read_only_location() -> None:
    # /sys refuses new files even to root (a chmod'ed directory would not, for root).
    if not Path("/sys").is_dir():
        pytest.skip("no /sys here")
    with pytest.raises(OutputError, match=r"/sys is not writable"):
        check_output_path("/sys/freezeview-out.pt")


def test_check_output_path_permission_denied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The writability check itself is injectable, for a directory whose bits say no."""

    def denied(directory: Path) -> None:
        raise PermissionError(errno.EACCES, "Permission denied", str(directory))

    monkeypatch.setattr(atomic, "_probe_writable", denied)
    with pytest.raises(OutputError, match=r"is not writable \(permission denied\)"):
        check_output_path(tmp_path / "out.pt")


# --------------------------------------------------------------------------- SIGINT


def _interrupt_while_writing(
    argv: list[str], mode: str, cwd: Path, timeout: float = 240, sig: int = signal.SIGINT
) -> tuple[int, str]:
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(SLOW_WRITE), *filter(None, [env.get("PYTHONPATH")])])
    env["FREEZEVIEW_TEST_SLOW_WRITE"] = mode
    env.update({"NO_COLOR": "1", "TERM": "dumb", "COLUMNS": "200"})
    proc = subprocess.Popen(
        [str(FREEZEVIEW), *argv],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stderr is not None
    lines = []
    deadline = time.monotonic() + timeout
    try:
        for line in proc.stderr:  # blocks until the hook announces the stalled write
            lines.append(line)
            if line.startswith("FV-TEST: writing"):
                proc.send_signal(sig)
                break
            assert time.monotonic() < deadline, "the write never started"
        else:
            proc.wait(timeout=10)
            pytest.fail(f"freezeview ended before writing anything:\n{''.join(lines)}")
        rest = proc.stderr.read()
        code = proc.wait(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    return code, "".join(lines) + rest


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.mark.parametrize(
    ("mode", "sig"),
    [
        ("mid-write", signal.SIGINT),
        pytest.param("before-rename", signal.SIGINT, marks=pytest.mark.slow),
        pytest.param("mid-write", signal.SIGTERM, marks=pytest.mark.slow),
    ],
    ids=["SIGINT-mid-write", "SIGINT-before-rename", "SIGTERM-mid-write"],
)
def test_sigint_during_freeze_keeps_the_previous_file(mode: str, sig: int, tmp_path: Path) -> None:
    model = save_tiny(tmp_path / "model.pt")
    out = tmp_path / "frozen.pt"
    out.write_bytes(b"the previous frozen model")
    before = {model: _digest(model), out: _digest(out)}
    code, stderr = _interrupt_while_writing(
        ["freeze", str(model), "-o", str(out), "--force"], mode, tmp_path, sig=sig
    )
    assert code == 130, stderr
    assert "interrupted" in stderr and "Traceback" not in stderr, stderr
    assert {p: _digest(p) for p in before} == before
    assert _leftovers(tmp_path) == []


@pytest.mark.parametrize(
    "mode",
    [
        pytest.param("mid-write", marks=pytest.mark.slow),
        pytest.param("before-rename", marks=pytest.mark.slow),
    ],
)
def test_sigint_during_export_leaves_no_partial_file(mode: str, tmp_path: Path) -> None:
    model = save_tiny(tmp_path / "model.pt")
    out_dir = tmp_path / "export"
    # A first, complete export: the previous files an interrupted --force run must keep.
    first = subprocess.run(
        [str(FREEZEVIEW), "export", str(model), "-o", str(out_dir), "--format", "dot"],
        capture_output=True,
        text=True,
        timeout=240,
        check=False,
    )
    assert first.returncode == 0, first.stderr
    previous = {p: _digest(p) for p in out_dir.rglob("*") if p.is_file()}
    assert previous
    model_digest = _digest(model)
    code, stderr = _interrupt_while_writing(
        ["export", str(model), "-o", str(out_dir), "--format", "dot", "--force"], mode, tmp_path
    )
    assert code == 130, stderr
    assert "Traceback" not in stderr, stderr
    now = {p: _digest(p) for p in out_dir.rglob("*") if p.is_file()}
    # The interrupted run wrote at most whole files, each identical to the previous run's
    # (same model, same options); nothing partial, nothing left over.
    assert now == previous
    assert _leftovers(out_dir) == []
    assert _digest(model) == model_digest


@pytest.mark.slow
@pytest.mark.parametrize("delay", [0.5, 1.5, 3.0, 5.0])
def test_sigint_at_random_moments_of_a_real_freeze(delay: float, tmp_path: Path) -> None:
    """No hook: SIGINT after `delay` seconds of a real run. Whatever phase it hits, the
    output is either the previous file or a complete new one, and nothing is left over.
    (A SIGINT that lands while Python is still importing torch is the start-up case
    below.)"""
    model = save_tiny(tmp_path / "model.pt")
    out = tmp_path / "frozen.pt"
    out.write_bytes(b"previous")
    code, err = interrupt_after(["freeze", str(model), "-o", str(out), "--force"], delay)
    assert code in (0, 130, -signal.SIGINT), err
    if code != -signal.SIGINT:
        assert "Traceback" not in err, err
    if out.read_bytes() != b"previous":
        torch.jit.load(str(out))  # a complete, loadable model
    assert _leftovers(tmp_path) == []


@pytest.mark.slow
def test_ctrl_c_during_start_up_is_quiet(tmp_path: Path) -> None:
    model = save_tiny(tmp_path / "model.pt")
    proc = subprocess.Popen(
        [str(FREEZEVIEW), "explain", str(model)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    time.sleep(0.3)  # well inside `import torch`
    proc.send_signal(signal.SIGINT)
    _out, err = proc.communicate(timeout=120)
    assert "Traceback" not in err, err
    assert proc.returncode in (0, 130), err


def test_loaded_model_is_never_an_output(tmp_path: Path) -> None:
    """Whatever name reaches it (symlink, hard link), a loaded model is not overwritten."""
    from freezeview.engine.load.loading import load_model

    model = save_tiny(tmp_path / "model.pt")
    original = model.read_bytes()
    load_model(model)
    link = tmp_path / "alias.pt"
    link.symlink_to(model)
    hard = tmp_path / "hard.pt"
    os.link(model, hard)
    for name in (model, link, hard, tmp_path / "." / "model.pt"):
        with pytest.raises(OutputError, match="is the model freezeview is reading"):
            check_output_path(name, force=True)
        with pytest.raises(OutputError, match="never overwrites its input"), atomic_path(name):
            pass
    assert model.read_bytes() == original
    assert _leftovers(tmp_path) == []


def test_same_name_writes_under_the_final_name(tmp_path: Path) -> None:
    """``same_name``: the temporary file has the final name (in a hidden directory that
    goes with it), so torch.jit.save's archive is named after OUT.pt, not a temp name."""
    out = tmp_path / "model.pt"
    out.write_bytes(b"old")
    with atomic_path(out, same_name=True) as tmp:
        assert tmp.name == "model.pt" and tmp.parent.parent == tmp_path
        assert "freezeview-tmp" in tmp.parent.name and tmp.parent.name.startswith(".model.pt.")
        tmp.write_bytes(b"new")
    assert out.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]
    with pytest.raises(RuntimeError), atomic_path(out, same_name=True) as tmp:
        tmp.write_bytes(b"half")
        raise RuntimeError("a pass failed")
    assert out.read_bytes() == b"new" and sorted(p.name for p in tmp_path.iterdir()) == ["model.pt"]


def test_missing_directories_are_made_and_taken_away_on_failure(tmp_path: Path) -> None:
    target = tmp_path / "out" / "deeper" / "x.pt"
    write_text(target, "whole")
    assert target.read_text() == "whole"
    failed = tmp_path / "gone" / "deeper" / "x.pt"
    with pytest.raises(RuntimeError), atomic_path(failed) as tmp:
        tmp.write_text("half")
        raise RuntimeError("a failing pass")
    assert not (tmp_path / "gone").exists()  # nothing written, no empty folders either
    exported = tmp_path / "pictures" / "run1"
    with atomic_directory(exported) as work:
        (work / "a.svg").write_text("<svg/>")
    assert (exported / "a.svg").read_text() == "<svg/>"
    with pytest.raises(RuntimeError), atomic_directory(tmp_path / "none" / "run") as work:
        raise RuntimeError("graphviz failed")
    assert not (tmp_path / "none").exists()
