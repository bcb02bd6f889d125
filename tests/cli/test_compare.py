"""``freezeview compare``: what freezing does differently to two versions of a model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from models.versions import save_version

import freezeview
from freezeview.cli import main


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("versions")
    names = ["base", "in-place", "view", "broken-conv-bn", "renamed", "set-attr"]
    return {name: save_version(name, folder / f"{name}.pt") for name in names}


def _compare(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(["compare", *argv])
    return code, capsys.readouterr().out


def test_identical_models_compare_clean(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _compare(capsys, str(models["base"]), str(models["base"]), "--fail-on-regression")
    assert code == 0
    assert "freezing treats both models the same" in out and "no regression" in out
    code, out = _compare(capsys, str(models["base"]), str(models["base"]), "--json")
    doc = json.loads(out)
    assert doc["identical"] is True and doc["regressions"] == []


def test_an_in_place_write_is_a_regression_with_its_source_line(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    old, new = str(models["base"]), str(models["in-place"])
    code, out = _compare(capsys, old, new, "--fail-on-regression")
    assert code == 1
    assert "REGRESSION cache: inlined -> kept: in-place-write" in out
    assert "| self.cache.add_(pooled.mean(0))" in out
    code, out = _compare(capsys, old, new)
    assert code == 0, "without --fail-on-regression differences are not a failure"
    doc = json.loads(_compare(capsys, old, new, "--json")[1])
    change = next(c for c in doc["status_changes"] if c["path"] == "cache")
    assert change["regression"] and change["old"] == "inlined" and change["new"] == "kept"
    assert change["reasons"][0]["source_text"] == "self.cache.add_(pooled.mean(0))"
    # torch agrees, in this run.
    assert torch.jit.freeze(torch.jit.load(new))._c.hasattr("cache")
    assert not torch.jit.freeze(torch.jit.load(old))._c.hasattr("cache")


def test_kept_bytes_that_grow_are_a_regression(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(_compare(capsys, str(models["base"]), str(models["view"]), "--json")[1])
    assert doc["kept_tensor_bytes"]["old"] == 0 and doc["kept_tensor_bytes"]["new"] == 16
    assert any("grew from 0 to 16 bytes" in r for r in doc["regressions"])
    assert [a["path"] for a in doc["added"]] == ["window"]


def test_a_pass_that_stops_firing_is_a_regression(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _compare(
        capsys, str(models["base"]), str(models["broken-conv-bn"]), "--fail-on-regression"
    )
    assert code == 1
    assert "pass fold_conv_bn: fired 1x -> 0x" in out
    assert "pass fold_conv_bn fired 1x and no longer fires" in out
    assert "aten::batch_norm" in out  # node kinds of the frozen graphs differ


def test_a_renamed_module_is_removed_plus_added_with_a_hint(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(_compare(capsys, str(models["base"]), str(models["renamed"]), "--json")[1])
    assert {a["path"] for a in doc["removed"]} >= {"fc", "fc.weight", "fc.bias"}
    assert {a["path"] for a in doc["added"]} >= {"head", "head.weight", "head.bias"}
    assert {"removed": "fc.weight", "added": "head.weight"} in doc["renamed_hints"]
    assert doc["regressions"] == []


def test_markdown_for_a_pull_request(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _compare(
        capsys, str(models["base"]), str(models["set-attr"]), "--format", "markdown"
    )
    assert code == 0
    assert out.startswith("### freezeview compare: `base.pt` → `set-attr.pt`")
    assert "| attribute | before | after | why (after) |" in out
    assert "| `calls` | dropped | kept |" in out


@pytest.mark.slow
def test_numerics_of_both_with_sample_inputs(
    models: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(
        _compare(
            capsys,
            str(models["base"]),
            str(models["broken-conv-bn"]),
            "--input-shape",
            "2,3,8,8",
            "--time-budget",
            "0",
            "--json",
        )[1]
    )
    assert doc["numerics"]["old"]["outputs"] == 1 and doc["numerics"]["new"]["outputs"] == 1


def test_a_missing_model_is_one_sentence_and_exit_2(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["compare", str(models["base"]), str(tmp_path / "nope.pt")])
    err = capsys.readouterr().err
    assert code == 2 and "nope.pt" in err and len(err.strip().splitlines()) == 1


def test_python_api(models: dict[str, Path]) -> None:
    result = freezeview.compare(str(models["base"]), str(models["in-place"]))
    assert [c.path for c in result.changes if c.regression] == ["cache"]


def test_two_files_of_one_name_are_told_apart_in_the_notes(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # A model and torch's frozen copy of it, both named base.pt in two folders.
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    old, new = tmp_path / "old" / "base.pt", tmp_path / "new" / "base.pt"
    old.write_bytes(models["base"].read_bytes())
    module = torch.jit.load(str(models["base"])).eval()
    torch.jit.save(torch.jit.freeze(module), str(new))
    main(["compare", str(old), str(new), "--time-budget", "0"])
    err = capsys.readouterr().err
    # The note names the side and the path, never the bare name both files share.
    assert f"note: the new model ({new}) is already frozen" in err
    assert "note: base.pt" not in err and "old model" not in err
