"""Models with custom operators: ``--import``, ``--load-library`` and the auto-import.

The operators come from ``tests/ext_packages``: ``fvops`` (a package named like its
operators' namespace, as torchvision is) and ``fv_other_ops`` (registers ``fvother::``,
which freezeview never guesses). Every load runs in a fresh interpreter, as a user's
command does: an operator registered once stays registered for the whole process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from repo_paths import TESTS

from freezeview.engine.load import extensions
from freezeview.engine.plumbing.errors import BadInputError

PACKAGES = TESTS / "ext_packages"


@pytest.fixture(scope="module")
def op_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``fvops.pt`` and ``fvother.pt``, saved by an interpreter that had the operators."""
    folder = tmp_path_factory.mktemp("custom-ops")
    env = {**os.environ, "PYTHONPATH": str(PACKAGES), "PYTHONWARNINGS": "ignore"}
    subprocess.run(
        [sys.executable, str(PACKAGES / "build_models.py"), str(folder)], check=True, env=env
    )
    return folder


def _freezeview(*argv: str, packages: bool, cwd: Path) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    if packages:
        env["PYTHONPATH"] = str(PACKAGES)
    return subprocess.run(
        [sys.executable, "-m", "freezeview", *argv],
        capture_output=True,
        text=True,
        timeout=180,
        env=env,
        cwd=cwd,
    )


def _one_sentence(stderr: str) -> str:
    lines = [line for line in stderr.splitlines() if line.strip()]
    errors = [line for line in lines if line.startswith("error: ")]
    assert len(errors) == 1, stderr
    assert "Traceback" not in stderr
    return errors[0]


@pytest.mark.slow
def test_unknown_operator_names_it_and_the_flags(op_models: Path) -> None:
    proc = _freezeview("explain", str(op_models / "fvother.pt"), packages=True, cwd=op_models)
    assert proc.returncode == 2
    sentence = _one_sentence(proc.stderr)
    assert "fvother::shift" in sentence
    assert "--import" in sentence and "--load-library" in sentence


@pytest.mark.slow
def test_import_flag_defines_the_operator(op_models: Path) -> None:
    model = str(op_models / "fvother.pt")
    proc = _freezeview("explain", model, "--import", "fv_other_ops", packages=True, cwd=op_models)
    assert proc.returncode == 0, proc.stderr
    assert "b" in proc.stdout and "inlined" in proc.stdout
    assert "note: freezeview imported" not in proc.stderr


@pytest.mark.slow
def test_the_namespace_package_is_imported_by_itself_and_said_so(op_models: Path) -> None:
    proc = _freezeview("explain", str(op_models / "fvops.pt"), packages=True, cwd=op_models)
    assert proc.returncode == 0, proc.stderr
    notes = [line for line in proc.stderr.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: freezeview imported fvops to define the operator fvops::scale "
        "(pass --import fvops to say so)."
    ]


@pytest.mark.slow
def test_without_the_package_installed_the_sentence_suggests_it(op_models: Path) -> None:
    proc = _freezeview("explain", str(op_models / "fvops.pt"), packages=False, cwd=op_models)
    assert proc.returncode == 2
    sentence = _one_sentence(proc.stderr)
    assert "fvops::scale" in sentence and "--import fvops" in sentence


@pytest.mark.slow
def test_freeze_and_export_take_the_flags(op_models: Path, tmp_path: Path) -> None:
    model = str(op_models / "fvother.pt")
    frozen = tmp_path / "frozen.pt"
    proc = _freezeview(
        "freeze", model, "--import", "fv_other_ops", "-o", str(frozen), packages=True, cwd=tmp_path
    )
    assert proc.returncode == 0, proc.stderr
    assert frozen.is_file()
    proc = _freezeview(
        "export", model, "--import=fv_other_ops", "-o", str(tmp_path / "x"), packages=True,
        cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (tmp_path / "x" / "index.html").is_file()


# The console script's answer to each bad flag (the fast set checks the same sentences
# in this process, below).
@pytest.mark.slow
@pytest.mark.parametrize(
    ("flag", "value", "words"),
    [
        ("--load-library", "/no/such/libops.so", "no such file"),
        ("--import", "no_such_module_here", "could not import"),
    ],
)
def test_a_bad_flag_is_one_sentence_and_exit_2(
    op_models: Path, flag: str, value: str, words: str
) -> None:
    proc = _freezeview(
        "explain", str(op_models / "fvother.pt"), flag, value, packages=True, cwd=op_models
    )
    assert proc.returncode == 2
    sentence = _one_sentence(proc.stderr)
    assert value in sentence and words in sentence


# -- the engine module, in this process ---------------------------------------------------


def test_load_library_hands_the_path_to_torch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A library that exists goes to ``torch.ops.load_library`` (no compiler here)."""
    library = tmp_path / "libfvops.so"
    library.write_bytes(b"\x7fELF")
    loaded: list[str] = []
    monkeypatch.setattr(torch.ops, "load_library", loaded.append)
    extensions.load_extensions(libraries=[str(library)])
    assert loaded == [str(library)]


def test_a_module_that_cannot_be_imported_is_one_sentence() -> None:
    with pytest.raises(BadInputError) as caught:
        extensions.load_extensions(imports=["no_such_module_here"])
    sentence = str(caught.value)
    assert "--import no_such_module_here" in sentence and "could not import" in sentence
    assert "\n" not in sentence


def test_a_missing_library_is_one_sentence(tmp_path: Path) -> None:
    missing = tmp_path / "libops.so"
    with pytest.raises(BadInputError) as caught:
        extensions.load_extensions(libraries=[str(missing)])
    assert str(missing) in str(caught.value) and "no such file" in str(caught.value)


def test_a_library_torch_cannot_load_is_one_sentence(tmp_path: Path) -> None:
    library = tmp_path / "libnot.so"
    library.write_text("not a shared library")
    with pytest.raises(BadInputError) as caught:
        extensions.load_extensions(libraries=[str(library)])
    assert str(library) in str(caught.value) and "\n" not in str(caught.value)
    with pytest.raises(BadInputError, match="directory"):
        extensions.load_extensions(libraries=[str(tmp_path)])


def test_unknown_operator_parsing() -> None:
    assert extensions.unknown_operator("Unknown builtin op: fvops::scale.\n...") == "fvops::scale"
    assert extensions.unknown_operator("something else") is None
    assert extensions.auto_import_for("no_such_namespace_xyz::op") is None
    assert extensions.auto_import_for("torch::op") is None  # imported already


@pytest.mark.slow
@pytest.mark.asyncio
async def test_the_app_opens_a_model_with_custom_operators(
    op_models: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``freezeview MODEL.pt --import X``: the app's engine process imports X first."""
    from ui.conftest import wait_ready

    from freezeview.session import SessionOptions
    from freezeview.ui.app import FreezeviewApp

    monkeypatch.setenv("PYTHONPATH", str(PACKAGES))
    app = FreezeviewApp(
        op_models / "fvother.pt",
        options=SessionOptions(imports=("fv_other_ops",)),
        output_dir=tmp_path / "out",
    )
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        assert not screen.has_class("-failed")
        assert any("fvother::shift" in line for line in screen.ir.plain_lines())
        assert screen.model_tree.view_of("b") is not None
