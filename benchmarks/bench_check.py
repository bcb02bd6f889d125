"""How long ``freezeview check`` and ``compare`` take next to ``explain`` on the same model.

Targets: check at most 1.2x explain, compare (two models) at most 2.2x one explain, on
the ResNet-50-sized and 12-layer transformer models. The expectations file is the
model's own (``--write-expect``), so every rule is evaluated and holds.

Each measurement runs in a fresh interpreter that loads the saved model, makes one
warm-up call and times the next one, alternating explain, check and compare: in a
long-lived process torch's own freeze slows down run after run (ResNet-50's
``torch.jit.freeze`` goes from 0.11 s to 0.33 s within six calls), which would charge
check and compare, whose optimization passes allocate the folded weights, for an
artefact. Medians of several runs; the ratios are what to quote.

    .venv/bin/python benchmarks/bench_check.py [--runs 5] [resnet50 transformer12 ...]
"""

from __future__ import annotations

import argparse
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


def _one(kind: str, model: str, expect: str) -> None:
    """In a fresh interpreter: warm up once, time one call, print the seconds."""
    import torch

    from freezeview.engine import explain, load_model
    from freezeview.engine.check import check
    from freezeview.engine.compare import compare

    torch.set_num_threads(1)
    loaded = load_model(model)
    calls = {
        "explain": lambda: explain(loaded),
        "check": lambda: check(loaded, expect),
        "compare": lambda: compare(loaded, loaded),
    }
    calls[kind]()
    start = time.perf_counter()
    calls[kind]()
    print(time.perf_counter() - start)


def _prepare(name: str, folder: Path) -> tuple[Path, Path]:
    import torch

    from benchmarks.models import MODELS
    from freezeview.engine import load_model
    from freezeview.engine.check import check, expectations_text
    from freezeview.engine.model_facts import gather_facts
    from freezeview.engine.pipeline import Plan

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
    parser.add_argument(
        "--one", nargs=3, metavar=("KIND", "MODEL", "EXPECT"), help=argparse.SUPPRESS
    )
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    if args.one:
        _one(*args.one)
        return 0
    header = f"{'model':<14} {'explain s':>10} {'check s':>9} {'ratio':>6} {'compare s':>10}"
    print(f"{header} {'ratio':>6}")
    with tempfile.TemporaryDirectory(prefix="freezeview-bench-check-") as folder:
        for name in args.models:
            model, expect = _prepare(name, Path(folder))
            times: dict[str, list[float]] = {k: [] for k in KINDS}
            for _ in range(args.runs):
                for kind in KINDS:
                    done = subprocess.run(
                        [sys.executable, __file__, "--one", kind, str(model), str(expect)],
                        capture_output=True,
                        text=True,
                        check=True,
                    )
                    times[kind].append(float(done.stdout.strip().splitlines()[-1]))
            ex, ch, co = (statistics.median(times[k]) for k in KINDS)
            print(f"{name:<14} {ex:>10.3f} {ch:>9.3f} {ch / ex:>6.2f} {co:>10.3f} {co / ex:>6.2f}")
    print(f"(medians of {args.runs}, fresh processes; targets: check <= 1.2x, compare <= 2.2x)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
