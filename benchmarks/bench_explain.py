"""How long ``freezeview explain`` takes next to ``torch.jit.freeze`` on the same model.

explain replays freezing's decisions on copies of the graphs; it should cost no more
than freezing itself. Both run in this process, interleaved, on the same module; the
figures are medians of several runs, and the ratio is what to quote.

    .venv/bin/python benchmarks/bench_explain.py [--runs 5] [resnet50 transformer12 ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import torch

from benchmarks.models import MODELS
from freezeview.engine import explain


def measure(name: str, runs: int) -> tuple[float, float, str]:
    """Median seconds of explain and of torch.jit.freeze, and explain's summary."""
    module = MODELS[name][0]()
    explain(module)  # warm-up: first calls pay for lazy initialisation in torch
    torch.jit.freeze(module)
    ours: list[float] = []
    theirs: list[float] = []
    summary = ""
    for _ in range(runs):
        start = time.perf_counter()
        summary = explain(module).summary()
        ours.append(time.perf_counter() - start)
        start = time.perf_counter()
        torch.jit.freeze(module)
        theirs.append(time.perf_counter() - start)
    return statistics.median(ours), statistics.median(theirs), summary


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "transformer12"])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(f"{'model':<14} {'explain s':>10} {'freeze s':>10} {'ratio':>7}  verdicts")
    worst = 0.0
    for name in args.models:
        ours, theirs, summary = measure(name, args.runs)
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(f"{name:<14} {ours:>10.3f} {theirs:>10.3f} {ratio:>7.2f}  {summary}")
    print(f"worst ratio explain/freeze: {worst:.2f} (median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
