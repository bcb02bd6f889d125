"""``freezeview freeze`` with inputs gives one answer: the verdict's figures are the table's.

One run's text is parsed: the unfrozen line's median, the last timed row's latency cell
and the verdict's "(frozen vs unfrozen)" pair must be the same figures. One run's JSON
too: the verdict quotes exactly the result's two medians. With stubbed timings, the pair
timed again in alternating blocks is the one figure of each everywhere (the per-step
unfrozen figure is in no line). Two runs on a machine a busy loop loads never contradict
each other. How forwards are timed is read off torch inside the timed call (inference
mode by default, autograd with ``--autograd``).
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
from freezeview.engine.measure.latency import Timing
from freezeview.engine.measure.measure_values import Latency

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


def _timing(median: float) -> Timing:
    latency = Latency(median, median * 0.99, median * 1.01, median * 0.01, 10, 1, 3, 10)
    return Timing(latency, 13, median * 13 / 1000, median * 13 / 1000)


@pytest.fixture()
def stubbed(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Per-step timings of 20 ms (the unfrozen forward, timed first) and 7 ms (each
    step); the interleaved pair 10 ms (unfrozen) and 5 ms (frozen); the round trip
    stubbed. The list records which timing ran, in order."""
    ran: list[str] = []

    def each(call, **kwargs):  # type: ignore[no-untyped-def]
        call()
        ran.append("step" if ran else "unfrozen")
        return _timing(20.0 if len(ran) == 1 else 7.0)

    def pair(first, second, **kwargs):  # type: ignore[no-untyped-def]
        first(), second(), first(), second()
        ran.append("pair")
        return _timing(10.0), _timing(5.0)

    monkeypatch.setattr(measured_run, "time_forward", each)
    monkeypatch.setattr(measured_run, "time_pair", pair)
    monkeypatch.setattr(measured_run, "roundtrip", lambda *a, **k: ("same", ""))
    return ran


def test_the_interleaved_pair_is_the_one_figure_in_text_and_json(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], stubbed: list[str]
) -> None:
    assert main(["freeze", str(model), "-o", str(tmp_path / "f.pt"), *SHAPE]) == 0
    assert stubbed[-1] == "pair" and stubbed.count("pair") == 1
    out = capsys.readouterr().out
    lines = out.splitlines()
    unfrozen = [line for line in lines if line.startswith("unfrozen forward:")]
    assert len(unfrozen) == 1 and unfrozen[0].startswith("unfrozen forward: 10.0 ms median")
    assert "in alternating blocks with the frozen forward" in unfrozen[0]
    cells = [m.group(1) for line in lines if (m := re.search(rf"│\s+({_MS} \S+)", line))]
    assert cells[-1] == "5.00 ms -50%"
    assert set(cells[:-1]) == {"7.00 ms -30%"}
    assert lines[-1].startswith("frozen forward 2x faster than unfrozen (5.00 ms vs 10.0 ms,")
    assert "20.0 ms" not in out  # the unfrozen figure timed in its turn is gone

    argv = ["freeze", str(model), "-o", str(tmp_path / "g.pt"), "--json", *SHAPE]
    assert main(argv) == 0
    result = json.loads(capsys.readouterr().out.splitlines()[-1])
    latency = result["latency_ms"]
    assert latency["unfrozen"]["median"] == 10.0 and latency["frozen"]["median"] == 5.0
    assert latency["interleaved"] is True and latency["ratio"] == 0.5
    assert latency["verdict"] == lines[-1]


@pytest.mark.slow
def test_json_verdict_quotes_the_result_figures_and_the_last_step(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["freeze", str(model), "-o", str(tmp_path / "f.pt"), "--json", *SHAPE, *QUICK]
    assert main(argv) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    steps, result = docs[:-1], docs[-1]
    latency = result["latency_ms"]
    # A step's line carries its own timing, taken in its turn; the result's pair was
    # timed again, in alternating blocks, under the same rule.
    last = [s for s in steps if s["latency_ms"] is not None][-1]
    assert latency["interleaved"] is True
    assert latency["frozen"]["timed_under"] == last["latency_ms"]["timed_under"]
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


def _direction(latency: dict) -> str:  # type: ignore[type-arg]
    if latency["inside_noise"]:
        return "same"
    return "faster" if latency["ratio"] < 1 else "slower"


@pytest.mark.slow
def test_two_runs_on_a_busy_machine_never_contradict_each_other(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A busy loop spins in another process through both runs: their verdicts go the
    same way, or one of them says "as fast" (never "faster" once and "slower" after)."""
    import subprocess
    import sys

    spin = "import time\nend = time.time() + 60\nwhile time.time() < end: pass"
    busy = subprocess.Popen([sys.executable, "-c", spin])
    try:
        seen = []
        for name in ("a.pt", "b.pt"):
            argv = ["freeze", str(model), "-o", str(tmp_path / name), "--json", *SHAPE]
            assert main([*argv, "--time-budget", "0.1"]) == 0
            result = json.loads(capsys.readouterr().out.splitlines()[-1])
            assert result["latency_ms"]["interleaved"] is True
            seen.append(_direction(result["latency_ms"]))
    finally:
        busy.kill()
        busy.wait()
    assert {"faster", "slower"} - set(seen), seen
