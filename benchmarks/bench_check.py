"""How long ``freezeview check`` and ``compare`` take next to ``explain`` on the same model.

Targets: check at most 1.2x explain, compare (two models) at most 2.2x one explain, on
the ResNet-50-sized and 12-layer transformer models. The expectations file is the
model's own (``--write-expect``), so every rule is evaluated and holds.

Each measurement runs in a fresh interpreter that loads the saved model, makes one
warm-up call and times the next one, alternating explain, check and compare: in a
long-lived process torch's own freeze slows down run after run (ResNet-50's
``torch.jit.freeze`` goes from 0.11 s to 0.33 s within six calls), which would charge
check and compare, whose optimization passes allocate the folded weights, for an
artefact. compare gets two copies of the model, loaded apart, as the command line
loads OLD.pt and NEW.pt. Medians of several runs; the ratios are what to quote.

Each run reports wall time and CPU time (the process and any child: compare may fork a
helper for the second model, ``freezeview.engine.ci.compare_fork``). On a machine shared
with other work the wall ratios follow the neighbours' load; the CPU ratios do not.
``--fork 0`` / ``--fork 1`` set ``FREEZEVIEW_COMPARE_FORK`` for the measured processes
(default: compare decides by the load).

    .venv/bin/python benchmarks/bench_check.py [--runs 5] [--fork auto|0|1] [MODEL ...]
"""

from __future__ import annotations

import argparse
import os
import resource
import statistics
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

KINDS = ("explain", "check", "compare")


def _cpu() -> float:
    """CPU seconds of this process and its reaped children so far."""
    own = resource.getrusage(resource.RUSAGE_SELF)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    return own.ru_utime + own.ru_stime + children.ru_utime + children.ru_stime


def _one(kind: str, model: str, expect: str) -> None:
    """In a fresh interpreter: warm up once, time one call, print wall and CPU seconds."""
    import torch

    from freezeview.engine import explain, load_model
    from freezeview.engine.ci.check import check
    from freezeview.engine.ci.compare import compare

    torch.set_num_threads(1)
    loaded = load_model(model)
    other = load_model(model) if kind == "compare" else loaded
    calls = {
        "explain": lambda: explain(loaded),
        "check": lambda: check(loaded, expect),
        "compare": lambda: compare(loaded, other),
    }
    calls[kind]()
    start, cpu = time.perf_counter(), _cpu()
    calls[kind]()
    print(time.perf_counter() - start, _cpu() - cpu)


def _prepare(name: str, folder: Path) -> tuple[Path, Path]:
    import torch

    from benchmarks.models import MODELS
    from freezeview.engine import load_model
    from freezeview.engine.ci.check import check, expectations_text
    from freezeview.engine.ci.model_facts import gather_facts
    from freezeview.engine.freeze.pipeline import Plan

    path = folder / f"{name}.pt"
    torch.jit.save(MODELS[name][0](), str(path))
    expect = folder / f"{name}.toml"
    loaded = load_model(path)
    expect.write_text(expectations_text(gather_facts(loaded, Plan.default())))
    assert check(loaded, expect).ok, "the model's own expectations must hold"
    return path, expect


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "transformer12"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--fork", choices=("auto", "0", "1"), default="auto")
    parser.add_argument(
        "--one", nargs=3, metavar=("KIND", "MODEL", "EXPECT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.one:
        _one(*args.one)
        return 0
    env = dict(os.environ)
    env.pop("FREEZEVIEW_COMPARE_FORK", None)
    if args.fork != "auto":
        env["FREEZEVIEW_COMPARE_FORK"] = args.fork
    header = f"{'model':<14} {'time':<5} {'explain s':>10} {'check s':>9} {'ratio':>6}"
    print(f"{header} {'compare s':>10} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="freezeview-bench-check-") as folder:
        for name in args.models:
            model, expect = _prepare(name, Path(folder))
            times: dict[str, list[tuple[float, float]]] = {k: [] for k in KINDS}
            for _ in range(args.runs):
                for kind in KINDS:
                    done = subprocess.run(
                        [sys.executable, __file__, "--one", kind, str(model), str(expect)],
                        capture_output=True,
                        text=True,
                        check=True,
                        env=env,
                    )
                    wall, cpu = done.stdout.strip().splitlines()[-1].split()
                    times[kind].append((float(wall), float(cpu)))
            for label, column in (("wall", 0), ("cpu", 1)):
                ex, ch, co = (statistics.median(t[column] for t in times[k]) for k in KINDS)
                print(
                    f"{name:<14} {label:<5} {ex:>10.3f} {ch:>9.3f} {ch / ex:>6.2f} "
                    f"{co:>10.3f} {co / ex:>6.2f}"
                )
    print(f"(medians of {args.runs}, fresh processes; targets: check <= 1.2x, compare <= 2.2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
