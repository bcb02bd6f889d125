"""Save, load in a fresh process, compare (freezeview/engine/measure/portability.py).

torch is the oracle: what it saves, what a fresh interpreter loads back, what that returns.
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net
from torch import nn

from freezeview.engine.measure.measure_values import Measurement, Portability
from freezeview.engine.measure.portability import portability, roundtrip, unsaveable_reason


def _frozen(optimize: bool = False) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(small_conv_net())
        return torch.jit.optimize_for_inference(frozen) if optimize else frozen


@pytest.mark.slow
def test_frozen_model_round_trips_with_the_same_outputs(tmp_path) -> None:
    """A fresh process loads what torch.jit.save wrote and returns the same outputs."""
    frozen = _frozen()
    x = torch.randn(SMALL_INPUT_SHAPE)
    expected = frozen(x)
    assert roundtrip(frozen, (x,), expected) == ("same", "")
    # A file written already is loaded as it is (freeze -o): a wrong file shows.
    other = tmp_path / "other.pt"
    torch.jit.save(torch.jit.freeze(torch.jit.script(nn.Linear(3, 3).eval())), str(other))
    outcome, sentence = roundtrip(frozen, (x,), expected, saved=other)
    assert outcome == "unsaveable" and sentence.endswith(".")
    report = portability(frozen, {"forward": frozen.graph}, roundtrip_result=("same", ""))
    assert report.saveable and report.portable and report.roundtrip == "same"
    assert report.devices == ("cpu",) and report.dtypes == ("float32",)


def test_mkldnn_constants_are_unsaveable_as_torch_says() -> None:
    """Where freezeview says unsaveable, torch's own load of the saved bytes fails."""
    optimized = _frozen(optimize=True)
    if not unsaveable_reason({"forward": optimized.graph}):
        pytest.skip("this torch build made no MKLDNN constants")
    buffer = io.BytesIO()
    torch.jit.save(optimized, buffer)
    buffer.seek(0)
    with pytest.raises(Exception):  # noqa: B017 - torch's own error; its text varies
        torch.jit.load(buffer)
    x = torch.randn(SMALL_INPUT_SHAPE)
    outcome, sentence = roundtrip(optimized, (x,), optimized(x))
    assert outcome == "unsaveable" and "MKLDNN" in sentence
    report = portability(optimized, {"forward": optimized.graph}, backend_step="convert_to_mkldnn")
    assert not report.saveable and not report.portable
    assert report.roundtrip == "unsaveable" and report.step == "convert_to_mkldnn"


class _NoTensors(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2 + 1


def test_portability_line_reads_naturally_without_tensor_constants() -> None:
    from freezeview.engine.output.report import measurement_lines

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(torch.jit.script(_NoTensors().eval()))
    report = portability(frozen, {"forward": frozen.graph}, roundtrip_result=("same", ""))
    assert report.devices == ()
    m = Measurement(1, 0.0, portability=report)
    line = next(t for t in measurement_lines(m) if t.startswith("portability:"))
    assert line.startswith("portability: no tensor constants; no backend-only nodes")
    assert "constants on" not in line


def test_budget_zero_still_checks_the_round_trip(monkeypatch) -> None:
    """``--time-budget 0`` times nothing but, with inputs, still runs the round trip (a
    check of outputs); a round trip that could not run says why, not "no inputs"."""
    import freezeview.engine.measure.measured_run as measured_run
    from freezeview.engine.freeze import Pipeline, Plan, default_passes
    from freezeview.engine.measure import MeasuredRun
    from freezeview.engine.output.report import measurement_lines

    asked: list[object] = []

    def fake(module, inputs, expected, **kwargs):  # type: ignore[no-untyped-def]
        asked.append(expected)
        return "same", ""

    monkeypatch.setattr(measured_run, "roundtrip", fake)
    plan = Plan(passes=default_passes(True, False))
    x = (torch.randn(SMALL_INPUT_SHAPE),)
    run = MeasuredRun(Pipeline(small_conv_net(), plan, x), budget=0)
    list(run.run())
    m = run.finish()
    assert len(asked) == 1 and run.timings == [] and m.unfrozen is None
    assert m.portability is not None and m.portability.roundtrip == "same"
    text = "\n".join(measurement_lines(m))
    assert "saved and loaded in a fresh process: same outputs" in text
    assert "no sample inputs" not in text
    # Not checked for a reason of its own: that reason, once.
    failed = Portability(("cpu",), ("float32",), {}, True, None, "round trip not checked: why.")
    lines = measurement_lines(Measurement(1, 0.0, portability=failed))
    assert sum("round trip not checked" in t for t in lines) == 1
    assert (
        "no sample inputs" not in "\n".join(lines) and "(round trip not checked: why)" in lines[0]
    )


def _forking() -> tuple[torch.jit.ScriptModule, tuple[torch.Tensor, ...]]:
    """torch's frozen module of a model that forks two submodules, and an input."""
    from corpus import case_by_name

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(case_by_name("fork").build())
    x = torch.randn(2, 4)
    return frozen, (x,)


def test_outputs_written_before_a_crash_at_exit_are_the_round_trip(monkeypatch) -> None:
    """A fresh process that wrote its outputs and then aborts at exit (torch's fork
    threads do, at random) made the round trip; one that dies before writing did not."""
    from freezeview.engine.measure import portability as module

    frozen, inputs = _forking()
    expected = frozen(*inputs)
    assert "os._exit(0)" in module._CHILD
    aborting = module._CHILD.replace("os._exit(0)", "os.abort()")
    monkeypatch.setattr(module, "_CHILD", aborting)
    assert roundtrip(frozen, inputs, expected) == ("same", "")
    dying = module._CHILD.replace("torch.save(out,", "os.abort()\ntorch.save(out,")
    monkeypatch.setattr(module, "_CHILD", dying)
    assert roundtrip(frozen, inputs, expected)[0] == "unsaveable"


@pytest.mark.slow
def test_a_forking_model_round_trips_seven_times_in_a_row() -> None:
    """The fresh process ends cleanly after writing, whatever torch's fork threads do."""
    frozen, inputs = _forking()
    expected = frozen(*inputs)
    # A child that exits the interpreter normally aborted about every other time: seven
    # round trips in a row catch it all but about once in a hundred and twenty-eight
    # runs, and the crash-at-exit test above catches it every time.
    for _ in range(7):
        assert roundtrip(frozen, inputs, expected) == ("same", "")
