"""How long ``freezeview explain`` takes next to ``torch.jit.freeze`` on the same model.

explain runs torch's own freeze (``torch._C._freeze_module`` with its freezing log: torch
decides every status) and replays freezing's decisions on copies of the graphs for the
reasons; the target is at most 1.5x ``torch.jit.freeze``. Both run in this process,
interleaved, on the same module; the figures are medians of several runs, and the ratio
is what to quote. "torch part" is the share of explain spent in torch's freeze.

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


def measure(name: str, runs: int) -> tuple[float, float, float, str]:
    """Median seconds of explain, of its torch part and of torch.jit.freeze; the summary."""
    module = MODELS[name][0]()
    explain(module)  # warm-up: first calls pay for lazy initialisation in torch
    torch.jit.freeze(module)
    ours: list[float] = []
    torch_part: list[float] = []
    theirs: list[float] = []
    summary = ""
    for _ in range(runs):
        start = time.perf_counter()
        result = explain(module)
        ours.append(time.perf_counter() - start)
        torch_part.append(result.torch_seconds)
        summary = result.summary()
        start = time.perf_counter()
        torch.jit.freeze(module)
        theirs.append(time.perf_counter() - start)
    return (
        statistics.median(ours),
        statistics.median(torch_part),
        statistics.median(theirs),
        summary,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "transformer12"])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    print(
        f"{'model':<14} {'explain s':>10} {'torch part':>10} {'freeze s':>10} {'ratio':>7}  "
        "verdicts"
    )
    worst = 0.0
    for name in args.models:
        ours, torch_part, theirs, summary = measure(name, args.runs)
        ratio = ours / theirs
        worst = max(worst, ratio)
        print(
            f"{name:<14} {ours:>10.3f} {torch_part:>10.3f} {theirs:>10.3f} {ratio:>7.2f}  {summary}"
        )
    print(f"worst ratio explain/freeze: {worst:.2f} (median of {args.runs})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
