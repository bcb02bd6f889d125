"""``freezeview freeze`` with inputs gives one answer: the verdict's figures are the table's.

One run's text is parsed: the unfrozen line's median, the last timed row's latency cell
and the verdict's "(frozen vs unfrozen)" pair must be the same figures. One run's JSON
too: the result's frozen latency is the last changed step's own ``latency_ms`` and the
verdict quotes exactly the result's two medians. How forwards are timed is read off
torch inside the timed call (inference mode by default, autograd with ``--autograd``).
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net

import freezeview.engine.measure.measured_run as measured_run
from freezeview.cli import main
from freezeview.engine.measure import format_ms

SHAPE = ["--input-shape", ",".join(map(str, SMALL_INPUT_SHAPE))]
QUICK = ["--time-budget", "0.01"]
_MS = r"[0-9.e+-]+ ms"


@pytest.fixture(autouse=True)
def _unbounded_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    path = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(path))
    return path


@pytest.mark.slow
def test_verdict_table_and_unfrozen_line_quote_the_same_figures(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["freeze", str(model), "-o", str(tmp_path / "f.pt"), *SHAPE, *QUICK]) == 0
    lines = capsys.readouterr().out.splitlines()
    unfrozen_line = next(line for line in lines if line.startswith("unfrozen forward:"))
    unfrozen = re.match(rf"unfrozen forward: ({_MS}) median", unfrozen_line)
    assert unfrozen is not None
    assert "timed under inference_mode" in unfrozen_line
    verdict = lines[-1]
    pair = re.search(rf"\(({_MS}) vs ({_MS}), median", verdict)
    assert pair is not None, verdict
    # The table's latency cells, in row order: the last one is the final graph's.
    cells = [
        m.group(1) for line in lines if (m := re.search(rf"│\s+({_MS}) (?:same|[+-]\d)", line))
    ]
    assert cells, "no latency cell in the table"
    assert pair.group(1) == cells[-1]
    assert pair.group(2) == unfrozen.group(1)
    assert sum(line.startswith("unfrozen forward") for line in lines) == 1


@pytest.mark.slow
def test_json_verdict_quotes_the_result_figures_and_the_last_step(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["freeze", str(model), "-o", str(tmp_path / "f.pt"), "--json", *SHAPE, *QUICK]
    assert main(argv) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    steps, result = docs[:-1], docs[-1]
    latency = result["latency_ms"]
    last = [s for s in steps if s["latency_ms"] is not None][-1]
    assert latency["frozen"] == last["latency_ms"]
    figures = (
        f"({format_ms(latency['frozen']['median'])} vs {format_ms(latency['unfrozen']['median'])},"
    )
    assert figures in latency["verdict"]
    assert latency["timed_under"] == "inference_mode"
    assert {s["latency_ms"]["timed_under"] for s in steps if s["latency_ms"]} == {"inference_mode"}
    assert set(latency["made_by"]) <= {s["name"] for s in steps if s["latency_ms"]}


@pytest.mark.slow
def test_autograd_option_times_with_grad_and_says_so(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    real = measured_run.time_forward
    seen: set[tuple[bool, bool]] = set()

    def recording(call, **kwargs):  # type: ignore[no-untyped-def]
        def wrapped():  # type: ignore[no-untyped-def]
            seen.add((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
            return call()

        return real(wrapped, **kwargs)

    monkeypatch.setattr(measured_run, "time_forward", recording)
    out = tmp_path / "f.pt"
    assert main(["freeze", str(model), "-o", str(out), *SHAPE, *QUICK]) == 0
    assert seen == {(True, False)}
    assert "timed under inference_mode" in capsys.readouterr().out
    seen.clear()
    assert (
        main(["freeze", str(model), "-o", str(out), "--force", "--autograd", *SHAPE, *QUICK]) == 0
    )
    assert seen == {(False, True)}
    text = capsys.readouterr().out
    assert "timed with autograd on" in text and "inference_mode" not in text
