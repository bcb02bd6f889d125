"""``freezeview explain`` with sample inputs: the final latency figure.

Structure and consistency only: the figure is torch.jit.freeze's forward against the
unfrozen one, stated with its threads; bad options are one sentence.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net

from freezeview.cli import main

SHAPE = ["--input-shape", ",".join(map(str, SMALL_INPUT_SHAPE)), "--time-budget", "0.01"]


@pytest.fixture(autouse=True)
def _unbounded_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a pipe is laid out without a width limit: the verdict is one line."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(path))
    return path


def test_explain_ends_with_the_final_figure(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(model), *SHAPE]) == 0
    lines = [line for line in capsys.readouterr().out.splitlines() if line.strip()]
    assert lines[-1].startswith("frozen forward") and "1 thread" in lines[-1]
    # What was timed is named whatever the noise: "made by: torch.jit.freeze -21%"
    # outside it, "frozen by torch.jit.freeze" inside it (never as a cause).
    assert "torch.jit.freeze" in lines[-1]
    assert ("made by" in lines[-1]) != ("inside the noise" in lines[-1])


def test_explain_json_latency_is_consistent(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(model), "--json", *SHAPE, "--threads", "2"]) == 0
    data = json.loads(capsys.readouterr().out)
    latency = data["latency_ms"]
    assert latency["threads"] == 2
    ratio = latency["frozen"]["median"] / latency["unfrozen"]["median"]
    assert latency["ratio"] == pytest.approx(ratio, rel=1e-3)
    assert latency["made_by"] in ([], ["freeze"])
    assert (latency["made_by"] == []) == latency["inside_noise"]


def test_explain_without_inputs_or_budget_times_nothing(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(model), "--json"]) == 0
    assert "latency_ms" not in json.loads(capsys.readouterr().out)
    assert main(["explain", str(model), "--json", *SHAPE[:2], "--time-budget", "0"]) == 0
    assert "latency_ms" not in json.loads(capsys.readouterr().out)


def test_explain_inputs_that_do_not_fit_are_one_sentence(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(model), "--input-shape", "1,5,16,16"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "inputs" in err
