"""check's [migration] rules: ``converts = true`` and ``state_kept = true``.

The file's form is checked without running anything; a broken rule through the CLI with
the converter's child replaced by a crashing one (nothing converts: both rules break,
exit 1, one line each); and in the slow set the bundled example held against torch's own
converter run here: the writes ``state_kept`` names are the ones the program loses.
"""

from __future__ import annotations

import copy
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.ci.check import check
from freezeview.engine.ci.expectations import ExpectationsError, read_expectations
from freezeview.engine.freeze import REGISTRY
from freezeview.engine.migrate import migration as migration_module

EXAMPLE = ROOT / "examples" / "example.pt"
INPUTS = '[numerics]\ninput_shapes = ["1,3,16,16"]\nmax_abs = 1e-3\n\n'


def _write(folder: Path, text: str) -> Path:
    path = folder / "expect.toml"
    path.write_text(text)
    return path


def test_the_rules_are_read_with_their_lines(tmp_path: Path) -> None:
    path = _write(tmp_path, INPUTS + "[migration]\nconverts = true\nstate_kept = true\n")
    rules = read_expectations(path, set(REGISTRY)).rules
    found = [(r.kind, r.line) for r in rules if r.kind in ("converts", "state-kept")]
    assert found == [("converts", 6), ("state-kept", 7)]
    assert all(r.title.startswith("migration.") for r in rules if r.kind != "numerics")
    off = _write(tmp_path, INPUTS + "[migration]\nconverts = false\n")
    assert [r.kind for r in read_expectations(off, set(REGISTRY)).rules] == ["numerics"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ("[migration]\nconverts = true\n", "line 2: migration.converts runs torch's converter"),
        (INPUTS + "[migration]\nstate_kept = 1\n", "line 6: migration.state_kept must be true"),
        (INPUTS + "[migration]\nconvert = true\n", "line 6"),
    ],
    ids=["no-inputs", "not-a-flag", "unknown-key"],
)
def test_a_wrong_migration_section_is_one_sentence_naming_its_line(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(ExpectationsError) as caught:
        read_expectations(_write(tmp_path, text), set(REGISTRY))
    assert said in str(caught.value)
    assert str(caught.value).count("\n") == 0


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


def test_a_model_that_does_not_convert_breaks_both_rules_with_exit_1(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "double.pt"
    torch.jit.save(torch.jit.script(_Double().eval()), str(model))
    monkeypatch.setattr(
        migration_module,
        "child_command",
        lambda request, result: [sys.executable, "-c", "import os; os.abort()"],
    )
    small = INPUTS.replace("1,3,16,16", "4")
    expect = _write(tmp_path, small + "[migration]\nconverts = true\nstate_kept = true\n")
    code = main(["check", str(model), "--expect", str(expect)])
    out = capsys.readouterr().out
    assert code == 1
    lines = [line.strip() for line in out.splitlines()]
    converts = [line for line in lines if line.startswith("migration: expected it to convert")]
    assert len(converts) == 1 and "SIGABRT" in converts[0]
    assert sum(line.startswith("migration: expected the ExportedProgram") for line in lines) == 1
    assert "FAIL line 6: migration.converts" in out and "FAIL line 7" in out


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return not isinstance(b, torch.Tensor) and b is not None and a == b


@pytest.mark.slow
def test_state_kept_names_the_writes_torch_s_program_loses(tmp_path: Path) -> None:
    converter = pytest.importorskip("torch._export.converter")
    expect = _write(tmp_path, INPUTS + "[migration]\nconverts = true\nstate_kept = true\n")
    report = check(EXAMPLE, expect)
    by_kind = {r.rule.kind: r for r in report.results}
    x = torch.randn(1, 3, 16, 16)
    script = torch.jit.load(str(EXAMPLE))
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            program = converter.TS2EPConverter(script, (x,)).convert().module()
    except Exception:
        assert not by_kind["converts"].ok and not by_kind["state-kept"].ok
        return
    assert by_kind["converts"].ok
    ours = copy.deepcopy(script)
    lost = set()
    with torch.no_grad():
        for _ in range(3):
            ours(x.clone())
            program(x.clone())
            for name in ("steps", "history", "last_scale"):
                try:
                    theirs = program.get_buffer(name)
                except AttributeError:
                    theirs = None
                if not _same(getattr(ours, name), theirs):
                    lost.add(name)
    violations = by_kind["state-kept"].violations
    assert {v.path for v in violations} == lost
    for violation in violations:
        assert violation.reason is not None and violation.reason.source_text
        assert violation.reason.source and violation.reason.source in violation.message
    assert not report.ok
    schema = json.loads((ROOT / "docs" / "schemas" / "check.schema.json").read_text())
    jsonschema.validate(report.to_json(), schema)
