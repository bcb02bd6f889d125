"""How fast the review page (``index.html``) of real-size exports becomes usable.

Targets (headless Chromium, medians of 5): the 12-layer transformer's ``export
--per-step`` page interactive (first picture fitted and clickable) within 2 s of
navigation, ResNet-50's within 1 s; a zoom step on the largest picture repaints within
100 ms; the page grows no faster than the pictures it holds (bytes per box reported).
Uses Debian's ``/usr/bin/chromium`` through Playwright; nothing is downloaded.

    .venv/bin/python benchmarks/bench_page.py [--runs 5] [resnet50 transformer12 ...]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]

# One zoom step on the shown picture, timed to the second animation frame after it
# (the frame that paints the new transform).
_ZOOM = """async () => {
  const v = document.getElementById('viewport');
  const r = v.getBoundingClientRect();
  const start = performance.now();
  v.dispatchEvent(new WheelEvent('wheel', {deltaY: -200, clientX: r.x + r.width / 2,
                                           clientY: r.y + r.height / 2, cancelable: true}));
  await new Promise((done) => requestAnimationFrame(() => requestAnimationFrame(done)));
  return performance.now() - start;
}"""


def _export(name: str, folder: Path) -> Path:
    from benchmarks.models import MODELS
    from freezeview.engine.output.export import export

    return export(MODELS[name][0](), folder / name, per_step=True).index


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("models", nargs="*", default=["resnet50", "transformer12"])
    parser.add_argument("--runs", type=int, default=5)
    args = parser.parse_args()
    warnings.simplefilter("ignore")
    from playwright.sync_api import sync_playwright

    print(
        f"{'model':<14} {'page MB':>8} {'page/SVGs':>9} {'boxes':>7} {'B/box':>6} "
        f"{'interactive s':>14} {'zoom ms':>8}  largest picture"
    )
    with (
        tempfile.TemporaryDirectory(prefix="freezeview-bench-page-") as folder,
        sync_playwright() as p,
    ):
        browser = p.chromium.launch(executable_path="/usr/bin/chromium", args=ARGS)
        for name in args.models:
            index = _export(name, Path(folder))
            ready: list[float] = []
            zooms: list[float] = []
            boxes = 0
            largest = ""
            for _ in range(args.runs):
                page = browser.new_page(viewport={"width": 1600, "height": 1000})
                start = time.perf_counter()
                page.goto(index.as_uri())
                page.wait_for_selector("body[data-ready=true]")
                page.wait_for_function("document.getElementById('canvas').style.transform")
                page.wait_for_selector("#canvas g.node")
                ready.append(time.perf_counter() - start)
                sizes = page.evaluate(
                    "Object.fromEntries(Object.entries(JSON.parse("
                    "document.getElementById('fv-data').textContent).boxes)"
                    ".map(([k, v]) => [k, Object.keys(v).length]))"
                )
                boxes = sum(sizes.values())
                largest = max(sizes, key=sizes.get)
                page.select_option("#picture-select", largest)
                page.evaluate(_ZOOM)  # the first zoom also rasterizes the picture once
                zooms.append(page.evaluate(_ZOOM))
                page.close()
            size = index.stat().st_size
            svgs = sum(f.stat().st_size for f in index.parent.glob("*.svg"))
            print(
                f"{name:<14} {size / 1e6:>8.2f} {size / max(svgs, 1):>9.2f} {boxes:>7} "
                f"{size / max(boxes, 1):>6.0f} "
                f"{statistics.median(ready):>14.3f} {statistics.median(zooms):>8.1f}  {largest}"
            )
        browser.close()
    print(
        f"(medians of {args.runs}; targets: transformer <= 2 s, ResNet-50 <= 1 s, zoom <= 100 ms)"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
