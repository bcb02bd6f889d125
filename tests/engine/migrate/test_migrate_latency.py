"""migrate's "is it as fast?": the sentences and the frozen forward it is timed against.

The timings themselves run in the slow set (tests/engine/migrate/test_migration.py, on the example's
migration); here the sentence a pair of latencies gives, and the frozen TorchScript
forward that ``torch.jit.freeze`` refuses as torch does.
"""

from __future__ import annotations

import pytest
import torch
from torch import nn

from freezeview.engine.measure import Latency, compare_latency
from freezeview.engine.migrate import Speed, SpeedPair
from freezeview.engine.migrate.child_tools import frozen_forward


def _latency(median: float, spread: float = 0.0, blocks: int = 12, threads: int = 1) -> Latency:
    return Latency(
        median=median,
        min=median - spread,
        max=median + spread,
        spread=spread,
        runs=blocks * 100,
        threads=threads,
        warmup=5,
        blocks=blocks,
    )


@pytest.mark.parametrize(
    ("frozen", "program", "head"),
    [
        (1.0, 3.0, "ExportedProgram forward 3x slower than the frozen TorchScript"),
        (2.0, 1.0, "ExportedProgram forward 2x faster than the frozen TorchScript"),
        (
            1.0,
            1.03,
            "ExportedProgram forward as fast as the frozen TorchScript, inside the noise ±5%",
        ),
    ],
)
def test_a_pair_says_what_measure_s_comparison_says(
    frozen: float, program: float, head: str
) -> None:
    pair = SpeedPair("ExportedProgram", _latency(frozen), _latency(program))
    change = compare_latency(pair.frozen, pair.other)
    assert pair.change == change
    assert pair.text().startswith(head + " (")
    assert "median, 1 thread, inference_mode)" in pair.text()
    document = pair.to_json()
    assert document["ratio"] == change.ratio and document["inside_noise"] == change.same
    assert document["stable"] and document["verdict"] == pair.text()


def test_a_median_over_too_few_blocks_asks_for_a_larger_budget() -> None:
    pair = SpeedPair("ExportedProgram", _latency(150.0, 30.0, blocks=3), _latency(300.0))
    assert not pair.stable
    assert pair.text().endswith("is not stable: give --time-budget 3 or more")


def test_a_wide_spread_is_noise_not_a_change() -> None:
    pair = SpeedPair("ExportedProgram", _latency(1.0, 0.3), _latency(1.25))
    assert pair.change.same and "inside the noise ±30%" in pair.text()


def test_nothing_timed_says_why_in_one_line() -> None:
    speed = Speed(threads=1, budget=0.0, note="latency not measured: --time-budget 0 times nothing")
    assert speed.lines() == [speed.note]
    assert speed.to_json()["exported_program"] is None


class _Counter(nn.Module):
    """A tensor attribute its forward writes in place."""

    def __init__(self) -> None:
        super().__init__()
        self.seen = torch.zeros(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen.add_(x)
        return x * 2 + self.seen


def test_the_frozen_forward_is_refused_where_torch_refuses_to_freeze() -> None:
    training = torch.jit.script(_Counter().train())
    with pytest.raises(Exception):  # noqa: B017 - torch's own refusal, whatever its type
        torch.jit.freeze(training)
    call, why = frozen_forward(training, (torch.ones(4),))
    assert call is None and why.startswith("torch could not freeze the model")


def test_the_frozen_forward_runs_a_private_copy() -> None:
    module = torch.jit.script(_Counter().eval())
    call, why = frozen_forward(module, (torch.ones(4),))
    assert call is not None and not why
    frozen = torch.jit.freeze(torch.jit.script(_Counter().eval()))
    assert torch.equal(call(), frozen(torch.ones(4)))
    call()
    assert torch.equal(module.seen, torch.zeros(4))
