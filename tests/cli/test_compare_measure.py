"""``compare`` with sample inputs: both frozen forwards timed, old against new.

Consistency only (never speed): the ratio is the two medians' ratio, the same model
twice gives the same constants, and the latency never counts as a regression.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from measure_models import small_conv_net

from freezeview.cli import main
from freezeview.engine.ci.compare import compare

SHAPE = ["--input-shape", "1,3,16,16", "--time-budget", "0.01"]


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(path))
    return path


@pytest.mark.slow
def test_compare_json_times_both_frozen_forwards(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(model), str(model), "--json", *SHAPE]) == 0
    data = json.loads(capsys.readouterr().out)
    latency = data["latency_ms"]
    old, new = latency["old"], latency["new"]
    assert latency["ratio"] == pytest.approx(
        new["frozen"]["median"] / old["frozen"]["median"], rel=1e-3
    )
    assert old["threads"] == new["threads"] == 1
    assert data["regressions"] == []


def test_compare_without_inputs_or_budget_times_nothing(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["compare", str(model), str(model), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["latency_ms"] is None
    argv = ["compare", str(model), str(model), "--json", "--input-shape", "1,3,16,16"]
    assert main([*argv, "--time-budget", "0"]) == 0
    assert json.loads(capsys.readouterr().out)["latency_ms"] is None


@pytest.mark.slow
def test_same_model_twice_has_the_same_constants(model: Path) -> None:
    """Sizes are deterministic: torch folds the same model to the same constants."""
    result = compare(str(model), str(model), inputs=(torch.randn(1, 3, 16, 16),), measure=(1, 0.01))
    old, new = result.old.measurement, result.new.measurement
    assert old is not None and new is not None
    assert old.sizes == new.sizes
    assert old.portability == new.portability
    assert any("new against old" in line for line in result.latency_lines())
