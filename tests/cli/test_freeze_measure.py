"""``freezeview freeze`` with sample inputs: latency, sizes and portability per step.

torch is the oracle: the written file's size and what torch loads back from it, the
constants of ``torch.jit.freeze``'s own graph, torch's thread count after the command.
Timing is checked for structure and consistency, never for speed.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Any

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net

from freezeview.cli import main
from freezeview.engine.measure import constant_bytes

SHAPE = ["--input-shape", ",".join(map(str, SMALL_INPUT_SHAPE))]
QUICK = ["--time-budget", "0.01"]


@pytest.fixture(autouse=True)
def _unbounded_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """Output to a pipe is laid out without a width limit: the verdict is one line."""
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(path))
    return path


def _json(capsys: pytest.CaptureFixture[str], argv: list[str], code: int = 0) -> list[Any]:
    assert main(argv) == code
    return [json.loads(line) for line in capsys.readouterr().out.splitlines()]


@pytest.mark.slow
def test_json_lines_carry_latency_constants_sizes_and_portability(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frozen.pt"
    threads = torch.get_num_threads()
    docs = _json(
        capsys, ["freeze", str(model), "-o", str(out), "--json", *SHAPE, *QUICK, "--threads", "2"]
    )
    assert torch.get_num_threads() == threads
    steps, result = docs[:-1], docs[-1]
    for step in steps:
        assert (step["latency_ms"] is not None) == step["changed"], step["name"]
        assert isinstance(step["constant_bytes"], int)
    latency = result["latency_ms"]
    assert latency["threads"] == 2
    # The verdict's figures are timed side by side; every step's in its turn.
    assert latency["frozen"]["runs"] > 0 and latency["unfrozen"]["runs"] > 0
    assert latency["ratio"] == pytest.approx(
        latency["frozen"]["median"] / latency["unfrozen"]["median"], rel=1e-3
    )
    assert set(latency["made_by"]) <= {s["name"] for s in steps if s["latency_ms"]}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.jit.freeze(small_conv_net())
    sizes = result["sizes"]
    assert sizes["constant_bytes"] == constant_bytes([reference.graph])
    assert steps[-1]["constant_bytes"] == sizes["constant_bytes"]
    assert sizes["output_file_bytes"] == out.stat().st_size
    assert sizes["input_file_bytes"] == model.stat().st_size
    port = result["portability"]
    assert port["roundtrip"] == "same" and port["saveable"]
    assert port["devices"] == ["cpu"] and port["backend_only_nodes"] == {}
    # What the round trip said, torch says too: the file loads and gives torch's outputs.
    x = torch.randn(SMALL_INPUT_SHAPE)
    torch.testing.assert_close(torch.jit.load(str(out))(x), reference(x))


def test_without_inputs_nothing_is_timed(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = _json(capsys, ["freeze", str(model), "-o", str(tmp_path / "f.pt"), "--json"])
    assert all(step["latency_ms"] is None for step in docs[:-1])
    result = docs[-1]
    assert result["latency_ms"] is None
    assert result["portability"]["roundtrip"] is None and result["portability"]["saveable"]
    assert result["sizes"]["constant_bytes"] > 0


def test_optimize_for_inference_reports_before_refusing_to_write(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """MKLDNN constants: nothing written, exit 1, but the numbers and the step are shown."""
    out = tmp_path / "opt.pt"
    argv = ["freeze", str(model), "-o", str(out), "--json", "--optimize-for-inference"]
    assert main([*argv, *SHAPE, *QUICK]) in (0, 1)
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    mkldnn = next(s for s in docs if s.get("name") == "convert_to_mkldnn")
    result = docs[-1]
    if not mkldnn["changed"]:
        pytest.skip("this torch build converts nothing to MKLDNN")
    assert not out.exists() and result["output"] is None
    port = result["portability"]
    assert port["saveable"] is False and port["roundtrip"] == "unsaveable"
    assert port["step"] == "convert_to_mkldnn" and "MKLDNN" in port["note"]
    assert "prim::ConstantMKLDNNTensor" in port["backend_only_nodes"]
    assert mkldnn["latency_ms"] is not None


def test_table_has_the_latency_column_and_ends_with_the_verdict(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frozen.pt"
    assert main(["freeze", str(model), "-o", str(out), *SHAPE, "--time-budget", "0.01"]) == 0
    text = capsys.readouterr().out
    assert "latency vs unfrozen" in text and "constants" in text
    lines = [line for line in text.splitlines() if line.strip()]
    assert lines[-1].startswith("frozen forward") and "1 thread" in lines[-1]
    assert any(line.startswith("unfrozen forward:") for line in lines)
    assert any("saved and loaded in a fresh process: same outputs" in line for line in lines)


@pytest.mark.parametrize(
    ("option", "value"),
    [("--threads", "0"), ("--threads", "two"), ("--time-budget", "-1"), ("--time-budget", "x")],
)
def test_bad_measure_options_are_one_sentence(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], option: str, value: str
) -> None:
    code = main(["freeze", str(model), "-o", str(tmp_path / "f.pt"), option, value])
    err = capsys.readouterr().err.strip()
    assert code == 2
    assert option in err and len(err.splitlines()) == 1
