"""migrate --aoti: the ExportedProgram compiled with AOTInductor, or one sentence why not.

The compile runs in the slow set (a C++ compile takes seconds even for a tiny model) and
only where a C++ compiler is on the PATH; the sentence without a compiler is tested by
hiding the compiler, and the exit code by running the same model with and without
``--aoti`` (the converter's child replaced by a crashing one, so nothing converts).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.migrate import migration as migration_module

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "migrate.schema.json").read_text())


class Affine(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(x * 2 + 1)


@pytest.fixture(scope="module")
def affine(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("aoti") / "affine.pt"
    torch.jit.save(torch.jit.script(Affine().eval()), str(path))
    return path


def test_without_a_compiler_aoti_is_one_sentence_and_the_exit_code_holds(
    affine: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name, *args, **kwargs: None)
    monkeypatch.setattr(
        migration_module,
        "child_command",
        lambda request, result: [sys.executable, "-c", "import os; os.abort()"],
    )
    args = ["migrate", str(affine), "--input-shape", "4", "--time-budget", "0", "--json"]
    without = main(args)
    plain = json.loads(capsys.readouterr().out)
    with_aoti = main([*args, "--aoti"])
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    assert with_aoti == without == 1
    assert plain["aoti"] is None
    note = document["aoti"]["note"]
    assert note == migration_module.aoti_unavailable()
    assert note.startswith("AOTInductor not compiled: no C++ compiler found")
    assert note.count(".") == 1 and note.endswith(".")
    assert not document["aoti"]["compiled"]


def test_the_compiler_looked_for_is_cxx_when_set(monkeypatch: pytest.MonkeyPatch) -> None:
    if "torch._inductor.config" in sys.modules:
        config = sys.modules["torch._inductor.config"]
        expected = tuple(n for n in config.cpp.cxx if n)  # type: ignore[attr-defined]
        assert migration_module.compiler_names() == expected
        return
    monkeypatch.setenv("CXX", "my-c++")
    assert migration_module.compiler_names() == ("my-c++",)
    monkeypatch.setattr(shutil, "which", lambda name, *a, **k: "/x" if name == "my-c++" else None)
    assert migration_module.aoti_unavailable() == ""


@pytest.mark.slow
def test_a_torch_without_aoti_packages_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    inductor = pytest.importorskip("torch._inductor")
    from freezeview.engine.migrate import aoti_child

    if hasattr(inductor, "aoti_compile_and_package"):
        monkeypatch.delattr(inductor, "aoti_compile_and_package")
    assert aoti_child._run({}) == {"available": False}


@pytest.mark.slow
@pytest.mark.long_pole
def test_aoti_compiles_the_program_and_times_it(
    affine: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    if migration_module.aoti_unavailable():
        pytest.skip(
            "a C++ compiler is needed for AOTInductor: " + migration_module.aoti_unavailable()
        )
    # One compile thread: inductor's pool of compile workers costs more than it saves here.
    monkeypatch.setenv("TORCHINDUCTOR_COMPILE_THREADS", "1")
    x = torch.randn(4)
    torch.save(x, str(tmp_path / "x.pt"))
    args = ["--inputs", str(tmp_path / "x.pt"), "--aoti", "--time-budget", "0.05", "--json"]
    code = main(["migrate", str(affine), *args])
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    import torch._inductor as inductor

    aoti = document["aoti"]
    if document["verdict"] == "does not convert":  # torch 2.4's converter, on any model
        assert aoti["note"] == "AOTInductor not compiled: the model does not convert."
        return
    if not hasattr(inductor, "aoti_compile_and_package"):
        assert aoti["note"] == migration_module.NO_AOTI
        return
    script = torch.jit.load(str(affine))
    assert torch.equal(script(x), Affine()(x))
    assert aoti["compiled"], aoti
    assert aoti["compile_seconds"] > 0 and aoti["outputs_same"] is True
    pair = document["latency"]["aoti"]
    assert pair["candidate"]["runs"] > 0 and pair["verdict"].startswith("AOTInductor forward")
    assert code == (0 if document["verdict"] == "converts and behaves the same" else 1)
