"""Where the time goes: freezeview's per-node profiles against torch's own, in one run.

For a model (ResNet-50 at 1x3x224x224 by default, or the small conv net), one thread:

1. **per-kind shares**: the final frozen graph's per-kind shares (freezeview: each node's
   median over Static Runtime's blocks, summed per kind) against Static Runtime's own
   ``percent_per_node_type`` measured in the same run (each kind's median over the
   blocks), and against an
   independent Static Runtime run of ``torch.jit.freeze(module)`` made here. Target:
   within 3 percentage points for every kind above 2 %.
2. **the unfrozen module adds up**: the profiler's node times (medians per forward,
   summed) against the unfrozen forward's latency measured by freezeview's timing loop
   in the same run. Target: within 15 %.
3. **cost**: per profiled graph, the seconds profiling took against the forward runs it
   made times that graph's plain forward median (the latency column's, same run).
   Target: at most 3x. torch sets its profiler up on the first start in a process (about
   a second): that one-off is shown apart.

Usage::

    .venv/bin/python benchmarks/bench_node_time.py [--budget 0.5] [--model resnet50|small]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import warnings
from pathlib import Path
from typing import Any

import torch

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from benchmarks import models  # noqa: E402
from freezeview.engine.freeze import Pipeline, Plan, default_passes  # noqa: E402
from freezeview.engine.measure import MeasuredRun  # noqa: E402
from freezeview.engine.measure.node_clocks import static_runtime_kind  # noqa: E402
from freezeview.engine.measure.node_time import NodeTimer  # noqa: E402
from freezeview.engine.measure.node_time_values import STATIC_RUNTIME  # noqa: E402


def build(name: str) -> tuple[torch.jit.ScriptModule, torch.Tensor]:
    """A fresh scripted model and its input."""
    if name == "resnet50":
        return models.resnet50(), torch.randn(1, 3, 224, 224)
    return models.small_conv_net(), torch.randn(*models.SMALL_INPUT_SHAPE)


def independent_percent(name: str, iters: int) -> dict[str, float]:
    """Static Runtime's ``percent_per_node_type`` of ``torch.jit.freeze`` of the model."""
    module, x = build(name)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(module)
    static = torch._C._jit_to_static_module(frozen._c)
    torch.set_num_threads(1)
    result = static.benchmark_individual_ops([x], {}, 2, iters)
    return {str(k): float(v) for k, v in result.percent_per_node_type.items()}


def run(name: str, budget: float) -> dict[str, Any]:
    """One freezeview run with latency and per-node profiles; the three comparisons."""
    module, x = build(name)
    pipe = Pipeline(module, Plan(passes=default_passes(True, False)), (x,))
    measured = MeasuredRun(pipe, budget=budget)
    timer = NodeTimer(pipe, budget=budget)
    for step in measured.run():
        timer.observe(step)
    m = measured.measurement
    final = [p for p in timer.profiles if p.tool == STATIC_RUNTIME][-1]
    ours: dict[str, float] = {}
    for k in final.kinds:  # by the kind Static Runtime names (relu_ runs as relu)
        kind = static_runtime_kind(k.kind)
        ours[kind] = ours.get(kind, 0.0) + 100 * k.share
    sr_same = final.torch_percent
    sr_alone = independent_percent(name, max(5, final.runs // max(final.blocks, 1)))
    big = sorted({k for k, v in sr_same.items() if v > 2} | {k for k, v in ours.items() if v > 2})
    unfrozen = timer.unfrozen
    assert unfrozen is not None and m.unfrozen is not None
    costs = []
    for p in timer.profiles:
        latency = m.unfrozen if p.step is None else m.steps.get(p.step)
        if latency is None:
            continue
        forwards = p.calls * latency.median / 1000
        costs.append((p.title, p.tool, p.calls, (p.seconds - p.startup) / forwards, p.startup))
    return {
        "kinds": [(k, ours.get(k, 0.0), sr_same.get(k, 0.0), sr_alone.get(k, 0.0)) for k in big],
        "unfrozen_sum": unfrozen.total_ms,
        "unfrozen_latency": m.unfrozen.median,
        "costs": costs,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--budget", type=float, default=0.5)
    parser.add_argument("--model", choices=("resnet50", "small"), default="resnet50")
    args = parser.parse_args()
    out = run(args.model, args.budget)
    print(f"{args.model}, one thread, budget {args.budget} s")
    print("kind                         freezeview  SR same run  SR alone   |diff| pp")
    worst = 0.0
    for kind, ours, same, alone in out["kinds"]:
        diff = abs(ours - same)
        worst = max(worst, diff)
        print(f"{kind:28s} {ours:9.2f}% {same:10.2f}% {alone:9.2f}%   {diff:6.2f}")
    ratio = out["unfrozen_sum"] / out["unfrozen_latency"]
    print(
        f"unfrozen: profiler nodes sum {out['unfrozen_sum']:.3f} ms, forward median "
        f"{out['unfrozen_latency']:.3f} ms, ratio {ratio:.3f}"
    )
    for title, tool, calls, cost, startup in out["costs"]:
        once = f"  (+ the profiler's one-off start {startup:.2f} s)" if startup > 0.05 else ""
        print(f"cost {title:40s} {tool:15s} {calls:6d} forwards  {cost:5.2f}x{once}")
    worst_cost = max(c[3] for c in out["costs"])
    print(
        f"targets: shares within 3 pp: {worst:.2f} pp {'ok' if worst <= 3 else 'MISSED'}; "
        f"sum within 15 %: {abs(ratio - 1):.1%} {'ok' if abs(ratio - 1) <= 0.15 else 'MISSED'}; "
        f"cost at most 3x: median {statistics.median(c[3] for c in out['costs']):.2f}x, "
        f"worst {worst_cost:.2f}x {'ok' if worst_cost <= 3 else 'MISSED'}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
