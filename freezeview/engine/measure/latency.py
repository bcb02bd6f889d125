"""Timing one forward the way torch's own benchmark utilities do.

``torch.utils.benchmark.Timer.adaptive_autorange`` warms up while it sizes a block (a
number of calls long enough that the clock's own cost is negligible), then times block
after block until the median is stable (interquartile range small against the median)
or a time limit is reached. :func:`time_forward` is the same loop, written out so that:

* the warm-up is explicit and long enough for TorchScript: the profiling executor
  records shapes in its first run(s) (``torch._C._jit_get_num_profiled_runs()``) and
  optimises the graph on the next, so those runs are never timed;
* every forward call it makes is counted (warm-up, sizing, blocks), which is how the
  claim "the measurement costs at most twice the forward runs it makes" is checked;
* no statement is compiled per step (``Timer`` builds a ``timeit`` template each time).

The thread count is fixed with ``torch.set_num_threads`` for the measurement and put
back afterwards, whatever happens. Calls are plain calls (autograd as the caller left
it), as ``torch.utils.benchmark`` makes them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from .measure_values import Latency

__all__ = ["DEFAULT_BUDGET", "DEFAULT_THREADS", "Timing", "fixed_threads", "time_forward"]

#: Seconds spent timing one forward (``--time-budget``), warm-up not included.
DEFAULT_BUDGET = 0.25
#: torch's intra-op threads while timing (``--threads``).
DEFAULT_THREADS = 1

# A block lasts at least this long, so perf_counter's own cost (~100 ns) stays far below
# 1% of what is timed (adaptive_autorange sizes its blocks the same way).
_MIN_BLOCK_SECONDS = 2e-4
# The median is stable when the blocks' spread (MAD) is within this fraction of it.
_STABLE_SPREAD = 0.02
_MIN_BLOCKS = 5
_MAX_BLOCK_CALLS = 10_000


@dataclass(frozen=True, slots=True)
class Timing:
    """One timed forward and what it cost.

    Attributes:
        latency: the per-call statistics.
        calls: every forward call made (warm-up, block sizing and timed blocks).
        call_seconds: wall time spent inside those calls.
        seconds: wall time of the whole measurement.
    """

    latency: Latency
    calls: int
    call_seconds: float
    seconds: float


@contextmanager
def fixed_threads(threads: int) -> Iterator[None]:
    """torch's intra-op thread count set to ``threads``, and put back afterwards."""
    before = torch.get_num_threads()
    if threads != before:
        torch.set_num_threads(threads)
    try:
        yield
    finally:
        if torch.get_num_threads() != before:
            torch.set_num_threads(before)


def _warmup_calls() -> int:
    """Calls before timing: the profiling runs, the optimising run, and one more."""
    try:
        profiled = int(torch._C._jit_get_num_profiled_runs())  # type: ignore[attr-defined]
    except (AttributeError, RuntimeError):
        profiled = 1
    return max(3, profiled + 2)


def _spread(values: list[float]) -> float:
    """The median absolute deviation: robust to the blocks another process interrupted.

    On a busy machine a quarter or more of the blocks can be slowed by the scheduler;
    the interquartile range then measures the other processes, the MAD still the forward.
    """
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


def time_forward(
    call: Callable[[], Any],
    *,
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    after_call: Callable[[], None] | None = None,
) -> Timing:
    """Time ``call()`` (one forward on the sample inputs) for a stable median.

    Args:
        call: runs the forward once.
        threads: torch's intra-op threads while timing (restored afterwards).
        budget: seconds of timed blocks (five blocks at least, or three when five
            would take more than twice the budget).
        after_call: run after every block outside the timed region (puts back module
            state a forward changed).

    Returns:
        A :class:`Timing`: the statistics and what the measurement cost.
    """
    started = time.perf_counter()
    calls = 0
    call_seconds = 0.0
    clock = time.perf_counter

    def block(number: int) -> float:
        nonlocal calls, call_seconds
        t0 = clock()
        for _ in range(number):
            call()
        spent = clock() - t0
        calls += number
        call_seconds += spent
        if after_call is not None:
            after_call()
        return spent

    with fixed_threads(threads):
        warmup = _warmup_calls()
        for _ in range(warmup):
            block(1)
        # Block sizing: calls per block so that a block is long against the clock.
        number = 1
        spent = block(number)
        while spent < _MIN_BLOCK_SECONDS and number < _MAX_BLOCK_CALLS:
            number *= 10
            spent = block(number)
        warmup = calls
        per_call: list[float] = []
        timed = 0.0
        min_time = budget / 5
        while True:
            spent = block(number)
            per_call.append(spent / number)
            timed += spent
            # At the budget: five blocks at least (a spread from three is no spread),
            # unless one forward is so long that five would take twice the budget.
            enough = len(per_call) >= _MIN_BLOCKS or (len(per_call) >= 3 and timed >= 2 * budget)
            if timed >= budget and enough:
                break
            stable = len(per_call) >= _MIN_BLOCKS and timed >= min_time
            if stable and _spread(per_call) <= _STABLE_SPREAD * statistics.median(per_call):
                break
    latency = Latency(
        median=statistics.median(per_call) * 1000,
        min=min(per_call) * 1000,
        max=max(per_call) * 1000,
        spread=_spread(per_call) * 1000,
        runs=len(per_call) * number,
        threads=threads,
        warmup=warmup,
    )
    return Timing(latency, calls, call_seconds, time.perf_counter() - started)
