"""Time freezeview's pictures on real-size models, with no downloads.

Models come from ``benchmarks/models.py`` (a scripted ResNet-50, a 12-layer
``nn.TransformerEncoder``, a DenseNet-style dense-block stack, a wav2vec2-style speech
encoder). Three parts:

1. ``export --per-step`` (issue 4): the whole export of each model, at the default
   level and with every op drawn, ``--repeat`` times (medians printed). Total wall time
   is split into torch's work (the pipeline's run), freezeview's snapshots of the
   graphs, Graphviz's time and freezeview's own drawing work ("ours": diffs, IR diffs,
   views and DOT, writing files, explain's reasons for kept attributes, the steps'
   notes, index.html, garbage collection), with each share (see :func:`bench_export`).
   Then the same at the default level as the command a user types, in a fresh
   interpreter, whose wall time also holds start-up, imports and ``torch.jit.load``
   (see :func:`bench_export_command`); with ``--one-process-too``, alternately with and
   without ``--one-process``, to see what the forked helper saves.
2. ``before / after / diff`` (issue 7): per model and picture, freezeview's time,
   Graphviz's time, boxes and edges drawn, SVG size.
3. ``--layouts``: layout settings compared on every op of the ResNet-50 graphs (the
   choice documented in render.py).
4. ``--ceiling``: Graphviz's time against box count on every-op pictures of growing
   DenseNet-style stacks (the easiest big graphs measured) and of one- and two-layer
   ``nn.TransformerEncoder`` stacks (the hardest), and the growth exponent between
   sizes: the measurements behind ``freezeview.engine.draw.dot.ceiling.box_ceiling``.

Usage::

    .venv/bin/python benchmarks/bench_render.py [--quick] [--models resnet50,transformer12]
        [--picture-models resnet50,transformer12,densenet,speech] [--full-timeout 30]
        [--layouts] [--ceiling] [--repeat 3] [--one-process-too]
"""

from __future__ import annotations

import argparse
import json
import math
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.models import MODELS, DenseNetLike, resnet50, transformer_encoder
from freezeview.engine.diff.diff import diff_snapshots
from freezeview.engine.draw.dot.ceiling import box_ceiling
from freezeview.engine.draw.dot.run import DotTimeoutError, run_dot
from freezeview.engine.draw.dot.text import GraphAttrs
from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.draw.folding.scopes import module_paths
from freezeview.engine.draw.pictures.picture import snapshot_picture
from freezeview.engine.draw.pictures.render import RenderResult, render_diff, render_snapshot
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph
from freezeview.engine.output.export import export


@dataclass
class ExportTimes:
    """One ``export --per-step`` run, split by who spent the time (seconds)."""

    wall: float
    torch: float  # the pipeline's run: torch's freezing and passes
    snapshots: float  # freezeview reading torch's graphs (printout + parse), lazily
    dot: float  # Graphviz
    ours: float  # everything else: freezeview's diffs, views, DOT, writing, notes, explain
    detail: str
    pictures: int
    boxes: int
    fallbacks: int

    @property
    def ours_share(self) -> float:
        """freezeview's drawing work outside dot, as a share of the export's wall time."""
        return self.ours / self.wall

    @property
    def drawing_share(self) -> float:
        """The same work as a share of drawing (ours + dot) only."""
        return self.ours / (self.ours + self.dot)

    @property
    def freezeview_share(self) -> float:
        """All of freezeview's own work (graph reading included) as a share of wall time."""
        return (self.ours + self.snapshots) / self.wall


