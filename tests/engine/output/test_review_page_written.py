"""The review page warns about folded attributes the frozen graph still writes: a banner
in its header names each one with its writing node and line, and their rows in the
attributes table are marked. torch is the oracle for which attributes those are
(``test_written_constants.torch_written_paths``: the constants torch's own frozen
module writes when run)."""

from __future__ import annotations

import html.parser
from pathlib import Path

import pytest
from corpus import case_by_name

from engine.reasons.test_written_constants import torch_written_paths
from freezeview.engine.output.export import export


class _Page(html.parser.HTMLParser):
    """The banner's text and attribute links, and each attribute row's classes."""

    def __init__(self) -> None:
        super().__init__()
        self.banner: list[str] = []
        self.links: list[str] = []
        self.rows: dict[str, str] = {}
        self._depth = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if found.get("id") == "written-warning":
            self._depth = 1
        elif self._depth and tag == "div":
            self._depth += 1
        if self._depth and tag == "a" and found.get("data-path"):
            self.links.append(found["data-path"] or "")
        if tag == "tr" and found.get("data-path"):
            self.rows[found["data-path"] or ""] = found.get("class") or ""

    def handle_endtag(self, tag: str) -> None:
        if self._depth and tag == "div":
            self._depth -= 1

    def handle_data(self, data: str) -> None:
        if self._depth:
            self.banner.append(data)


def _page(name: str, tmp_path: Path) -> _Page:
    result = export(case_by_name(name).build(), tmp_path / "out", fmt="dot")
    assert result.index is not None
    page = _Page()
    page.feed(result.index.read_text("utf-8"))
    return page


@pytest.mark.parametrize("name", ["written_dict_value", "written_fork_read", "inplace_add"])
def test_the_banner_and_the_rows_name_what_torch_s_frozen_module_writes(
    name: str, tmp_path: Path
) -> None:
    written, _ = torch_written_paths(case_by_name(name))
    page = _page(name, tmp_path)
    assert set(page.links) == written
    marked = {path for path, classes in page.rows.items() if "written" in classes.split()}
    assert marked == written
    text = "".join(page.banner)
    if not written:
        assert text == ""
        return
    assert text.startswith(f"⚠ warning: {len(written)} folded attribute")
    assert "mutates its own constant" in text and "from call to call" in text
    assert "written by aten::add_ in forward at " in text
    assert "troubleshooting.md#the-frozen-model-mutates-its-own-constants" in text


@pytest.mark.slow
def test_a_click_on_the_banner_shows_the_attribute(tmp_path: Path) -> None:
    """In Chromium: the banner's link selects the attribute as its table row does."""
    import shutil

    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    result = export(case_by_name("written_dict_value").build(), tmp_path / "out", fmt="dot")
    assert result.index is not None
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        tab = browser.new_page()
        errors: list[str] = []
        tab.on("pageerror", lambda e: errors.append(str(e)))
        tab.goto(result.index.as_uri())
        tab.wait_for_selector("body[data-ready=true]")
        tab.click('#written-warning a[data-path="stats"]')
        assert tab.inner_text("#details h2") == "stats"
        assert "written-constant" in tab.inner_text("#details")
        current = tab.eval_on_selector_all(
            "#attr-table tr.current", "els => els.map(e => e.dataset.path)"
        )
        assert current == ["stats"]
        browser.close()
    assert errors == []
