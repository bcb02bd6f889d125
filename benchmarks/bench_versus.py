"""freezeview's ``export --per-step`` now against an earlier revision, side by side.

The earlier revision is checked out into a temporary git worktree; each model of
``benchmarks/models.py`` is saved once as a ``.pt`` file, and both codes export it
alternately, each run in a fresh interpreter, ``--repeat`` times:

- ``export()``: the Python API on the loaded module, its wall time split into torch's
  pipeline, snapshots, Graphviz and the rest ("ours"), as ``bench_render.py`` does;
- the command, ``python -m freezeview export MODEL.pt -o DIR --per-step``, wall time.

Medians are printed. Alternating runs see the same machine load, which on a shared
machine moves single times by tens of percent.

Usage::

    .venv/bin/python benchmarks/bench_versus.py [--base REV] [--models resnet50,transformer12]
        [--repeat 5]

``--base`` defaults to ``HEAD``: the working tree against its last commit.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from benchmarks.models import MODELS  # noqa: E402

# Runs in a fresh interpreter with the code under test first on sys.path.
_API = r"""
import json, sys, tempfile, time
from pathlib import Path
sys.path.insert(0, sys.argv[1])
import torch
from freezeview.engine.output.export import export
module = torch.jit.load(sys.argv[2])
with tempfile.TemporaryDirectory() as tmp:
    start = time.perf_counter()
    r = export(module, Path(tmp) / "out", per_step=True)
    wall = time.perf_counter() - start
print(json.dumps({"wall": wall, "torch": r.freeze_seconds, "snapshots": r.snapshot_seconds,
                  "dot": r.dot_seconds}))
"""


def one_run(root: Path, model: Path) -> dict[str, float]:
    """Both measurements of one code on one model file."""
    env = dict(os.environ, PYTHONPATH=str(root))
    done = subprocess.run(
        [sys.executable, "-c", _API, str(root), str(model)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
    )
    times: dict[str, float] = json.loads(done.stdout.strip().splitlines()[-1])
    times["ours"] = times["wall"] - times["torch"] - times["snapshots"] - times["dot"]
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        command = ["export", str(model), "-o", f"{tmp}/out", "--per-step"]
        subprocess.run(
            [sys.executable, "-m", "freezeview", *command],
            capture_output=True,
            env=env,
            check=True,
            cwd=tmp,
        )
        times["command"] = time.perf_counter() - start
    return times


def report(name: str, label: str, runs: list[dict[str, float]]) -> None:
    """One line of medians."""
    m = {key: statistics.median(r[key] for r in runs) for key in runs[0]}
    print(
        f"  {name:14s} {label:7s} export() {m['wall']:5.2f}s (torch {m['torch']:.2f}, "
        f"snapshots {m['snapshots']:.2f}, dot {m['dot']:.2f}, ours {m['ours']:.2f} = "
        f"{m['ours'] / m['wall']:.0%}) | command {m['command']:5.2f}s "
        f"(ours {m['ours'] / m['command']:.0%} of it)"
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument(
        "--base",
        default="HEAD",
        help="the earlier git revision (default: HEAD, i.e. what the "
        "working tree's uncommitted changes do)",
    )
    parser.add_argument("--models", default="resnet50,transformer12")
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp) / "base"
        added = subprocess.run(
            ["git", "-C", str(ROOT), "worktree", "add", "--detach", str(base), args.base],
            capture_output=True,
            text=True,
        )
        if added.returncode != 0:
            why = (added.stderr.strip().splitlines() or ["git failed"])[-1]
            print(f"bench_versus: cannot check out {args.base!r} ({why}).", file=sys.stderr)
            return 2
        try:
            codes = {args.base[:10]: base, "now": ROOT}
            print(f"export --per-step, {args.repeat} alternating run(s) each, medians:")
            for name in filter(None, args.models.split(",")):
                model = Path(tmp) / f"{name}.pt"
                MODELS[name][0]().save(str(model))
                runs: dict[str, list[dict[str, float]]] = {label: [] for label in codes}
                for _ in range(args.repeat):
                    for label, root in codes.items():
                        runs[label].append(one_run(root, model))
                for label, measured in runs.items():
                    report(name, label, measured)
        finally:
            subprocess.run(
                ["git", "-C", str(ROOT), "worktree", "remove", "--force", str(base)],
                check=False,
                capture_output=True,
            )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
