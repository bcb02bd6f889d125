"""The review page (``index.html``) in a real browser: Debian's Chromium, driven by Playwright.

No browser is downloaded: Playwright drives ``/usr/bin/chromium`` (``make test``
installs it). Every test reads what the page really does (its transform, its classes,
its text), with the network blocked so the page must work from ``file://`` alone.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from models.small import example_module

from freezeview.engine.freeze.pipeline import Plan
from freezeview.engine.output.export import export

playwright = pytest.importorskip("playwright.sync_api")
CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(CHROMIUM is None, reason="Debian's chromium is not installed"),
]
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="module")
def index(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("review") / "out"
    plan = Plan.default(["temperature"])
    result = export(example_module().build(), out, plan=plan, per_step=True)
    return result.index


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(executable_path=CHROMIUM, args=ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def page(browser, index: Path):  # type: ignore[no-untyped-def]
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    tab.on("pageerror", lambda e: errors.append(str(e)))
    requests: list[str] = []

    def offline(route) -> None:  # type: ignore[no-untyped-def]
        requests.append(route.request.url)
        if route.request.url.startswith("file:"):
            route.continue_()
        else:
            route.abort()

    tab.route("**/*", offline)
    tab.goto(index.as_uri())
    tab.wait_for_selector("body[data-ready=true]")
    yield tab
    assert errors == [], f"the page logged errors: {errors}"
    assert all(url.startswith("file:") for url in requests), requests
    context.close()


def _transform(page) -> tuple[float, float, float]:  # type: ignore[no-untyped-def]
    text = page.eval_on_selector("#canvas", "e => e.style.transform")
    found = re.fullmatch(r"translate\(([-\d.e]+)px, ([-\d.e]+)px\) scale\(([-\d.e]+)\)", text)
    assert found, text
    return float(found[1]), float(found[2]), float(found[3])


def _rect(page, selector: str) -> dict[str, float]:  # type: ignore[no-untyped-def]
    return page.eval_on_selector(  # type: ignore[no-any-return]
        selector,
        "e => { const r = e.getBoundingClientRect(); "
        "return {x: r.x, y: r.y, w: r.width, h: r.height}; }",
    )


def test_a_picture_opens_fitted(page) -> None:  # type: ignore[no-untyped-def]
    view, svg = _rect(page, "#viewport"), _rect(page, "#canvas svg")
    assert svg["w"] > 0 and svg["h"] > 0
    assert svg["x"] >= view["x"] - 1 and svg["y"] >= view["y"] - 1
    assert svg["x"] + svg["w"] <= view["x"] + view["w"] + 1
    assert svg["y"] + svg["h"] <= view["y"] + view["h"] + 1
    # Fitted, not just small: one side fills most of the frame.
    assert svg["w"] > 0.8 * view["w"] or svg["h"] > 0.8 * view["h"]


def test_wheel_zooms_around_the_pointer_and_drag_pans(page) -> None:  # type: ignore[no-untyped-def]
    view = _rect(page, "#viewport")
    x0, y0, s0 = _transform(page)
    cx, cy = view["x"] + view["w"] / 2, view["y"] + view["h"] / 2
    page.mouse.move(cx, cy)
    page.mouse.wheel(0, -300)
    page.wait_for_function(
        f"document.getElementById('canvas').style.transform.indexOf('scale({s0})') < 0"
    )
    x1, y1, s1 = _transform(page)
    assert s1 > s0 * 1.2
    # The point under the pointer stays where it was.
    local = (cx - view["x"] - x0) / s0
    assert abs((cx - view["x"] - x1) / s1 - local) < 1.0
    page.mouse.down()
    page.mouse.move(cx + 120, cy + 40, steps=5)
    page.mouse.up()
    x2, y2, s2 = _transform(page)
    assert (round(x2 - x1), round(y2 - y1), s2) == (120, 40, s1)
    page.keyboard.press("0")
    assert _transform(page) == (x0, y0, s0)


def test_search_highlights_and_centres_a_node_kind(page) -> None:  # type: ignore[no-untyped-def]
    page.fill("#search", "aten::linear")
    count = page.eval_on_selector_all("g.node.fv-match", "els => els.length")
    assert count >= 1
    page.press("#search", "Enter")
    current = page.query_selector("g.node.fv-current")
    assert current is not None
    view = _rect(page, "#viewport")
    box = current.bounding_box()
    assert box is not None
    assert abs(box["x"] + box["width"] / 2 - (view["x"] + view["w"] / 2)) < 3
    assert abs(box["y"] + box["height"] / 2 - (view["y"] + view["h"] / 2)) < 3
    assert "aten::linear" in page.inner_text("#details-body")


def test_clicking_a_kept_attributes_box_shows_its_reasons(page) -> None:  # type: ignore[no-untyped-def]
    page.select_option("#picture-select", "after")
    kept = page.query_selector("g.node.fv-attribute.fv-kept")
    assert kept is not None, "the frozen graph reads a kept attribute"
    kept.click()
    text = page.inner_text("#details-body")
    assert "kept" in text
    assert re.search(r"in-place-write|set-attr|preserved", text), text


def test_n_moves_to_the_next_changed_step(page) -> None:  # type: ignore[no-untyped-def]
    page.keyboard.press("n")
    first = page.evaluate("window.freezeview.state.picture")
    page.keyboard.press("n")
    second = page.evaluate("window.freezeview.state.picture")
    assert first.startswith("step-") and second.startswith("step-") and first != second
    changed = page.eval_on_selector_all(
        "#timeline li:not(.unchanged)[data-picture]", "els => els.map(e => e.dataset.picture)"
    )
    assert [first, second] == changed[:2]
    assert page.eval_on_selector(
        f"#timeline li[data-picture={second}]", "e => e.classList.contains('current')"
    )


def test_attribute_table_highlights_where_it_is_read(page) -> None:  # type: ignore[no-untyped-def]
    page.click(".tabs button[data-tab=attrs-tab]")
    page.fill("#attr-filter", "temperature")
    page.click("#attr-table tr[data-path=temperature]")
    assert "preserved" in page.inner_text("#details-body")
    assert page.eval_on_selector_all("g.node.fv-match", "els => els.length") >= 1


def test_a_png_export_opens_fitted_too(browser, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    result = export(example_module().build(), tmp_path / "png", fmt="png")
    context = browser.new_context(viewport={"width": 1200, "height": 800})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(result.index.as_uri())
    tab.wait_for_selector("body[data-ready=true]")
    tab.wait_for_function("document.getElementById('canvas').style.transform")
    view, img = _rect(tab, "#viewport"), _rect(tab, "#canvas img")
    assert img["w"] > 0.8 * view["w"] or img["h"] > 0.8 * view["h"]
    assert img["x"] >= view["x"] - 1 and img["x"] + img["w"] <= view["x"] + view["w"] + 1
    assert errors == []
    context.close()


def test_the_attributes_tab_shows_each_status_and_reason(page) -> None:  # type: ignore[no-untyped-def]
    """At 1400 px the Attributes tab widens the sidebar: no row's status or reason is cut
    off or scrolled out of the sidebar (it was 300 px around a 491 px table)."""
    page.click(".tabs button[data-tab=attrs-tab]")
    page.wait_for_timeout(100)
    sidebar = _rect(page, "nav#sidebar")
    assert page.eval_on_selector("nav#sidebar", "e => e.scrollWidth <= e.clientWidth + 1")
    cells = page.eval_on_selector_all(
        "#attr-table tr[data-path]",
        "rows => rows.map(r => { const s = r.cells[1].getBoundingClientRect(), "
        "w = r.cells[2].getBoundingClientRect(); return [s.right, w.width, w.right]; })",
    )
    assert cells
    for status_right, reason_width, reason_right in cells:
        assert status_right <= sidebar["x"] + sidebar["w"]
        assert reason_right <= sidebar["x"] + sidebar["w"] + 1
        assert reason_width >= 200
    # Back on the steps, the sidebar is narrow again and the picture has its room.
    page.click(".tabs button[data-tab=steps-tab]")
    page.wait_for_timeout(100)
    assert _rect(page, "nav#sidebar")["w"] < sidebar["w"]


def test_the_details_follow_the_step_shown(page) -> None:  # type: ignore[no-untyped-def]
    """After n the details describe a box of the picture shown, or the step: never the
    box of the step before (a removed op's details stayed)."""
    page.keyboard.press("n")
    first = page.evaluate("window.freezeview.state.picture")
    ids = page.eval_on_selector_all("#canvas g.node", "els => els.map(e => e.id)")
    assert ids
    for box in ids[:8]:
        page.evaluate(f"window.freezeview.show({first!r}, true)")
        page.evaluate(f"window.freezeview.showBox({box!r})")
        before = page.inner_text("#details-body")
        page.keyboard.press("n")
        now = page.inner_text("#details-body")
        here = page.eval_on_selector_all("#canvas g.node", "els => els.map(e => e.id)")
        if box in here:
            page.evaluate(f"window.freezeview.showBox({box!r})")
            assert now == page.inner_text("#details-body")
        else:
            assert now != before and now.startswith("step "), now
        assert page.evaluate("window.freezeview.state.selected") in (box, None)


def test_every_step_says_what_it_did_or_why_not(page) -> None:  # type: ignore[no-untyped-def]
    """The timeline lists the steps that changed nothing too, each with its note (why the
    pass did not fire), as ``freezeview freeze``'s notes column."""
    unchanged = page.eval_on_selector_all(
        "#timeline li.unchanged",
        "els => els.map(e => [e.offsetParent !== null, "
        "(e.querySelector('.notes') || {}).textContent || ''])",
    )
    assert unchanged
    for visible, note in unchanged:
        assert visible and note.strip(), unchanged
    assert any(note.startswith("did not fire") for _, note in unchanged), unchanged
