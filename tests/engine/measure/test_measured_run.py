"""A stepwise freeze with its numbers (freezeview/engine/measure/measured_run.py).

Which steps are timed, what the constant bytes are at the end, what the result weighs
and whether it travels: all held against torch's own freeze of the same module.
"""

from __future__ import annotations

import itertools
import warnings

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net

from freezeview.engine.freeze import Pipeline, Plan, default_passes
from freezeview.engine.measure import MeasuredRun, constant_bytes

BUDGET = 0.01


def _run(optimize: bool = False, inputs: bool = True, **finish) -> tuple[MeasuredRun, list]:
    plan = Plan(passes=default_passes(True, optimize), optimize_for_inference=optimize)
    x = (torch.randn(SMALL_INPUT_SHAPE),) if inputs else None
    run = MeasuredRun(Pipeline(small_conv_net(), plan, x), budget=BUDGET)
    steps = list(run.run())
    run.finish(**finish)
    return run, steps


def test_changed_steps_are_timed_against_the_unfrozen_module() -> None:
    threads = torch.get_num_threads()
    run, steps = _run(check_roundtrip=False)
    m = run.measurement
    assert torch.get_num_threads() == threads
    assert m.unfrozen is not None and m.unfrozen.threads == 1
    assert sorted(m.steps) == [s.index for s in steps if s.changed]
    # Unchanged steps carry the bytes of the step before them.
    for before, step in itertools.pairwise(steps):
        if not step.changed:
            assert m.constant_bytes[step.index] == m.constant_bytes[before.index]
    # The verdict's figures: the unfrozen forward and the last pass's graph, timed
    # again together after the run (the last two timings), the figures the table shows.
    assert m.last_step == m.steps[max(m.steps)]
    assert m.frozen == m.last_step and m.baseline == m.unfrozen
    assert m.overall is not None and m.overall.ratio == m.frozen.median / m.baseline.median
    assert m.interleaved and (m.unfrozen, m.frozen) == tuple(t.latency for t in run.timings[-2:])
    assert {t.latency for t in run.timings[1:-2]} >= {
        lat for i, lat in m.steps.items() if i != max(m.steps)
    }
    assert len(run.timings) == 1 + len(m.steps) + 2
    assert {t.latency.mode for t in run.timings} == {"inference_mode"}
    assert all(t.calls >= t.latency.runs for t in run.timings)


