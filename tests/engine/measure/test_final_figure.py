"""The verdict says one thing with one set of figures (engine/measure/measure_values.py).

Stubbed timing series, so every case is exact: the verdict's figures are the table's
(the unfrozen forward and the final step), only steps outside the noise that moved the
way the whole moved are named, "every step within the noise" is said when so, and a
median over too few blocks asks for a larger --time-budget. How the calls were timed
(inference_mode by default, no_grad as the fallback, autograd on request) is read off
torch inside the timed call itself, never off timings.
"""

from __future__ import annotations

import re

import torch

from freezeview.engine.measure.latency import time_forward, time_pair
from freezeview.engine.measure.measure_values import (
    Latency,
    Measurement,
    format_ms,
    latency_cell,
    verdict_text,
)


def _lat(median: float, spread: float = 0.0, blocks: int = 10) -> Latency:
    return Latency(median, median - spread, median + spread, spread, blocks, 1, blocks=blocks)


def _measurement(unfrozen: Latency, steps: dict[int, Latency]) -> Measurement:
    titles = {i: f"step-{i}" for i in steps}
    return Measurement(1, 0.25, unfrozen, steps, titles=titles, names=dict(titles))


def test_verdict_figures_are_the_tables() -> None:
    """The unfrozen figure and the frozen one in the verdict are the table's cells."""
    m = _measurement(_lat(2.0), {0: _lat(2.0), 2: _lat(1.5), 4: _lat(1.0)})
    text = verdict_text(m)
    assert f"({format_ms(1.0)} vs {format_ms(2.0)}," in text
    assert latency_cell(m, 4).startswith(format_ms(1.0))
    data = m.latency_json()
    assert data is not None
    assert data["unfrozen"] == m.unfrozen.to_json()  # type: ignore[union-attr]
    assert data["frozen"] == m.steps[4].to_json()
    assert data["ratio"] == 0.5


def test_every_step_inside_the_noise_but_not_the_whole_names_no_step() -> None:
    """Four steps of -8% each inside a ±10% noise make -28%: said so, no step named."""
    noise = 0.1
    medians = [100.0 * 0.92**k for k in range(5)]
    steps = {k: _lat(medians[k], medians[k] * noise) for k in range(1, 5)}
    m = _measurement(_lat(100.0, 100.0 * noise), steps)
    assert all(change.same for _, change in m.contributions())
    overall = m.overall
    assert overall is not None and not overall.same
    text = verdict_text(m)
    assert "faster" in text and "every step is within the noise" in text
    assert "made by" not in text and not re.search(r"step-\d", text)
    data = m.latency_json()
    assert data is not None and data["made_by"] == []


def test_a_slower_step_is_never_named_as_the_cause_of_a_speed_up() -> None:
    """+9% then -55%: faster overall, made by the -55% step only."""
    m = _measurement(_lat(100.0), {1: _lat(109.0), 3: _lat(49.0)})
    text = verdict_text(m)
    assert "faster" in text
    assert "made by: step-3" in text and "step-1" not in text
    data = m.latency_json()
    assert data is not None and data["made_by"] == ["step-3"]


def test_a_faster_step_is_never_named_as_the_cause_of_a_slow_down() -> None:
    m = _measurement(_lat(100.0), {1: _lat(80.0), 3: _lat(200.0)})
    text = verdict_text(m)
    assert "slower" in text and "made by: step-3" in text and "step-1" not in text


def test_only_opposite_steps_moved_is_said_without_a_cause() -> None:
    """A faster whole whose only step outside the noise is slower names no cause."""
    medians = {1: 120.0, 2: 110.0, 3: 101.0, 4: 92.0, 5: 84.0}
    steps = {i: _lat(v, v * 0.1) for i, v in medians.items()}
    m = _measurement(_lat(100.0, 10.0), steps)
    assert m.overall is not None and not m.overall.same and m.overall.ratio < 1
    text = verdict_text(m)
    assert "made by" not in text and "no step alone made it faster" in text
    assert "step-1 +20%" in text


def test_too_few_blocks_say_so_and_ask_for_a_larger_budget() -> None:
    """Three timed blocks of a 200 ms forward: not stable, --time-budget 2 or more."""
    m = _measurement(_lat(200.0, blocks=3), {2: _lat(100.0, blocks=3)})
    text = verdict_text(m)
    assert "is not stable" in text and "--time-budget 2 or more" in text
    data = m.latency_json()
    assert data is not None and data["stable"] is False
    # Ten runs of a 133 ms forward need 1.33 s: the budget asked for is rounded up.
    slow = _measurement(_lat(133.0, blocks=4), {2: _lat(80.0, blocks=4)})
    assert "--time-budget 2 or more" in verdict_text(slow)
    stable = _measurement(_lat(200.0), {2: _lat(100.0)})
    assert "not stable" not in verdict_text(stable)


def _recorder(seen: list[tuple[bool, bool]], fail_in_inference: bool = False):  # type: ignore[no-untyped-def]
    def call() -> None:
        inference = torch.is_inference_mode_enabled()
        seen.append((inference, torch.is_grad_enabled()))
        if fail_in_inference and inference:
            raise RuntimeError("custom: this forward refuses inference tensors")

    return call