def bench_export(
    name: str, module: torch.jit.ScriptModule, label: str, options: RenderOptions
) -> ExportTimes:
    """One ``export --per-step`` run, reported as total = torch + snapshots + dot + ours.

    What counts where, and why:

    - *torch*: ``ExportResult.freeze_seconds``, the pipeline's run (torch's freezing and
      passes; the pipeline's bookkeeping there is a few printouts).
    - *snapshots*: ``snapshot_seconds``, freezeview turning torch's graphs into
      snapshots. It is freezeview's code, not torch's, so it is reported on its own and
      counted in the "all freezeview" share; it is the pipeline's product (every step
      holds its snapshots), not DOT building, diffing or writing.
    - *dot*: Graphviz's subprocesses, all attempts.
    - *ours*: the rest of the wall time: diffs, IR diffs, views and DOT, writing files,
      explain's reasons for kept attributes, the steps' notes (the pipeline's summaries
      of each step: freezeview's diffs and explain, so freezeview's work), index.html,
      the garbage collector's pass at the end, and anything not timed apart. With a
      second CPU the steps' diffs and IR diffs are made by a forked helper process
      while the export draws (``engine/plumbing/forked.py``): ours counts the wall time the
      export waited for it, and the helper's own time is shown apart.
    """
    with tempfile.TemporaryDirectory() as tmp:
        start = time.perf_counter()
        r = export(module, Path(tmp) / "out", per_step=True, options=options)
        wall = time.perf_counter() - start
    renders = r.all_renders()
    dot = r.dot_seconds
    ours = wall - r.freeze_seconds - r.snapshot_seconds - dot
    other = ours - (
        r.diff_seconds
        + r.ir_diff_seconds
        + r.build_seconds
        + r.write_seconds
        + r.reasons_seconds
        + r.notes_seconds
        + r.index_seconds
        + r.gc_seconds
        + r.helper_wait_seconds
    )
    detail = (
        f"ours: diff {r.diff_seconds:.2f}s, IR diff {r.ir_diff_seconds:.2f}s, views+DOT "
        f"{r.build_seconds:.2f}s, write {r.write_seconds:.2f}s, kept reasons "
        f"{r.reasons_seconds:.2f}s, step notes {r.notes_seconds:.2f}s, index "
        f"{r.index_seconds:.2f}s, gc {r.gc_seconds:.2f}s, waiting for the helper "
        f"{r.helper_wait_seconds:.2f}s, other {other:.2f}s (the helper process: "
        f"{r.helper_seconds:.2f}s of steps' diffs)"
    )
    return ExportTimes(
        wall=wall,
        torch=r.freeze_seconds,
        snapshots=r.snapshot_seconds,
        dot=dot,
        ours=ours,
        detail=detail,
        pictures=len(renders),
        boxes=max((x.nodes for x in renders), default=0),
        fallbacks=len(r.notes),
    )


def bench_export_command(
    name: str, module: torch.jit.ScriptModule, extra: Sequence[str] = ()
) -> ExportTimes:
    """One ``freezeview export MODEL.pt -o DIR --per-step --json`` run, as a user runs it.

    The model is saved to a file first; the command runs in a fresh interpreter and its
    wall time is what the user waits for. The command's JSON report splits it the same
    way as :func:`bench_export`; what is left of the wall time (the interpreter, importing
    torch and freezeview, ``torch.jit.load``, printing) is counted as torch's, since
    none of it is freezeview drawing anything.
    """
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / f"{name}.pt"
        module.save(str(path))
        argv = [sys.executable, "-m", "freezeview", "export", str(path), "-o", f"{tmp}/out"]
        start = time.perf_counter()
        done = subprocess.run(
            [*argv, "--per-step", "--json", *extra], capture_output=True, check=True
        )
        wall = time.perf_counter() - start
    report = json.loads(done.stdout)
    dot = report["dot_seconds"]
    snapshots = report["snapshot_seconds"]
    ours = report["total_seconds"] - report["freeze_seconds"] - snapshots - dot
    return ExportTimes(
        wall=wall,
        torch=wall - ours - snapshots - dot,
        snapshots=snapshots,
        dot=dot,
        ours=ours,
        detail=(
            f"start-up and torch.jit.load {wall - report['total_seconds']:.2f}s "
            f"(load {report['load_seconds']:.2f}s), pipeline {report['freeze_seconds']:.2f}s"
        ),
        pictures=len(report["pictures"]),
        boxes=max((p["nodes"] for p in report["pictures"]), default=0),
        fallbacks=len(report["notes"]),
    )


def report_export(name: str, label: str, t: ExportTimes, tag: str = "") -> None:
    """Print one export's split (``tag``: ``median`` for the medians line)."""
    w = t.wall
    print(
        f"  {name:13s} {label:8s} {tag:6s} total {w:6.2f}s | torch {t.torch:5.2f}s "
        f"({t.torch / w:4.0%}) | snapshots {t.snapshots:5.2f}s ({t.snapshots / w:4.0%}) | "
        f"dot {t.dot:6.2f}s ({t.dot / w:4.0%}) | ours {t.ours:5.2f}s ({t.ours_share:4.0%}) "
        f"| ours/(ours+dot) {t.drawing_share:4.0%} | all freezeview {t.freezeview_share:4.0%}"
    )
    if tag != "median":
        print(
            f"  {'':13s} {'':8s} {'':6s} {t.detail}; {t.pictures} pictures, largest "
            f"{t.boxes} boxes, {t.fallbacks} fallback(s)"
        )


