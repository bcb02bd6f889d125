"""Take the review page's pictures: ``screenshots/export-index.png`` and ``review-page.png``.

Exports the ResNet-50-sized benchmark model with ``--per-step``, opens its ``index.html``
in Debian's Chromium (Playwright, nothing downloaded), takes the page as it first opens
(``export-index.png``), then picks the conv -> batchnorm step, searches for a node kind
and lets the page centre and describe the first match (``review-page.png``).

    .venv/bin/python scripts/review_page_screenshot.py
"""

from __future__ import annotations

import sys
import tempfile
import warnings
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def main() -> int:
    warnings.simplefilter("ignore")
    from playwright.sync_api import sync_playwright

    from benchmarks.models import resnet50
    from freezeview.engine.output.export import export

    with tempfile.TemporaryDirectory() as folder:
        index = export(resnet50(), Path(folder) / "resnet50", per_step=True).index
        with sync_playwright() as p:
            browser = p.chromium.launch(
                executable_path="/usr/bin/chromium",
                args=["--no-sandbox", "--disable-gpu", "--disable-background-networking"],
            )
            first = browser.new_page(viewport={"width": 1400, "height": 1000})
            first.goto(index.as_uri())
            first.wait_for_selector("body[data-ready=true]")
            first.screenshot(path=str(ROOT / "screenshots" / "export-index.png"))
            page = browser.new_page(viewport={"width": 1500, "height": 900})
            page.goto(index.as_uri())
            page.wait_for_selector("body[data-ready=true]")
            steps = page.eval_on_selector_all(
                "#timeline li[data-picture]", "els => els.map(e => e.dataset.picture)"
            )
            page.click(f"#timeline li[data-picture={steps[min(3, len(steps) - 1)]}]")
            page.fill("#search", "batch_norm")
            page.press("#search", "Enter")
            page.wait_for_timeout(300)
            page.screenshot(path=str(ROOT / "screenshots" / "review-page.png"))
            browser.close()
    print("wrote screenshots/export-index.png and screenshots/review-page.png")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
