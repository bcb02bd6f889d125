"""Time and memory of a full stepwise freezeview run against ``torch.jit.freeze``.

Two large scripted models from ``benchmarks/models.py`` -- ``resnet50()`` (a
torchvision-style ResNet-50, bottleneck blocks [3, 4, 6, 3]) and
``transformer_encoder()`` (a 12-layer ``nn.TransformerEncoder``) -- are frozen side by
side in one run: by
``torch.jit.freeze`` and by ``freezeview.engine.freeze.pipeline.Pipeline(...).run_all()``
(every step snapshotted and diffed, as the app and ``freezeview freeze`` do).

Three columns per model: ``torch`` (``torch.jit.freeze``), ``freezeview`` (a full
stepwise run: every step computed, its pictures, counts and notes left for whoever
reads them -- the issue's target) and ``shown`` (the same run, then every step's
snapshot, counts and notes read, as ``freezeview freeze``'s table and the app's step
list do).

Each measurement runs in a fresh subprocess, so C++ allocations are counted: the peak
resident set size (``ru_maxrss``) of the whole process, and the same peak minus the
RSS just before freezing (what the freeze itself added). The columns' runs are
interleaved; medians of 5 runs.

Usage::

    .venv/bin/python benchmarks/bench_pipeline.py [--runs 5] [--model resnet50|transformer]
        [--threads 1]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    # Run as a script (``python benchmarks/bench_pipeline.py``): make ``benchmarks`` importable.
    sys.path.insert(0, str(ROOT))

from benchmarks import models  # noqa: E402

RUNS = 5


def build(name: str) -> torch.jit.ScriptModule:
    """A fresh eval-mode scripted model by name, from ``benchmarks/models.py``."""
    if name == "resnet50":
        return models.resnet50()
    return models.transformer_encoder()


def _rss_kb() -> int:
    # Current resident set size, from /proc (Linux); 0 where unavailable.
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return 0


def child(name: str, mode: str, threads: int) -> None:
    """Run one measurement in this (fresh) process and print it as JSON."""
    import resource
    import time
    import warnings

    warnings.simplefilter("ignore")
    if threads:
        torch.set_num_threads(threads)
    module = build(name)
    if mode != "torch":
        # Imported untimed (as torch is), but its memory counts in freezeview's peak.
        from freezeview.engine.freeze.pipeline import Pipeline

    rss_before = _rss_kb()
    start = time.perf_counter()
    if mode == "torch":
        frozen = torch.jit.freeze(module)
        steps = 0
    else:
        pipe = Pipeline(module)
        done = pipe.run_all()
        steps = len(done)
        frozen = pipe.frozen_module
        if mode == "shown":
            # What `freezeview freeze`'s table and the app's step list read: every
            # step's picture, counts and notes (explain's kept reasons included).
            for step in done:
                _ = (step.snapshot, step.nodes_added, step.notes)
    seconds = time.perf_counter() - start
    assert frozen is not None
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(
        json.dumps(
            {
                "seconds": seconds,
                "peak_kb": peak,
                "added_kb": max(peak - rss_before, 0),
                "nodes": sum(1 for _ in frozen.graph.nodes()),
                "steps": steps,
            }
        )
    )


def measure(name: str, mode: str, threads: int = 0) -> dict[str, float]:
    """One fresh subprocess; returns its JSON line plus the process's wall time."""
    import time

    start = time.perf_counter()
    out = subprocess.run(
        [sys.executable, __file__, "--child", name, mode, "--threads", str(threads)],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    data: dict[str, float] = json.loads(out.strip().splitlines()[-1])
    data["process_seconds"] = time.perf_counter() - start
    return data


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=RUNS)
    parser.add_argument("--model", choices=("resnet50", "transformer"), action="append")
    parser.add_argument(
        "--threads",
        type=int,
        default=0,
        help="torch intra-op threads in every run (default: torch's own choice). On a "
        "shared machine, 1 keeps other processes' load from swinging the timings.",
    )
    parser.add_argument("--child", nargs=2, metavar=("MODEL", "MODE"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        model, mode = args.child
        child(model, mode, args.threads)
        return 0
    models = args.model or ["resnet50", "transformer"]
    threads = args.threads or "default"
    print(
        f"torch {torch.__version__}; medians of {args.runs} fresh processes per cell; "
        f"torch threads: {threads}\n"
    )
    header = (
        f"{'model':<12} {'who':<11} {'freeze s':>9} {'process s':>10} {'peak MB':>8} "
        f"{'added MB':>9} {'steps':>6} {'nodes':>6}"
    )
    print(header)
    print("-" * len(header))
    summary = []
    modes = ("torch", "freezeview", "shown")
    for name in models:
        # Interleaved (torch, freezeview, shown, torch, ...): a busy machine's load swings
        # then hit every column alike. Each measurement is its own fresh process.
        runs: dict[str, list[dict[str, float]]] = {mode: [] for mode in modes}
        for _ in range(args.runs):
            for mode in modes:
                runs[mode].append(measure(name, mode, args.threads))
        cells = {}
        for mode in modes:
            cell = {key: statistics.median(r[key] for r in runs[mode]) for key in runs[mode][0]}
            cells[mode] = cell
            print(
                f"{name:<12} {mode:<11} {cell['seconds']:>9.3f} {cell['process_seconds']:>10.2f} "
                f"{cell['peak_kb'] / 1024:>8.0f} {cell['added_kb'] / 1024:>9.1f} "
                f"{int(cell['steps']):>6} {int(cell['nodes']):>6}"
            )
        t = cells["torch"]
        fastest_torch = min(r["seconds"] for r in runs["torch"])
        for mode in modes[1:]:
            f = cells[mode]
            summary.append(
                (
                    name,
                    mode,
                    f["seconds"] / t["seconds"],
                    min(r["seconds"] for r in runs[mode]) / fastest_torch,
                    f["process_seconds"] / t["process_seconds"],
                    f["peak_kb"] / t["peak_kb"],
                    (f["added_kb"] / t["added_kb"]) if t["added_kb"] else float("nan"),
                )
            )
    print("\nratios to torch.jit.freeze (targets for `freezeview`: memory <= 1.3x, time <= 1.5x;")
    print("'fastest' compares the fastest runs: on a busy machine it shows the cost of the")
    print("work itself, while a median can land on a burst of someone else's load)")
    print(
        f"{'model':<12} {'who':<11} {'freeze time':>12} {'fastest':>8} {'process time':>13} "
        f"{'peak RSS':>9} {'added RSS':>10}"
    )
    for name, mode, ft, fm, pt, pm, am in summary:
        print(
            f"{name:<12} {mode:<11} {ft:>11.2f}x {fm:>7.2f}x {pt:>12.2f}x {pm:>8.2f}x {am:>9.2f}x"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
