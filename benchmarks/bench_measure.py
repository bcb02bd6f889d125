"""Did it help? freezeview's latency figures against an independent torch.utils.benchmark run.

For each model and plan (ResNet-50 at 1x3x224x224 and a small scripted conv + batchnorm +
linear at 1x3x16x16, each with and without ``optimize_for_inference``), in one run:

1. **accuracy**: freezeview's reported ratio (frozen median / unfrozen median, from
   :class:`~freezeview.engine.measure.MeasuredRun`) against the same ratio measured
   independently with ``torch.utils.benchmark.Timer.blocked_autorange`` on the modules
   themselves (``m(x)`` for the scripted module, and for ``torch.jit.freeze(m)``, plus
   ``torch.jit.optimize_for_inference`` when asked), one thread, under
   ``torch.inference_mode()`` as freezeview times (``--autograd``: both with autograd
   on), the two Timers' ``timeit`` blocks alternating. Target:
   within 15 %. On the small model with optimize_for_inference the plan must be reported
   slower and the MKLDNN conversion step named.
2. **cost**: the time spent measuring (every ``MeasuredRun.observe`` call: function
   set-up, constant bytes, warm-up, block sizing and the timed blocks) against the time
   spent inside the forward calls it made. Target: at most 2x. The fresh-process round
   trip is reported on its own.
3. **no inputs, no cost**: ``freeze``'s work without inputs (the pipeline, each step's
   table row read as it arrives) with and without the measure stage (medians of 5,
   interleaved).

Usage::

    .venv/bin/python benchmarks/bench_measure.py [--budget 1.0] [--model small|resnet50]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path
from typing import Any

import torch
import torch.utils.benchmark as benchmark

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import models  # noqa: E402
from freezeview.engine.freeze import Pipeline, Plan, default_passes  # noqa: E402
from freezeview.engine.measure import MeasuredRun, verdict_text  # noqa: E402


def build(name: str) -> tuple[torch.jit.ScriptModule, torch.Tensor]:
    """A fresh scripted model and its input."""
    if name == "resnet50":
        return models.resnet50(), torch.randn(1, 3, 224, 224)
    return models.small_conv_net(), torch.randn(*models.SMALL_INPUT_SHAPE)


def independent_ratio(name: str, optimize: bool, budget: float, autograd: bool = False) -> float:
    """frozen / unfrozen medians measured with torch.utils.benchmark alone.

    Each module gets its own ``Timer``; ``blocked_autorange`` (short) sizes its blocks
    (``number_per_run``) and warms it up, then ``Timer.timeit(number)`` blocks of the two
    alternate until ``2 * budget`` seconds are spent (on a shared machine two timings
    seconds apart measure the machine, not the models; freezeview times each forward
    once, in its turn, so its ratio moves more than this reference's on a busy machine).
    Each side's median per call, under ``torch.inference_mode()`` as freezeview times
    (with autograd on when asked).
    """
    module, x = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(build(name)[0])
        if optimize:
            frozen = torch.jit.optimize_for_inference(frozen)
    # Grad mode is thread-local and the Timers run their statements in this thread.
    with torch.enable_grad() if autograd else torch.inference_mode():
        return _alternate(module, frozen, x, budget)


def _alternate(module: Any, frozen: Any, x: torch.Tensor, budget: float) -> float:
    """The two Timers' blocks, alternating; frozen median / unfrozen median."""
    timers = []
    for fn in (module, frozen):
        for _ in range(3):  # the profiling executor's runs, then its optimised graph
            fn(x)
        timer = benchmark.Timer("fn(x)", globals={"fn": fn, "x": x}, num_threads=1)
        # Blocks of 20 ms at least: the first calls after the other
        # module's block run on its caches and must not weigh in the median.
        first = timer.blocked_autorange(min_run_time=0.05)
        number = max(first.number_per_run, int(0.02 / first.median) + 1)
        timers.append((timer, number))
    per_call: list[list[float]] = [[], []]
    spent = 0.0
    # 15 blocks a side at least: the reference must be steadier than what it checks
    # (ResNet-50's 0.1 s forwards give only eight pairs in two seconds).
    while spent < 2 * budget or len(per_call[0]) < 15:
        for side, (timer, number) in enumerate(timers):
            m = timer.timeit(number)
            per_call[side].append(m.median)
            spent += m.median * number
    return statistics.median(per_call[1]) / statistics.median(per_call[0])


def freezeview_run(
    name: str, optimize: bool, budget: float, autograd: bool = False
) -> dict[str, Any]:
    """One measured freezeview run: its ratio, verdict and what measuring cost."""
    module, x = build(name)
    plan = Plan(passes=default_passes(True, optimize), optimize_for_inference=optimize)
    run = MeasuredRun(Pipeline(module, plan, (x,)), budget=budget, autograd=autograd)
    observe = run.observe
    observing = 0.0

    def timed_observe(step: Any) -> None:
        nonlocal observing
        start = time.perf_counter()
        observe(step)
        observing += time.perf_counter() - start

    run.observe = timed_observe  # type: ignore[method-assign]
    for _ in run.run():
        pass
    start = time.perf_counter()
    m = run.finish()
    finish_seconds = time.perf_counter() - start
    calls = sum(t.call_seconds for t in run.timings)
    overall = m.overall
    return {
        "ratio": overall.ratio if overall is not None else float("nan"),
        "verdict": verdict_text(m),
        "made_by": [m.names[i] for i, _ in m.causes()],
        "observing": observing,
        "calls": calls,
        "forward_calls": sum(t.calls for t in run.timings),
        "finish": finish_seconds,
        "roundtrip": m.portability.roundtrip if m.portability is not None else None,
    }


def _read_rows(steps: Any) -> None:
    """What ``freeze``'s table reads of each step as it arrives."""
    for step in steps:
        _ = (step.node_count, step.nodes_added, step.nodes_removed, step.first_note)


def no_input_cost(name: str, runs: int = 5) -> tuple[float, float]:
    """Median seconds of ``freeze``'s work without inputs: before and with the measure stage.

    Both read every step's table row as it arrives (as ``freezeview freeze`` does); the
    second also counts each step's constant bytes and the result's sizes and portability.
    """
    plain: list[float] = []
    measured: list[float] = []
    for _ in range(runs):
        module = build(name)[0]
        start = time.perf_counter()
        _read_rows(Pipeline(module).run())
        plain.append(time.perf_counter() - start)
        module = build(name)[0]
        start = time.perf_counter()
        run = MeasuredRun(Pipeline(module))
        _read_rows(run.run())
        run.finish()
        measured.append(time.perf_counter() - start)
    return statistics.median(plain), statistics.median(measured)


def main() -> None:
    """Print the three tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=1.0, help="seconds per timed forward")
    parser.add_argument("--model", choices=("small", "resnet50"), action="append")
    parser.add_argument("--autograd", action="store_true", help="time both sides with autograd on")
    args = parser.parse_args()
    names = args.model or ["small", "resnet50"]
    torch.set_num_threads(1)
    print(f"torch {torch.__version__}, 1 thread, budget {args.budget} s per forward\n")
    print(
        "| model | plan | freezeview ratio | torch.utils.benchmark ratio | difference |"
        " measuring / forward calls | finish: round trip | steps named |"
    )
    print("|---|---|---|---|---|---|---|---|")
    for name in names:
        for optimize in (False, True):
            ours = freezeview_run(name, optimize, args.budget, args.autograd)
            theirs = independent_ratio(name, optimize, args.budget, args.autograd)
            diff = ours["ratio"] / theirs - 1
            plan = "freeze + optimize_for_inference" if optimize else "freeze"
            print(
                f"| {name} | {plan} | {ours['ratio']:.3f} | {theirs:.3f} | {diff:+.1%} | "
                f"{ours['observing'] / ours['calls']:.2f}x ({ours['forward_calls']} calls) | "
                f"{ours['roundtrip']} ({ours['finish']:.1f} s) | "
                f"{', '.join(ours['made_by'])} |"
            )
            print(f"<!-- {ours['verdict']} -->")
    print("\n| model | pipeline + rows | + measure stage, no inputs | ratio |")
    print("|---|---|---|---|")
    for name in names:
        plain, measured = no_input_cost(name)
        print(f"| {name} | {plain:.3f} s | {measured:.3f} s | {measured / plain:.2f}x |")


if __name__ == "__main__":
    main()