def median_times(runs: list[ExportTimes]) -> ExportTimes:
    """Per-field medians (each share is then computed from the medians)."""
    return ExportTimes(
        wall=statistics.median(r.wall for r in runs),
        torch=statistics.median(r.torch for r in runs),
        snapshots=statistics.median(r.snapshots for r in runs),
        dot=statistics.median(r.dot for r in runs),
        ours=statistics.median(r.ours for r in runs),
        detail="",
        pictures=runs[0].pictures,
        boxes=runs[0].boxes,
        fallbacks=runs[0].fallbacks,
    )


def snapshots(module: torch.jit.ScriptModule) -> tuple[GraphSnapshot, GraphSnapshot]:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph), snapshot_graph(torch.jit.freeze(module).forward.graph)


def draw_all(
    before: GraphSnapshot, after: GraphSnapshot, out: Path, options: RenderOptions
) -> tuple[list[tuple[str, RenderResult]], float, float]:
    """before/after/diff pictures; returns results, diff seconds and wall seconds."""
    start = time.perf_counter()
    diff = diff_snapshots(before, after)
    diff_seconds = time.perf_counter() - start
    results = [
        ("before", render_snapshot(before, out / "before.svg", options=options)),
        ("after", render_snapshot(after, out / "after.svg", options=options)),
        ("diff", render_diff(diff, out / "diff.svg", options=options)),
    ]
    return results, diff_seconds, time.perf_counter() - start


def report(
    name: str, label: str, results: list[tuple[str, RenderResult]], diff_s: float, wall: float
) -> None:
    ours = diff_s + sum(r.build_seconds + r.write_seconds for _, r in results)
    dot = sum(r.dot_seconds for _, r in results)
    for pic, r in results:
        level = "ops" if r.level is None else f"d{r.level}"
        note = f"  ({r.notes[0]})" if r.notes else ""
        print(
            f"  {name:13s} {label:8s} {pic:6s} level={level:4s} boxes={r.nodes:5d} "
            f"edges={r.edges:5d} ours={r.build_seconds + r.write_seconds:6.2f}s "
            f"dot={r.dot_seconds:6.2f}s svg={r.size / 1024:7.0f} KB{note}"
        )
    share = ours / (ours + dot) if ours + dot else 0.0
    print(
        f"  {name:13s} {label:8s} TOTAL  wall={wall:6.2f}s ours={ours:6.2f}s "
        f"(diff {diff_s:.2f}s) dot={dot:6.2f}s outside-dot={share:.0%}"
    )


def layouts(snap: GraphSnapshot, out: Path, timeout: float) -> None:
    """Compare layout settings on the fully expanded picture of one graph."""
    settings = {
        "dot clusters": GraphAttrs(newrank=False),
        "dot newrank": GraphAttrs(newrank=True),
        "dot newrank+ordering=out": GraphAttrs(newrank=True, ordering="out"),
    }
    for label, attrs in settings.items():
        opts = RenderOptions(level=None, timeout=timeout, graph=attrs)
        try:
            r = render_snapshot(snap, out / "layout.svg", options=opts)
            print(f"  {label:26s} dot={r.dot_seconds:6.2f}s boxes={r.nodes} level={r.level}")
        except DotTimeoutError:
            print(f"  {label:26s} did not finish in {timeout:g} s")
    opts = RenderOptions(level=None, timeout=timeout, engine="sfdp")
    try:
        r = render_snapshot(snap, out / "layout.svg", options=opts)
        print(f"  {'sfdp (no ranks)':26s} dot={r.dot_seconds:6.2f}s boxes={r.nodes}")
    except DotTimeoutError:
        print(f"  {'sfdp (no ranks)':26s} did not finish in {timeout:g} s")


