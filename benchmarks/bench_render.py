"""Time freezeview's pictures on real-size graph shapes, with no downloads.

For each model (a DenseNet-style dense-block stack, a wav2vec2-style speech encoder with
wide fan-out, a ResNet-50-style net, a 12-layer ``nn.TransformerEncoder``) it freezes the
model once with torch and then times what ``freezeview export`` draws: before, after
and diff pictures, at the default level and with every op drawn. It reports per picture
freezeview's time (view + DOT building, diffing, writing), Graphviz's time, the boxes and
edges drawn and the SVG size; then the layout settings compared for the choice in
render.py. Usage::

    .venv/bin/python benchmarks/bench_render.py [--quick] [--full-timeout 60]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))

from render_models import (
    DenseNetLike,
    ResNet50Like,
    SpeechEncoderLike,
    scripted,
    transformer_encoder,
)

from freezeview.engine.diff import diff_snapshots
from freezeview.engine.render import (
    DotTimeoutError,
    RenderOptions,
    RenderResult,
    render_diff,
    render_snapshot,
)
from freezeview.engine.render_dot import GraphAttrs
from freezeview.engine.snapshot import GraphSnapshot, snapshot_graph

MODELS = {
    "densenet-like": lambda: DenseNetLike(blocks=(6, 12, 32, 32)),
    "speech-like": lambda: SpeechEncoderLike(layers=20),
    "resnet50-like": ResNet50Like,
    "transformer-12": lambda: transformer_encoder(12),
}


def snapshots(make: object) -> tuple[GraphSnapshot, GraphSnapshot]:
    module = scripted(make())  # type: ignore[operator]
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph), snapshot_graph(torch.jit.freeze(module).forward.graph)


def draw_all(
    before: GraphSnapshot, after: GraphSnapshot, out: Path, options: RenderOptions
) -> tuple[list[tuple[str, RenderResult]], float, float]:
    """before/after/diff pictures; returns results, diff seconds and wall seconds."""
    start = time.perf_counter()
    d0 = time.perf_counter()
    diff = diff_snapshots(before, after)
    diff_seconds = time.perf_counter() - d0
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
            f"  {name:15s} {label:8s} {pic:6s} level={level:4s} boxes={r.nodes:5d} "
            f"edges={r.edges:5d} ours={r.build_seconds + r.write_seconds:6.2f}s "
            f"dot={r.dot_seconds:6.2f}s svg={r.size / 1024:7.0f} KB{note}"
        )
    share = ours / (ours + dot) if ours + dot else 0.0
    print(
        f"  {name:15s} {label:8s} TOTAL  wall={wall:6.2f}s ours={ours:6.2f}s "
        f"(diff {diff_s:.2f}s) dot={dot:6.2f}s outside-dot={share:.0%}"
    )


def layouts(before: GraphSnapshot, out: Path, timeout: float) -> None:
    """Compare layout settings on the fully expanded picture of one graph."""
    settings = {
        "dot clusters": GraphAttrs(newrank=False),
        "dot newrank": GraphAttrs(newrank=True),
        "dot newrank+ordering=out": GraphAttrs(newrank=True, ordering="out"),
    }
    for label, attrs in settings.items():
        opts = RenderOptions(level=None, timeout=timeout, graph=attrs)
        try:
            r = render_snapshot(before, out / "layout.svg", options=opts)
            print(f"  {label:26s} dot={r.dot_seconds:6.2f}s boxes={r.nodes} level={r.level}")
        except DotTimeoutError:
            print(f"  {label:26s} did not finish in {timeout:g} s")
    opts = RenderOptions(level=None, timeout=timeout, engine="sfdp")
    try:
        r = render_snapshot(before, out / "layout.svg", options=opts)
        print(f"  {'sfdp (no ranks)':26s} dot={r.dot_seconds:6.2f}s boxes={r.nodes}")
    except DotTimeoutError:
        print(f"  {'sfdp (no ranks)':26s} did not finish in {timeout:g} s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="default level only")
    parser.add_argument(
        "--full-timeout", type=float, default=60.0, help="seconds per picture, fully expanded"
    )
    parser.add_argument("--models", default=",".join(MODELS), help="comma-separated subset")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        for name in args.models.split(","):
            before, after = snapshots(MODELS[name])
            print(f"{name}: {before.node_count} inlined nodes, {after.node_count} frozen")
            results, diff_s, wall = draw_all(before, after, out, RenderOptions())
            report(name, "default", results, diff_s, wall)
            if not args.quick:
                full = RenderOptions(level=None, timeout=args.full_timeout)
                results, diff_s, wall = draw_all(before, after, out, full)
                report(name, "expanded", results, diff_s, wall)
        if not args.quick:
            print("layout settings, every op of the frozen ResNet-50-like graph:")
            _before, after = snapshots(ResNet50Like)
            layouts(after, out, args.full_timeout)
            print("layout settings, every op of the inlined ResNet-50-like graph (1.8k nodes):")
            before, _after = snapshots(ResNet50Like)
            layouts(before, out, args.full_timeout)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