def test_forwards_are_timed_under_inference_mode_by_default() -> None:
    seen: list[tuple[bool, bool]] = []
    timing = time_forward(_recorder(seen), budget=0.005)
    assert set(seen) == {(True, False)}
    assert timing.latency.mode == "inference_mode"
    assert timing.latency.to_json()["timed_under"] == "inference_mode"


def test_autograd_times_with_grad_enabled_even_under_no_grad() -> None:
    seen: list[tuple[bool, bool]] = []
    with torch.no_grad():
        timing = time_forward(_recorder(seen), budget=0.005, autograd=True)
    assert set(seen) == {(False, True)}
    assert timing.latency.mode == "autograd"
    assert torch.is_grad_enabled()


def test_a_forward_failing_under_inference_mode_is_timed_under_no_grad() -> None:
    seen: list[tuple[bool, bool]] = []
    first, second = time_pair(_recorder(seen, fail_in_inference=True), _recorder([]), budget=0.01)
    assert seen[0] == (True, False) and set(seen[1:]) == {(False, False)}
    assert first.latency.mode == "no_grad" and second.latency.mode == "inference_mode"
    m = Measurement(1, 0.01, first.latency, {3: second.latency}, names={3: "cleanup"})
    assert "no_grad for unfrozen" in m.timed_under()


def test_the_pair_is_timed_in_alternating_blocks(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A stubbed clock: A costs 1 ms a call, B 2 ms. After each one's warm-up, the timed
    calls come in blocks A, B, A, B, ... (never two blocks of one in a row), each block
    is put back after (``after_call``), and the medians are the stubbed costs exactly."""
    import types

    import freezeview.engine.measure.latency as latency

    now = [0.0]
    order: list[str] = []

    def fake(name: str, cost: float):  # type: ignore[no-untyped-def]
        def call() -> None:
            order.append(name)
            now[0] += cost

        return call

    restored: list[int] = []
    monkeypatch.setattr(latency, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    first, second = time_pair(
        fake("A", 1e-3),
        fake("B", 2e-3),
        budget=0.2,
        after_call=lambda: restored.append(len(order)),
    )
    warm = first.latency.warmup + second.latency.warmup
    assert order[: first.latency.warmup] == ["A"] * first.latency.warmup
    timed = order[warm:]
    # Runs of one name, in order: A, B, A, B, ..., as many of each.
    runs: list[tuple[str, int]] = []
    for name in timed:
        if runs and runs[-1][0] == name:
            runs[-1] = (name, runs[-1][1] + 1)
        else:
            runs.append((name, 1))
    assert [name for name, _ in runs] == ["A", "B"] * (len(runs) // 2)
    assert len(runs) >= 2 * 5
    assert {n for name, n in runs if name == "A"} == {first.latency.runs // first.latency.blocks}
    assert first.latency.blocks == second.latency.blocks == len(runs) // 2
    assert abs(first.latency.median - 1.0) < 1e-9 and abs(second.latency.median - 2.0) < 1e-9
    # Every timed block ended with the state put back, before the other one ran.
    ends = set(restored)
    position = warm
    for _, n in runs:
        position += n
        assert position in ends


def test_the_pairs_noise_is_at_least_its_block_by_block_ratios_spread(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Load that comes and goes between block pairs (the second forward's blocks take
    1.4 ms a call in two pairs of three, 0.6 ms in the third; the first's 1 ms): the
    medians say 1.4x slower, but the ratio is not steady, so the pair's verdict is "as
    fast, inside the noise", never a change read off the medians."""
    import types

    import freezeview.engine.measure.latency as latency

    now = [0.0]
    blocks = [0]

    def first() -> None:
        now[0] += 1e-3

    def second() -> None:
        now[0] += (0.6e-3, 1.4e-3, 1.4e-3)[(blocks[0] // 2) % 3]

    def count() -> None:
        blocks[0] += 1

    monkeypatch.setattr(latency, "time", types.SimpleNamespace(perf_counter=lambda: now[0]))
    a, b = time_pair(first, second, budget=0.4, after_call=count)
    assert a.latency.min == a.latency.max  # its own blocks agree: no spread of its own
    assert abs(b.latency.median / a.latency.median - 1.4) < 1e-6  # the medians: slower
    # The 0.6 ratios (two at least) lie 0.8 from the median 1.4.
    assert abs(a.latency.noise - 0.8 / 1.4) < 1e-6
    m = Measurement(1, 0.2, a.latency, {2: b.latency}, names={2: "cleanup"}, interleaved=True)
    assert m.overall is not None and m.overall.same
    assert verdict_text(m).startswith("frozen forward as fast as unfrozen, inside the noise")


def test_three_or_four_pairs_set_no_ratio_aside() -> None:
    """From five block pairs on the farthest ratio is set aside; with three or four
    every one counts (one of three pairs that disagrees is no outlier to drop)."""
    from freezeview.engine.measure.latency import _ratio_noise

    ones = [1.0] * 3
    assert abs(_ratio_noise(ones, [0.35, 0.38, 0.9]) - 0.52 / 0.38) < 1e-9
    five = [1.0] * 5
    assert abs(_ratio_noise(five, [0.38, 0.37, 0.39, 0.38, 0.9]) - 0.01 / 0.38) < 1e-9
    assert _ratio_noise([1.0, 1.0], [0.5, 2.0]) == 0.0
