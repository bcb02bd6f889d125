"""``freezeview freeze MODEL.pt -o OUT.pt`` next to plain torch doing the same, whole process.

Both commands run in fresh processes, alternating, on the same saved model: freezeview's
console script, and ``python -c`` that imports torch, loads the model, freezes it with
``torch.jit.freeze`` and saves it. Which of the two goes first alternates from pair to
pair (a warm page cache or a burst of load from elsewhere favours neither). Wall time
and peak memory (``ru_maxrss`` of the child) are medians of the runs (5 by default);
the ratios of the medians are what to quote, and the spread (and median) of the
per-pair ratios says how noisy the machine was (issue target: at most 1.1x time and
1.1x memory on ResNet-50 and a scripted ``nn.TransformerEncoder``).

    .venv/bin/python benchmarks/bench_freeze_command.py [--runs 5] [resnet50 transformer6 ...]
    .venv/bin/python benchmarks/bench_freeze_command.py --runs 3 /tmp/fv-ladder/L12.pt

A ``.pt`` argument is used as it is (the ladders of ``bench_scaling.py``). The CPU ratio
(user + system seconds of each child) is the steadier figure on a shared machine.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

_TORCH = (
    "import sys, warnings; warnings.simplefilter('ignore'); import torch; "
    "m = torch.jit.load(sys.argv[1]); torch.jit.save(torch.jit.freeze(m), sys.argv[2])"
)


def _measure(argv: list[str]) -> tuple[float, float, float]:
    code = (
        "import resource, subprocess, sys, time; s = time.perf_counter(); "
        "r = subprocess.run(sys.argv[1:], capture_output=True, text=True); "
        "t = time.perf_counter() - s; sys.stderr.write(r.stderr[-3000:]); "
        "r.check_returncode(); u = resource.getrusage(resource.RUSAGE_CHILDREN); "
        "print(t, u.ru_maxrss, u.ru_utime + u.ru_stime)"
    )
    out = subprocess.run([sys.executable, "-c", code, *argv], capture_output=True, text=True)
    if out.returncode:
        # The child's own error (its stderr is in the measuring process's exception).
        raise SystemExit(f"{' '.join(argv[:3])} ... failed:\n{out.stderr[-3000:]}")
    wall, peak, cpu = out.stdout.split()
    return float(wall), float(peak) / 1024, float(cpu)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "models",
        nargs="*",
        default=["resnet50", "transformer6"],
        help="model names from benchmarks/models.py, or saved .pt files (the ladders)",
    )
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    import torch

    from benchmarks.models import MODELS, transformer_encoder

    freezeview = str(Path(sys.executable).with_name("freezeview"))
    print(
        f"{'model':<14} {'freezeview s':>12} {'torch s':>8} {'ratio':>6} {'MB':>7} "
        f"{'torch MB':>9} {'ratio':>6}  {'CPU ratio':>9}  per-pair time ratios (median)"
    )
    with tempfile.TemporaryDirectory(prefix="freezeview-bench-freeze-") as folder:
        for name in args.models:
            if name.endswith(".pt"):
                model = Path(name)
                name = model.stem
            else:
                model = Path(folder) / f"{name}.pt"
                build = (
                    (lambda: transformer_encoder(6)) if name == "transformer6" else MODELS[name][0]
                )
                torch.jit.save(build(), str(model))
            ours: list[tuple[float, float, float]] = []
            theirs: list[tuple[float, float, float]] = []
            for i in range(args.runs):
                out = Path(folder) / f"out-{i}.pt"
                fv = [freezeview, "freeze", str(model), "-o", str(out), "--force"]
                plain = [sys.executable, "-c", _TORCH, str(model), str(out)]
                if i % 2:
                    theirs.append(_measure(plain))
                    ours.append(_measure(fv))
                else:
                    ours.append(_measure(fv))
                    theirs.append(_measure(plain))
            # CPU seconds (user + system) swing less than wall time on a busy machine.
            t1, m1, c1 = (statistics.median(x) for x in zip(*ours, strict=True))
            t2, m2, c2 = (statistics.median(x) for x in zip(*theirs, strict=True))
            pairs = sorted(a[0] / b[0] for a, b in zip(ours, theirs, strict=True))
            print(
                f"{name:<14} {t1:>12.2f} {t2:>8.2f} {t1 / t2:>6.2f} {m1:>7.0f} {m2:>9.0f} "
                f"{m1 / m2:>6.2f}  {c1 / c2:>9.2f}  {pairs[0]:.2f}-{pairs[-1]:.2f} "
                f"({statistics.median(pairs):.2f})",
                flush=True,
            )
    print(f"(medians of {args.runs}, alternating fresh processes; targets: 1.1x time, 1.1x memory)")
    return 0


if __name__ == "__main__":
    os.environ.setdefault("PYTHONWARNINGS", "ignore")
    raise SystemExit(main())
