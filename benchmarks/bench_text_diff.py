"""How long freezeview's IR text diffs (``ir.diff``, ``NN-step.diff``) take next to difflib.

For each model of ``benchmarks/models.py`` the stepwise pipeline runs once; then the
printout pairs that ``export --per-step`` diffs (the first graph against the last, and
each step against the one before it) are diffed by ``unified_ir_diff`` as an export
does (its printout cache emptied first) and by :func:`difflib.unified_diff`, alternating,
in this process. Printed: median milliseconds of both per pair and in all, and the
changed lines of each (freezeview's diff is minimal, so never more than difflib's).

    .venv/bin/python benchmarks/bench_text_diff.py [--runs 5] [--no-difflib] [transformer12 ...]
"""

from __future__ import annotations

import argparse
import difflib
import statistics
import sys
import time
from collections.abc import Callable
from itertools import pairwise
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchmarks.models import MODELS
from freezeview.engine.diff import text_diff
from freezeview.engine.freeze.pipeline import Pipeline
from freezeview.engine.graph.snapshot_values import GraphSnapshot
from freezeview.engine.load.loading import LoadedModel

Pair = tuple[str, GraphSnapshot, GraphSnapshot]


def export_pairs(name: str) -> list[Pair]:
    """The snapshot pairs an export diffs as text, labelled by their ``.diff`` file."""
    steps = Pipeline(LoadedModel.from_module(MODELS[name][0]()), None).run_all()
    shown = [step for step in steps if step.snapshot is not None]
    pairs: list[Pair] = [("ir.diff", shown[0].snapshot, shown[-1].snapshot)]
    for k, (before, after) in enumerate(pairwise(shown), start=1):
        pairs.append((f"{k:02d}-{after.name}", before.snapshot, after.snapshot))
    return pairs


def ours(before: GraphSnapshot, after: GraphSnapshot) -> str:
    """freezeview's diff, paying for the printouts as the first diff of an export does."""
    return text_diff.unified_ir_diff(before, after)


def with_difflib(before: GraphSnapshot, after: GraphSnapshot) -> str:
    """The same diff by difflib, the standard library's matcher."""
    old, new = before.text.splitlines(), after.text.splitlines()
    return "\n".join(difflib.unified_diff(old, new, lineterm=""))


def median_ms(runs: int, call: Callable[[], object]) -> float:
    """Median wall time of ``call`` in milliseconds."""
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        call()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1000


def changed(text: str) -> int:
    """Lines a unified diff removes or adds."""
    return sum(1 for line in text.splitlines()[2:] if line[:1] in "+-")


def pair_row(
    label: str, before: GraphSnapshot, after: GraphSnapshot, runs: int, compare: bool
) -> str:
    """One pair's medians (and difflib's, with its changed lines against ours)."""

    def one() -> str:
        text_diff._PRINTOUTS.clear()
        return ours(before, after)

    sizes = f"{len(before.text.splitlines())}x{len(after.text.splitlines())}"
    row = f"  {label:28s} {sizes:>13s} ours {median_ms(runs, one):7.1f} ms"
    if compare:
        theirs = median_ms(runs, lambda: with_difflib(before, after))
        counts = f"{changed(one())} vs {changed(with_difflib(before, after))}"
        row += f"  difflib {theirs:8.1f} ms  changed lines {counts}"
    return row


def bench(name: str, runs: int, compare: bool) -> None:
    """Print the medians for one model's export pairs."""
    pairs = export_pairs(name)

    def whole_export() -> None:
        # An export diffs the pairs in this order; its cache starts empty.
        text_diff._PRINTOUTS.clear()
        for _label, before, after in pairs:
            ours(before, after)

    total = median_ms(runs, whole_export)
    print(f"{name}: the {len(pairs)} pairs of an export, ours in all: {total:.1f} ms")
    for label, before, after in pairs:
        if before is not after:
            print(pair_row(label, before, after, runs, compare))


def main() -> None:
    """Parse the command line and run the benchmark."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["transformer12"])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument(
        "--no-difflib", action="store_true", help="skip difflib (seconds per big pair)"
    )
    args = parser.parse_args()
    for name in args.models:
        bench(name, args.runs, not args.no_difflib)


if __name__ == "__main__":
    main()