@pytest.mark.slow  # times real forwards both ways: the fast set keeps its budget
def test_forwards_run_under_inference_mode_unless_autograd_is_asked(monkeypatch) -> None:
    """Read off torch inside every timed call: inference mode by default, grad with
    ``autograd=True``, and the latency says which."""
    import freezeview.engine.measure.measured_run as measured_run

    real = measured_run.time_forward
    seen: list[tuple[bool, bool]] = []

    def recording(call, **kwargs):  # type: ignore[no-untyped-def]
        def wrapped():  # type: ignore[no-untyped-def]
            seen.append((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
            return call()

        return real(wrapped, **kwargs)

    monkeypatch.setattr(measured_run, "time_forward", recording)
    for autograd, expected, mode in (
        (False, (True, False), "inference_mode"),
        (True, (False, True), "autograd"),
    ):
        seen.clear()
        plan = Plan(passes=default_passes(True, False))
        x = (torch.randn(SMALL_INPUT_SHAPE),)
        run = MeasuredRun(Pipeline(small_conv_net(), plan, x), budget=BUDGET, autograd=autograd)
        list(run.run())
        m = run.finish(check_roundtrip=False)
        assert seen and set(seen) == {expected}
        assert m.modes == (mode,) and mode in m.timed_under()


def test_final_constant_bytes_equal_torch_freeze() -> None:
    """The last step's constants weigh what torch.jit.freeze's graph holds."""
    run, steps = _run(inputs=False)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.jit.freeze(small_conv_net())
    m = run.measurement
    assert m.constant_bytes[steps[-1].index] == constant_bytes([reference.graph])
    assert m.sizes is not None and m.sizes.constant_bytes == constant_bytes([reference.graph])
    assert m.sizes.duplicate_constant_bytes == 0 and m.sizes.kept_attribute_bytes == 0
    # The inline step still reads every weight with prim::GetAttr.
    assert m.constant_bytes[0] == 0


class _Counting(torch.nn.Module):
    """Writes its own buffer on every call: a run on the real module shows in it."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.bn = torch.nn.BatchNorm2d(4)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.bn(self.conv(x)).sum() + self.calls


def test_the_verdicts_pair_runs_on_private_copies(monkeypatch, tmp_path) -> None:
    """The pair timed for the verdict runs the unfrozen and the frozen forward on their
    sandboxes: the input module and the frozen module (what gets written) keep their
    state, and the file written afterwards holds torch's freeze of the untouched input."""
    import freezeview.engine.measure.measured_run as measured_run

    called: list[tuple[object, object]] = []
    real = measured_run.time_pair

    def pair(first, second, **kwargs):  # type: ignore[no-untyped-def]
        for _ in range(3):
            first(), second()
        called.append((first, second))
        return real(first, second, **kwargs)

    monkeypatch.setattr(measured_run, "time_pair", pair)
    module = torch.jit.script(_Counting().eval())
    pipe = Pipeline(module, Plan(passes=default_passes(True, False)), (torch.randn(1, 3, 6, 6),))
    run = MeasuredRun(pipe, budget=BUDGET)
    list(run.run())
    assert run.time_verdict() and len(called) == 1
    assert run.time_verdict() and len(called) == 1  # once per run
    frozen = pipe.frozen_module
    assert frozen is not None
    assert module.calls.item() == 0 and frozen.calls.item() == 0
    run.finish(check_roundtrip=False)
    assert len(called) == 1 and run.measurement.interleaved
    path = tmp_path / "f.pt"
    torch.jit.save(frozen, str(path))
    assert torch.jit.load(str(path)).calls.item() == 0


def test_without_inputs_nothing_runs() -> None:
    """No sample inputs: no forward, no timing, no round trip; sizes still reported."""
    run, _ = _run(inputs=False)
    m = run.measurement
    assert run.timings == [] and m.unfrozen is None and m.steps == {}
    assert m.latency_json() is None
    assert m.portability is not None and m.portability.roundtrip is None
    assert m.portability.saveable


def test_optimize_for_inference_names_the_mkldnn_step(tmp_path) -> None:
    """The MKLDNN conversion is the step that makes the result unsaveable and bound."""
    model = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(model))
    run, steps = _run(optimize=True, input_file=model)
    port = run.measurement.portability
    sizes = run.measurement.sizes
    assert sizes is not None and sizes.input_file_bytes == model.stat().st_size
    assert port is not None
    mkldnn = next(s for s in steps if s.name == "convert_to_mkldnn")
    if not mkldnn.changed:
        assert port.portable
        return
    assert not port.saveable and port.roundtrip == "unsaveable"
    assert port.step == "convert_to_mkldnn"
    assert "prim::ConstantMKLDNNTensor" in port.backend_only_nodes
    assert mkldnn.index in run.measurement.steps


def test_deferred_constants_build_no_picture_until_asked() -> None:
    """With ``defer_constants`` a run without inputs counts no constant bytes and builds
    no step's picture for them (the fold step's stays unbuilt); counting on request,
    step by step, gives the bytes the undeferred run gives."""
    plan = Plan(passes=default_passes(True, False))
    eager = MeasuredRun(Pipeline(small_conv_net(), plan), budget=BUDGET)
    list(eager.run())
    expected = eager.measurement.constant_bytes
    lazy = MeasuredRun(Pipeline(small_conv_net(), plan), budget=BUDGET, defer_constants=True)
    steps = list(lazy.run())
    assert lazy.measurement.constant_bytes == {}
    fold = next(s for s in steps if s.name == "fold_attributes")
    assert fold._graphs["forward"]._build is not None  # never built
    for step in steps:
        lazy.count_constants(step)
    assert lazy.measurement.constant_bytes == expected


def test_the_measure_tuple_asks_for_autograd_as_its_third_item() -> None:
    """The Python API's ``measure``: ``(threads, budget)`` times under inference_mode,
    ``(threads, budget, True)`` with autograd on."""
    pipe = Pipeline(small_conv_net(), Plan(passes=default_passes(True, False)), None)
    assert MeasuredRun.of(pipe, (2, 0.5)).autograd is False
    run = MeasuredRun.of(pipe, (2, 0.5, True))
    assert run.autograd is True and run.threads == 2 and run.budget == 0.5


@pytest.mark.slow
def test_compare_times_as_its_measure_asks(tmp_path) -> None:
    """compare's JSON says what each model's forwards were timed under."""
    import freezeview

    path = tmp_path / "small.pt"
    torch.jit.save(small_conv_net(), str(path))
    x = (torch.randn(SMALL_INPUT_SHAPE),)
    for measure, mode in (((1, BUDGET), "inference_mode"), ((1, BUDGET, True), "autograd")):
        data = freezeview.compare(str(path), str(path), inputs=x, measure=measure).to_json()
        latency = data["latency_ms"]
        assert latency is not None
        assert latency["old"]["timed_under"] == mode == latency["new"]["timed_under"]
