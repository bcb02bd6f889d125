"""Print the robustness summary: every catalogue input and fuzz variant, how each ended.

Usage::

    .venv/bin/python tests/bad_inputs/summary.py [--fuzz N] [--markdown FILE]

Runs the catalogue through every CLI subcommand it concerns and ``N`` fuzz variants
(default 320) through ``freezeview explain``, all in a few in-process batches (crashes
are re-run through the real console script, see ``run.run_batch``), then prints a
table per input and the totals the issue asks for: inputs tried, how each ended,
crashes, tracebacks, files damaged. ``--markdown`` also writes the table to a file.
"""

from __future__ import annotations

import argparse
import collections
import hashlib
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bad_inputs.catalogue import CATALOGUE
from bad_inputs.fuzz import make_variant
from bad_inputs.run import Job, command_options, run_batch

CLI = ("explain", "freeze", "export")


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    """Run everything and print the tables; exit 1 if anything was not clean."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--fuzz", type=int, default=320, help="fuzz variants (default 320)")
    parser.add_argument("--markdown", type=Path, help="also write the tables to this file")
    args = parser.parse_args(argv)
    commands = list(CLI)  # every one is in `freezeview --help` (tests/cli/test_help.py)
    tmp = Path(tempfile.mkdtemp(prefix="fv-summary-"))
    jobs: list[Job] = []
    meta: dict[str, tuple] = {}
    for case in CATALOGUE:
        for command in commands:
            if command not in case.commands:
                continue
            if any(opt not in command_options(command) for opt in case.needs):
                continue
            d = tmp / f"{command}-{case.name}"
            d.mkdir()
            built = case.build(d)
            argv_ = [command, str(built.model), *built.args_for(command)]
            out = built.output_for(command, d)
            if out is not None:
                argv_ += ["-o", str(out)]
            key = f"{case.name}:{command}"
            meta[key] = (case, command, built, {p: _digest(p) for p in built.guarded})
            jobs.append(Job(key, tuple(argv_), built.env, timeout=60))
    valid = None
    if args.fuzz and "explain" in commands:
        from bad_inputs.catalogue import save_tiny

        valid = save_tiny(tmp / "valid.pt").read_bytes()
        for seed in range(args.fuzz):
            variant = make_variant(valid, seed)
            path = tmp / f"fuzz-{seed:04d}.pt"
            path.write_bytes(variant.data)
            key = f"fuzz:{seed}"
            meta[key] = (variant, "explain", None, {path: _digest(path)})
            jobs.append(Job(key, ("explain", str(path)), timeout=20))
    outcomes = run_batch(jobs, cwd=tmp)

    totals = collections.Counter()
    per_case: dict[str, dict[str, str]] = collections.defaultdict(dict)
    sentences: dict[str, str] = {}
    fuzz_endings: dict[str, collections.Counter[str]] = collections.defaultdict(collections.Counter)
    for key, outcome in outcomes.items():
        item, command, built, digests = meta[key]
        damaged = sum(1 for p, d in digests.items() if _digest(p) != d)
        ran = bool(built and built.marker is not None and built.marker.exists())
        totals["runs"] += 1
        totals["crashes"] += bool(outcome.signal_name)
        totals["hangs"] += outcome.timed_out
        totals["tracebacks"] += outcome.has_traceback
        totals["files damaged"] += damaged
        totals["hostile code ran"] += ran
        totals["not clean"] += bool(outcome.problems())
        if key.startswith("fuzz:"):
            fuzz_endings[item.kind][outcome.ending] += 1
            continue
        mark = "" if not outcome.problems() and item.matches(outcome.error) else " (!)"
        per_case[item.name][command] = f"{outcome.ending}{mark}"
        sentences.setdefault(item.name, outcome.error)

    lines = ["| input | " + " | ".join(commands) + " | what freezeview says |"]
    lines.append("|---|" + "---|" * len(commands) + "---|")
    for case in CATALOGUE:
        if case.name not in per_case:
            continue
        cells = [per_case[case.name].get(c, "-") for c in commands]
        said = sentences.get(case.name, "").replace(str(tmp), "…").replace("|", "\\|")
        lines.append(f"| {case.title} | " + " | ".join(cells) + f" | {said[:160]} |")
    if fuzz_endings:
        lines += ["", "| fuzz kind | variants | endings |", "|---|---|---|"]
        for kind, endings in sorted(fuzz_endings.items()):
            text = ", ".join(f"{e}: {n}" for e, n in sorted(endings.items()))
            lines.append(f"| {kind} | {sum(endings.values())} | {text} |")
    catalogue_inputs = len(per_case)
    lines += [
        "",
        "| inputs tried | runs | crashes | hangs | tracebacks | files damaged | hostile code ran |",
        "|---|---|---|---|---|---|---|",
        f"| {catalogue_inputs} catalogue + {sum(map(sum, map(dict.values, fuzz_endings.values())))}"
        f" fuzz | {totals['runs']} | {totals['crashes']} | {totals['hangs']} | "
        f"{totals['tracebacks']} | {totals['files damaged']} | {totals['hostile code ran']} |",
    ]
    text = "\n".join(lines)
    print(text)
    if args.markdown:
        args.markdown.write_text(text + "\n")
    return 1 if totals["not clean"] else 0


if __name__ == "__main__":
    sys.exit(main())
