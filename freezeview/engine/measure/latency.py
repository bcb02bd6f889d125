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
* a block is long enough (hundreds of calls of a small forward) that the cold start
  after the state is put back between blocks does not weigh in it, and every timing
  (a step alone, :func:`time_pair`'s two forwards) uses the same length;
* no statement is compiled per step (``Timer`` builds a ``timeit`` template each time).

The thread count is fixed with ``torch.set_num_threads`` for the measurement and put
back afterwards, whatever happens. Calls run the way deployments run a forward: under
``torch.inference_mode()`` (no autograd recording, no version counters), or under
``torch.no_grad()`` where a forward fails under inference mode (some ops refuse
inference tensors); with ``autograd=True`` under ``torch.enable_grad()``, what a plain
call in a training script pays (recording gradients for every parameter it uses, which
freezing removes). The mode a timing ran under is in :attr:`Latency.mode`.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from typing import Any

import torch

from .measure_values import MIN_BLOCKS, STEADY_BLOCKS, Latency

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_THREADS",
    "Timing",
    "fixed_threads",
    "time_forward",
    "time_pair",
    "warmup_calls",
]

#: Seconds spent timing one forward (``--time-budget``), warm-up not included.
DEFAULT_BUDGET = 0.25
#: torch's intra-op threads while timing (``--threads``).
DEFAULT_THREADS = 1

# A block lasts at least this long, one forward timed alone or two alternating: the
# first calls after a pause (the state put back after every block, the other forward's
# block) run on cold caches (and, after MKLDNN ops, on oneDNN's), and must not weigh in
# the median. Blocks of a few calls run a small model slower than blocks of hundreds:
# every timing uses the same length, so a step timed alone and the verdict's pair timed
# together are figures of one kind.
_BLOCK_SECONDS = 0.02
# The median is stable when the blocks' spread (MAD) is within this fraction of it.
_STABLE_SPREAD = 0.02
_MIN_BLOCKS = MIN_BLOCKS
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


def warmup_calls() -> int:
    """Forwards run before anything is timed or recorded (the profiling runs, the
    optimising run, and one more): the per-node profiles warm up as timings do."""
    return _warmup_calls()


def _spread(values: list[float]) -> float:
    """The median absolute deviation: robust to the blocks another process interrupted.

    On a busy machine a quarter or more of the blocks can be slowed by the scheduler;
    the interquartile range then measures the other processes, the MAD still the forward.
    """
    middle = statistics.median(values)
    return statistics.median(abs(v - middle) for v in values)


# Below this many blocks the MAD is no estimate of the noise (of three blocks it is the
# smaller of two deviations, often near 0).
_FEW_BLOCKS = 10


def _noise_spread(values: list[float]) -> float:
    """The spread a comparison of two timings takes as noise: the MAD, and with fewer
    than ten blocks at least half the range of all blocks but the slowest (one block an
    interruption slowed is left out; a machine that moves every block by 20 % moves a
    timing seconds later by as much)."""
    mad = _spread(values)
    if len(values) >= _FEW_BLOCKS or len(values) < 3:
        return mad
    kept = sorted(values)[:-1]
    return max(mad, (kept[-1] - kept[0]) / 2)


def _grad_mode(mode: str) -> AbstractContextManager[Any]:
    """The autograd state calls are timed under: ``inference_mode``, ``no_grad`` or
    ``autograd``."""
    if mode == "inference_mode":
        return torch.inference_mode()
    if mode == "no_grad":
        return torch.no_grad()
    return torch.enable_grad()


class _Runner:
    """One forward, run in timed blocks; counts every call and the time inside them.

    ``autograd`` False: calls run under ``torch.inference_mode()``, or ``torch.no_grad()``
    when the first call fails under inference mode (the mode is then ``no_grad``).
    """

    def __init__(
        self,
        call: Callable[[], Any],
        after_call: Callable[[], None] | None,
        autograd: bool = False,
    ) -> None:
        self.call = call
        self.after_call = after_call
        self.mode = "autograd" if autograd else "inference_mode"
        self.calls = 0
        self.call_seconds = 0.0
        self.number = 1
        self.warmup = 0
        self.per_call: list[float] = []
        self.timed = 0.0

    def block(self, number: int) -> float:
        call = self.call
        # The state the module's forward may change is put back outside the mode: what
        # it puts back must stay a normal tensor, never an inference one.
        try:
            with _grad_mode(self.mode):
                t0 = time.perf_counter()
                for _ in range(number):
                    call()
                spent = time.perf_counter() - t0
        finally:
            if self.after_call is not None:
                self.after_call()
        self.calls += number
        self.call_seconds += spent
        return spent

    def first_call(self) -> None:
        """The first warm-up call; under inference mode, falls back to ``no_grad``."""
        try:
            self.block(1)
        except Exception:
            if self.mode != "inference_mode":
                raise
            self.mode = "no_grad"
            self.block(1)

    def prepare(self, min_block: float = _BLOCK_SECONDS) -> None:
        """Warm up, then size a block so that it lasts ``min_block`` seconds at least."""
        self.first_call()
        for _ in range(_warmup_calls() - 1):
            self.block(1)
        spent = self.block(self.number)
        while spent < min_block and self.number < _MAX_BLOCK_CALLS:
            self.number = min(
                _MAX_BLOCK_CALLS,
                max(self.number * 2, int(self.number * min_block / max(spent, 1e-9)) + 1),
            )
            spent = self.block(self.number)
        self.warmup = self.calls

    def timed_block(self) -> None:
        spent = self.block(self.number)
        self.per_call.append(spent / self.number)
        self.timed += spent

    def stable(self, min_time: float) -> bool:
        """Stable enough to stop before the budget: as many blocks as a median needs to
        be called stable whatever its spread (:attr:`Latency.stable`), and a small MAD.
        Fewer blocks, spread by a few percent, would then read as unstable."""
        values = self.per_call
        if len(values) < STEADY_BLOCKS or self.timed < min_time:
            return False
        return _spread(values) <= _STABLE_SPREAD * statistics.median(values)

    def timing(self, threads: int, started: float, noise_floor: float = 0.0) -> Timing:
        """The statistics; ``noise_floor`` (relative) is the least spread reported."""
        values = self.per_call
        middle = statistics.median(values)
        latency = Latency(
            median=middle * 1000,
            min=min(values) * 1000,
            max=max(values) * 1000,
            spread=max(_noise_spread(values), noise_floor * middle) * 1000,
            runs=len(values) * self.number,
            threads=threads,
            warmup=self.warmup,
            blocks=len(values),
            mode=self.mode,
        )
        return Timing(latency, self.calls, self.call_seconds, time.perf_counter() - started)