def ceiling_curve(timeout: float) -> None:
    """dot seconds against boxes for every-op pictures, and the growth exponent.

    DenseNet-style stacks scaled 1x-3x (inlined graphs: long chains, few crossings) show
    how far the easiest graphs go within a time; the transformer stacks (attention's
    fan-out and fan-in) how much harder others are at the same size.
    """

    def dense(scale: float) -> torch.jit.ScriptModule:
        torch.manual_seed(0)
        blocks = tuple(max(1, round(b * scale)) for b in (6, 12, 24, 16))
        return torch.jit.script(DenseNetLike(blocks).eval())

    cases = [(f"densenet x{f:g}", lambda f=f: dense(f), "inlined") for f in (1, 1.5, 2, 2.5, 3)]
    cases += [
        (f"transformer x{n}", lambda n=n: transformer_encoder(layers=n), which)
        for n, which in ((1, "frozen"), (1, "inlined"), (2, "frozen"))
    ]
    print(
        f"every-op pictures, dot timeout {timeout:g} s "
        f"(box ceiling at that timeout: {box_ceiling(timeout)}):"
    )
    opts = RenderOptions(level=None, timeout=timeout)
    last: dict[str, tuple[int, float]] = {}
    for label, build, which in cases:
        module = build()
        if which == "frozen":
            graph = torch.jit.freeze(module).forward.graph
        else:
            graph = module.forward.graph.copy()
            torch._C._jit_pass_inline(graph)
        snap = snapshot_graph(graph)
        picture = snapshot_picture(snap, opts, None)
        start = time.perf_counter()
        try:
            run_dot(picture.source, "svg", opts)
        except DotTimeoutError:
            print(f"  {label:16s} {which:8s} boxes={picture.nodes:6d} dot > {timeout:g} s")
            continue
        seconds = time.perf_counter() - start
        family = label.split()[0] + which
        growth = ""
        if family in last:
            n0, t0 = last[family]
            k = math.log(seconds / t0) / math.log(picture.nodes / n0)
            growth = f"  time ~ boxes^{k:.1f} since the previous size"
        last[family] = (picture.nodes, seconds)
        print(
            f"  {label:16s} {which:8s} boxes={picture.nodes:6d} edges={picture.edges:6d} "
            f"dot={seconds:6.1f}s{growth}"
        )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="default level only")
    parser.add_argument(
        "--full-timeout",
        type=float,
        default=30.0,
        help="seconds Graphviz may take per picture with every op drawn (then it falls back)",
    )
    parser.add_argument(
        "--models", default="resnet50,transformer12", help="models for export --per-step"
    )
    parser.add_argument(
        "--picture-models",
        default=",".join(MODELS),
        help="models for before/after/diff ('' to skip)",
    )
    parser.add_argument("--layouts", action="store_true", help="compare layout settings too")
    parser.add_argument(
        "--ceiling",
        action="store_true",
        help="only time dot against box count (every op, --full-timeout), for the box ceiling",
    )
    parser.add_argument(
        "--repeat", type=int, default=3, help="export runs per model and level (medians shown)"
    )
    parser.add_argument(
        "--one-process-too",
        action="store_true",
        help="also run the command with --one-process (no forked helper), alternating",
    )
    args = parser.parse_args()
    if args.ceiling:
        ceiling_curve(args.full_timeout)
        return 0
    levels = [("default", RenderOptions())]
    if not args.quick:
        levels.append(("expanded", RenderOptions(level=None, timeout=args.full_timeout)))
    built: dict[str, torch.jit.ScriptModule] = {}

    def model(name: str) -> torch.jit.ScriptModule:
        if name not in built:
            built[name] = MODELS[name][0]()
        return built[name]

    print(
        "export --per-step (total = torch + snapshots + dot + ours; shares of the total, "
        f"{args.repeat} run(s) each, then the medians):"
    )
    for name in filter(None, args.models.split(",")):
        for label, options in levels:
            runs = []
            for _ in range(args.repeat):
                runs.append(bench_export(name, model(name), label, options))
                report_export(name, label, runs[-1])
            shares = ", ".join(
                f"{r.ours_share:.0%}/{r.drawing_share:.0%}/{r.freezeview_share:.0%}" for r in runs
            )
            report_export(name, label, median_times(runs), "median")
            print(f"  {'':13s} {'':8s} {'':6s} per run ours/(ours+dot)/all: {shares}")
    print(
        "the command, `freezeview export MODEL.pt -o DIR --per-step` at the default level "
        "(total = its wall time; torch = start-up, imports, torch.jit.load and the "
        f"pipeline; {args.repeat} run(s) each, then the medians):"
    )
    ways = [("command", ())] + ([("1-proc", ("--one-process",))] if args.one_process_too else [])
    for name in filter(None, args.models.split(",")):
        by_way: dict[str, list[ExportTimes]] = {label: [] for label, _ in ways}
        for _ in range(args.repeat):
            for label, extra in ways:
                by_way[label].append(bench_export_command(name, model(name), extra))
                report_export(name, label, by_way[label][-1])
        for label, runs in by_way.items():
            report_export(name, label, median_times(runs), "median")
    print("before / after / diff pictures:")
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name in filter(None, args.picture_models.split(",")):
            module = model(name)
            before, after = snapshots(module)
            print(f"{name}: {before.node_count} inlined nodes, {after.node_count} frozen")
            for label, options in levels:
                options = RenderOptions(**{**options.__dict__, "modules": module_paths(module)})
                results, diff_s, wall = draw_all(before, after, out, options)
                report(name, label, results, diff_s, wall)
        if args.layouts:
            before, after = snapshots(resnet50())
            print("layout settings, every op of the frozen ResNet-50 graph:")
            layouts(after, out, args.full_timeout)
            print("layout settings, every op of the inlined ResNet-50 graph:")
            layouts(before, out, args.full_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
