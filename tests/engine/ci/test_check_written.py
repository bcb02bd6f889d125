"""``check``'s ``[attributes] written_constants = false``: a folded constant the frozen
graph writes breaks it, with the writing node and line; other models hold it."""

from __future__ import annotations

from pathlib import Path

import oracle
import pytest
import torch
from corpus import case_by_name

from freezeview.cli import main
from freezeview.engine.ci.check import check
from freezeview.engine.ci.expectations import ExpectationsError

RULE = "[attributes]\nwritten_constants = false\n"


def _save(name: str, folder: Path) -> Path:
    path = folder / f"{name}.pt"
    torch.jit.save(case_by_name(name).build(), str(path))
    return path


def test_a_written_constant_breaks_the_rule(tmp_path: Path) -> None:
    model = _save("written_list_element", tmp_path)
    expect = tmp_path / "m.toml"
    expect.write_text(RULE)
    report = check(model, expect)
    assert not report.ok
    (result,) = report.results
    assert result.rule.kind == "written-constants" and result.rule.line == 2
    (violation,) = result.violations
    assert violation.path == "a"
    assert violation.reason is not None and violation.reason.code == "written-constant"
    assert "aten::add_" in violation.message and "frozen graph writes it" in violation.message
    # torch's status of the attribute is inlined: the rule is about the write, not it.
    assert oracle.status_from_torch(case_by_name("written_list_element").build())["a"] == "inlined"


@pytest.mark.parametrize("name", ["inplace_add", "written_fork_counters"])
def test_models_whose_frozen_graph_writes_no_constant_hold_it(name: str, tmp_path: Path) -> None:
    model = _save(name, tmp_path)
    expect = tmp_path / "m.toml"
    expect.write_text(RULE)
    assert check(model, expect).ok


def test_the_cli_exits_1_and_names_the_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = _save("written_dict_value", tmp_path)
    expect = tmp_path / "m.toml"
    expect.write_text(RULE)
    assert main(["check", str(model), "--expect", str(expect)]) == 1
    out = capsys.readouterr().out
    assert "line 2" in out and "stats" in out and "written_constants" in out


def test_true_states_no_rule_and_a_wrong_value_names_its_line(tmp_path: Path) -> None:
    model = _save("written_list_element", tmp_path)
    expect = tmp_path / "m.toml"
    expect.write_text("[attributes]\nwritten_constants = true\n")
    assert check(model, expect).ok
    expect.write_text('[attributes]\nwritten_constants = "no"\n')
    with pytest.raises(ExpectationsError, match="line 2"):
        check(model, expect)
