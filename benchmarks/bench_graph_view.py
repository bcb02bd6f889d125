"""The graph view (``v``) on real-size graphs: first frame, pan and zoom frames.

Measured headless in the real app (``FreezeviewApp(path)``: the engine process lays the
graph out, as ``freezeview MODEL.pt`` does), at 160x48 and at 80x24, on:

- the frozen ResNet-50's last step (the graph alone; the view's automatic level);
- the 12-layer ``nn.TransformerEncoder``'s clean-up step as a diff (8,021 ops removed:
  the biggest diff of the run).

Per case, in one run:

1. first frame: from pressing ``v`` to the laid-out graph on screen (the key, the
   engine's diff and ``dot``, the pickled layout, the canvas, one paint; target < 1 s),
   pressed at once after stepping there (cold) and after a pause on the step (the view
   lays the step out ahead while hidden); the cold one compared with ``g`` (the same
   step's SVG and diff SVG written by the engine) in the same run, as a ratio;
2. pan frames: one key (``j``/``l``) to the next painted frame, median and worst of 40
   (target < 50 ms); and the viewport alone (every visible row rendered), median;
3. zoom frames: ``-`` to a level never laid out: key to the "laying out" frame, and to
   the drawn one; then ``+`` and ``-`` back and forth five times between the two levels,
   both kept (no dot), key to frame.

Run: ``.venv/bin/python benchmarks/bench_graph_view.py [--models resnet50,transformer12]``.
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "tests"))

from ui.conftest import wait_ready  # noqa: E402

from benchmarks.models import resnet50, transformer_encoder  # noqa: E402
from freezeview.ui import FreezeviewApp  # noqa: E402

CASES = {
    # model -> (builder, step to show (name), diff?)
    "resnet50": (resnet50, None, False),
    "transformer12": (transformer_encoder, "cleanup", True),
}


async def _until(pilot, check, timeout: float = 120.0) -> float:  # type: ignore[no-untyped-def]
    start = time.perf_counter()
    while not check():
        if time.perf_counter() - start > timeout:
            raise TimeoutError("the graph view did not answer in time")
        await pilot.pause(0.001)
    return time.perf_counter() - start


async def _frame(pilot) -> None:  # type: ignore[no-untyped-def]
    """Wait until the screen has painted what the last key changed."""
    await pilot.app.animator.wait_until_complete()
    await pilot.pause()


def _paint(app, view) -> float:  # type: ignore[no-untyped-def]
    """One pan and the whole screen composed again (what a frame costs the app)."""
    canvas = view.canvas_view
    start = time.perf_counter()
    canvas.action_pan(0, 2)
    canvas.refresh()
    app.screen._compositor.render_update(full=True)
    return time.perf_counter() - start


def _viewport(view) -> float:  # type: ignore[no-untyped-def]
    canvas = view.canvas_view
    start = time.perf_counter()
    for y in range(canvas.size.height):
        canvas.render_line(y)
    return time.perf_counter() - start


async def measure(path: Path, step: str | None, diff: bool, size: tuple[int, int]) -> dict:
    out: dict[str, float | str] = {}
    with tempfile.TemporaryDirectory() as tmp:
        app = FreezeviewApp(path, output_dir=tmp, show_timings=False)
        async with app.run_test(size=size) as pilot:
            await wait_ready(pilot, timeout=300)
            screen = app.main_screen
            target = (
                len(screen.steps) - 1
                if step is None
                else next(s.index for s in screen.steps if s.name == step)
            )
            view = screen.graph_view
            view.diff = diff
            # v pressed on the step: nothing is laid out while the view is hidden.
            while screen.current_step < target:
                await pilot.press("n")
            start = time.perf_counter()
            await pilot.press("v")
            await _until(pilot, lambda: view.ready)
            await _frame(pilot)
            out["first"] = time.perf_counter() - start
            layout = view.layout_shown
            assert layout is not None
            out["dot"] = layout.dot_seconds
            out["build"] = layout.build_seconds
            out["boxes"] = len(layout.boxes)
            out["level"] = "every op" if layout.level is None else f"level {layout.level}"
            out["canvas"] = f"{layout.width}x{layout.height}"
            # g: the same step's SVGs, by the same engine process.
            start = time.perf_counter()
            await pilot.press("g")
            await _until(pilot, lambda: screen.delivery.last is not None, timeout=300)
            out["svg"] = time.perf_counter() - start
            view.canvas_view.focus()
            await pilot.pause(0.1)
            pans = []
            for i in range(40):
                key = "j" if i % 4 else "l"
                start = time.perf_counter()
                await pilot.press(key)
                await _frame(pilot)
                pans.append(time.perf_counter() - start)
            out["pan_median"] = statistics.median(pans)
            out["pan_max"] = max(pans)
            # The same round trip for a key nothing is bound to: Pilot's own waits.
            idle = []
            for _ in range(20):
                start = time.perf_counter()
                await pilot.press("z")
                await _frame(pilot)
                idle.append(time.perf_counter() - start)
            out["idle_key"] = statistics.median(idle)
            out["viewport"] = statistics.median(_viewport(view) for _ in range(20))
            out["paint"] = statistics.median(_paint(app, view) for _ in range(20))
            levels = list(layout.levels)
            here = levels.index(layout.level)
            if here > 0:
                start = time.perf_counter()
                await pilot.press("minus")
                await _frame(pilot)
                out["zoom_new_loading"] = time.perf_counter() - start
                await _until(pilot, lambda: view.ready)
                await _frame(pilot)
                out["zoom_new_drawn"] = time.perf_counter() - start
                coarser = view.layout_shown
                assert coarser is not None
                pane = view.canvas_view.size
                out["zoom_canvas"] = (
                    f"level {coarser.level}: canvas {coarser.width}x{coarser.height} "
                    f"in a {pane.width}x{pane.height} pane"
                )
                kept = []
                for key in ("plus", "minus", "plus", "minus", "plus"):
                    start = time.perf_counter()
                    await pilot.press(key)
                    await _until(pilot, lambda: view.ready)
                    await _frame(pilot)
                    kept.append(time.perf_counter() - start)
                out["zoom_kept"] = statistics.median(kept)
                out["zoom_kept_max"] = max(kept)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", default="resnet50,transformer12")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        for name in args.models.split(","):
            build, step, diff = CASES[name]
            path = Path(tmp) / f"{name}.pt"
            torch.jit.save(build().eval(), str(path))
            for size in ((160, 48), (80, 24)):
                r = asyncio.run(measure(path, step, diff, size))
                what = "diff" if diff else "graph"
                print(
                    f"{name} {what} {size[0]}x{size[1]}: {r['boxes']} boxes at {r['level']} "
                    f"(canvas {r['canvas']}); first frame {r['first'] * 1000:.0f} ms "
                    f"(dot {r['dot'] * 1000:.0f} ms, views {r['build'] * 1000:.0f} ms) "
                    f"(g: {r['svg'] * 1000:.0f} ms, ratio {r['first'] / r['svg']:.2f}x); "
                    f"pan key to frame {r['pan_median'] * 1000:.1f} ms median "
                    f"({r['pan_max'] * 1000:.1f} worst; an unbound key's round trip in Pilot "
                    f"{r['idle_key'] * 1000:.1f} ms); pan + whole screen composed "
                    f"{r['paint'] * 1000:.2f} ms, the canvas's rows {r['viewport'] * 1000:.2f} ms",
                    end="",
                )
                if "zoom_kept" in r:
                    print(
                        f"; zoom out (new level, {r['zoom_canvas']}) "
                        f"{r['zoom_new_loading'] * 1000:.0f} ms to the "
                        f"loading frame, {r['zoom_new_drawn'] * 1000:.0f} ms drawn; zoom in "
                        f"and out again (kept) {r['zoom_kept'] * 1000:.1f} ms median "
                        f"({r['zoom_kept_max'] * 1000:.1f} worst of 5)"
                    )
                else:
                    print()


if __name__ == "__main__":
    main()
