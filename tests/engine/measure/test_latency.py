"""Timing one forward (freezeview/engine/measure/latency.py, measure_values.py).

Structure and consistency only, never speed: every call counted, the statistics in order,
torch's thread count put back, the verdict consistent with the numbers it states.
"""

from __future__ import annotations

import pytest
import torch

from freezeview.engine.measure.latency import fixed_threads, time_forward
from freezeview.engine.measure.measure_values import (
    NOISE_FLOOR,
    Latency,
    Measurement,
    compare_latency,
    verdict_text,
)


def test_time_forward_counts_every_call_and_orders_its_statistics() -> None:
    """calls = warm-up + sizing + timed runs; min <= median <= max; cost >= call time."""
    made = 0
    x = torch.randn(64, 64)

    def call() -> torch.Tensor:
        nonlocal made
        made += 1
        return x @ x

    timing = time_forward(call, threads=1, budget=0.02)
    lat = timing.latency
    assert timing.calls == made
    assert lat.runs > 0 and lat.warmup > 0
    assert lat.warmup + lat.runs == made
    assert lat.min <= lat.median <= lat.max
    assert lat.spread >= 0
    assert 0 < timing.call_seconds <= timing.seconds
    assert lat.threads == 1


def test_time_forward_restores_threads_even_when_the_forward_fails() -> None:
    """torch.set_num_threads is put back after timing, and after a failure too."""
    before = torch.get_num_threads()
    seen: list[int] = []

    def call() -> None:
        seen.append(torch.get_num_threads())

    time_forward(call, threads=2 if before == 1 else 1, budget=0.005)
    assert set(seen) == {2 if before == 1 else 1}
    assert torch.get_num_threads() == before

    def boom() -> None:
        raise RuntimeError("no")

    with pytest.raises(RuntimeError):
        time_forward(boom, threads=2 if before == 1 else 1, budget=0.005)
    assert torch.get_num_threads() == before
    with fixed_threads(before):
        assert torch.get_num_threads() == before


def test_time_forward_calls_after_call_after_every_block() -> None:
    """State put back between blocks: after_call runs at least once per timed block."""
    restored = 0

    def restore() -> None:
        nonlocal restored
        restored += 1

    timing = time_forward(lambda: None, budget=0.005, after_call=restore)
    assert restored >= 3
    assert timing.calls >= restored


def _lat(median: float, spread: float = 0.0) -> Latency:
    return Latency(median, median - spread, median + spread, spread, 100, 1)


def test_compare_latency_calls_changes_inside_the_noise_the_same() -> None:
    """A change within the floor or either spread is 'same'; beyond it, a real change."""
    assert compare_latency(_lat(1.0), _lat(1.0 + NOISE_FLOOR / 2)).same
    assert not compare_latency(_lat(1.0), _lat(1.5)).same
    noisy = compare_latency(_lat(1.0, 0.4), _lat(1.3))
    assert noisy.same and noisy.noise == pytest.approx(0.4)
    faster = compare_latency(_lat(2.0), _lat(1.0))
    assert faster.ratio == pytest.approx(0.5) and faster.text() == "-50%"


def test_verdict_names_the_steps_that_moved_it() -> None:
    """The final line agrees with the ratio and names the steps outside the noise."""
    m = Measurement(
        threads=1,
        budget=0.1,
        unfrozen=_lat(2.0),
        steps={0: _lat(2.02), 2: _lat(1.0), 5: _lat(3.0)},
        titles={0: "inline", 2: "clean-up", 5: "to MKLDNN"},
        names={0: "inline", 2: "cleanup", 5: "convert_to_mkldnn"},
    )
    assert m.frozen == _lat(3.0)
    text = verdict_text(m)
    assert text.startswith("frozen forward 1.5x slower")
    # A faster step never made a slow-down: only the slower one is named.
    assert "to MKLDNN +200%" in text and "clean-up" not in text and "inline" not in text
    data = m.latency_json()
    assert data is not None
    assert data["ratio"] == pytest.approx(1.5) and data["inside_noise"] is False
    assert data["made_by"] == ["convert_to_mkldnn"]
    same = Measurement(1, 0.1, _lat(2.0), {2: _lat(2.01)}, names={2: "cleanup"})
    assert "as fast as unfrozen" in verdict_text(same)
    # One step (explain's final figure) is named inside the noise too, never as a cause.
    for frozen, said in ((_lat(2.01), "; frozen by torch.jit.freeze"), (_lat(1.0), "; made by")):
        figure = Measurement(
            1, 0.1, _lat(2.0), {0: frozen}, titles={0: "torch.jit.freeze"}, names={0: "freeze"}
        )
        assert said in verdict_text(figure) and verdict_text(figure).count("torch.jit.freeze") == 1
    assert "not measured" in verdict_text(Measurement(1, 0.1))


def test_few_blocks_take_half_the_range_but_the_slowest_as_noise() -> None:
    """Of five blocks the MAD says little: the noise is at least half the range of the
    four fastest (the slowest, an interruption, left out); of ten or more, the MAD."""
    from freezeview.engine.measure.latency import _noise_spread, _spread

    few = [1.00, 1.20, 0.90, 1.05, 9.0]
    assert _noise_spread(few) == pytest.approx((1.20 - 0.90) / 2)
    assert _noise_spread(few) > _spread(few)
    many = [1.0, 1.01, 0.99, 1.0, 1.02, 0.98, 1.0, 1.3, 0.7, 1.0]
    assert _noise_spread(many) == _spread(many)


@pytest.mark.parametrize("median", [0.0144501, 1.2345, 12.345, 0.00012345])
def test_the_json_figures_print_as_the_verdict_prints_them(median: float) -> None:
    """freeze --json carries the medians as measured: formatting the JSON's figure gives
    the verdict's words, however the figure sits between two roundings."""
    from freezeview.engine.measure.measure_values import format_ms

    for latency in (_lat(median), _lat(median * 2, median / 10)):
        figure = latency.to_json()["median"]
        assert format_ms(figure) == format_ms(latency.median)
        assert figure == latency.median