def _enough(blocks: int, timed: float, budget: float) -> bool:
    """At the budget: five blocks at least (a spread from three is no spread), unless one
    forward is so long that five would take twice the budget."""
    if timed < budget:
        return False
    return blocks >= _MIN_BLOCKS or (blocks >= 3 and timed >= 2 * budget)


def time_forward(
    call: Callable[[], Any],
    *,
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    after_call: Callable[[], None] | None = None,
    autograd: bool = False,
) -> Timing:
    """Time ``call()`` (one forward on the sample inputs) for a stable median.

    Args:
        call: runs the forward once.
        threads: torch's intra-op threads while timing (restored afterwards).
        budget: seconds of timed blocks (five blocks at least, or three when five
            would take more than twice the budget).
        after_call: run after every block outside the timed region (puts back module
            state a forward changed).
        autograd: time with autograd on (``torch.enable_grad()``) instead of under
            ``torch.inference_mode()`` (``no_grad`` where inference mode fails).

    Returns:
        A :class:`Timing`: the statistics and what the measurement cost.
    """
    started = time.perf_counter()
    runner = _Runner(call, after_call, autograd)
    with fixed_threads(threads):
        runner.prepare()
        while True:
            runner.timed_block()
            if _enough(len(runner.per_call), runner.timed, budget):
                break
            if runner.stable(budget / 5):
                break
    return runner.timing(threads, started)


def time_pair(
    first: Callable[[], Any],
    second: Callable[[], Any],
    *,
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    after_call: Callable[[], None] | None = None,
    autograd: bool = False,
) -> tuple[Timing, Timing]:
    """Time two forwards in alternating blocks, for a ratio another process cannot skew.

    Timed one after the other, two forwards see whatever else the machine did at each
    moment; alternating their blocks (first, second, first, ...) shares that out between
    them, so their ratio holds on a busy machine. The final verdict's ratio (frozen
    against unfrozen) is measured so.

    Each one's spread (its noise) is at least how far the two's block-by-block ratio
    (second's block against the first's block just before it) strays from its median,
    all pairs but the farthest (every pair when fewer than five): load that comes and
    goes faster than a block pair moves that ratio, and a comparison of the two medians
    is no surer than that ratio is steady.

    Args:
        first, second: each runs one forward.
        threads: torch's intra-op threads while timing (restored afterwards).
        budget: seconds of timed blocks for the two together.
        after_call: run after every block outside the timed region.
        autograd: as :func:`time_forward`'s.

    Returns:
        The two :class:`Timing` values; each one's ``seconds`` is the whole pair's.
    """
    started = time.perf_counter()
    runners = (_Runner(first, after_call, autograd), _Runner(second, after_call, autograd))
    with fixed_threads(threads):
        for runner in runners:
            runner.prepare()
        while True:
            for runner in runners:
                runner.timed_block()
            blocks = len(runners[0].per_call)
            timed = runners[0].timed + runners[1].timed
            if _enough(blocks, timed, budget):
                break
            if all(r.stable(budget / 10) for r in runners):
                break
    floor = _ratio_noise(runners[0].per_call, runners[1].per_call)
    return runners[0].timing(threads, started, floor), runners[1].timing(threads, started, floor)


def _ratio_noise(first: list[float], second: list[float]) -> float:
    """How far ``second[i] / first[i]`` strays from its median over the block pairs,
    relative to the median: all pairs but the farthest from five pairs on, every pair
    below five (three or four pairs leave too few to set one aside), 0 below three.

    The largest deviation, not a typical one: when load hits some pairs and not others
    the ratios fall into two groups, and the median sits in the larger one; the verdict
    then must not read a change off that median that the other pairs contradict.
    """
    ratios = [b / a for a, b in zip(first, second, strict=False) if a > 0]
    if len(ratios) < 3:
        return 0.0
    middle = statistics.median(ratios)
    if middle <= 0:
        return 0.0
    deviations = sorted(abs(r - middle) for r in ratios)
    if len(ratios) >= _MIN_BLOCKS:
        deviations = deviations[:-1]
    return deviations[-1] / middle
