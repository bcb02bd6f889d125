"""``check --write-expect`` and written constants: a model whose frozen graph writes no
folded constant gets ``written_constants = false`` (a new one fails CI later); a model
whose frozen graph writes some gets it commented out, naming them, so the file holds
today. torch is the oracle for which attributes are written
(``test_written_constants.torch_written_paths``)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from corpus import case_by_name

from engine.reasons.test_written_constants import torch_written_paths
from freezeview.cli import main
from freezeview.engine.ci.check import check
from freezeview.engine.ci.expectations import read_expectations
from freezeview.engine.freeze import REGISTRY


def _write_expect(name: str, folder: Path) -> tuple[Path, Path]:
    model = folder / f"{name}.pt"
    torch.jit.save(case_by_name(name).build(), str(model))
    expect = folder / f"{name}.toml"
    assert main(["check", str(model), "--write-expect", str(expect)]) == 0
    return model, expect


@pytest.mark.parametrize("name", ["inplace_add", "written_fork_counters", "written_list_element"])
def test_the_written_constants_rule_is_written_when_it_holds(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    written, _ = torch_written_paths(case_by_name(name))
    model, expect = _write_expect(name, tmp_path)
    text = expect.read_text()
    rules = [r.kind for r in read_expectations(expect, set(REGISTRY)).rules]
    if written:
        assert "written-constants" not in rules
        assert "# written_constants = false" in text
        noun = "folded constant" if len(written) == 1 else "folded constants"
        comment = next(line for line in text.splitlines() if f"{noun} today" in line)
        assert f"writes {len(written)} {noun} today" in comment
        assert set(comment.split(": ", 1)[1].split(", ")) == written
    else:
        assert rules.count("written-constants") == 1
        assert "\nwritten_constants = false\n" in text
    # The file holds for the model it was written from, either way.
    assert check(model, expect).ok
    capsys.readouterr()


def test_a_written_constant_later_breaks_the_written_rule(tmp_path: Path) -> None:
    """The line written for a clean model fails on a model that writes a constant."""
    _, clean = _write_expect("inplace_add", tmp_path)
    line = next(x for x in clean.read_text().splitlines() if x == "written_constants = false")
    rule = tmp_path / "rule.toml"
    rule.write_text(f"[attributes]\n{line}\n")
    model = tmp_path / "written.pt"
    torch.jit.save(case_by_name("written_list_element").build(), str(model))
    report = check(model, rule)
    assert not report.ok
    assert [v.path for v in report.violations] == ["a"]
