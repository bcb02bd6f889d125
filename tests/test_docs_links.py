"""README.md and docs/: every relative link and image resolves, and cli.md misses no option.

GitHub renders these pages; a moved file or a renamed heading would leave a dead link
nobody notices until a reader clicks it. Anchors (``page.md#heading``) are checked
against the target page's headings, slugged as GitHub slugs them.
"""

from __future__ import annotations

import argparse
import re
from pathlib import Path

import pytest
from docs_support import DOCS, ROOT, markdown_pages

from freezeview.cli import COMMANDS, build_parser

_LINK_RE = re.compile(r"!?\[(?:[^\]\[]|\[[^\]]*\])*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
_FENCE_RE = re.compile(r"^```.*?^```", re.S | re.M)
_HEADING_RE = re.compile(r"^#{1,6}\s+(.*?)\s*#*\s*$", re.M)


def _without_code(text: str) -> str:
    text = _FENCE_RE.sub("", text)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to dashes."""
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", heading).lower()
    text = re.sub(r"[^\w\- ]", "", text)
    return text.replace(" ", "-")


def _anchors(page: Path) -> set[str]:
    seen: dict[str, int] = {}
    anchors = set()
    for heading in _HEADING_RE.findall(_FENCE_RE.sub("", page.read_text())):
        slug = _slug(heading)
        count = seen.get(slug, 0)
        seen[slug] = count + 1
        anchors.add(slug if count == 0 else f"{slug}-{count}")
    return anchors


def _links(page: Path) -> list[str]:
    # Code blocks and code spans show text, not links.
    return _LINK_RE.findall(_without_code(page.read_text()))


PAGES = markdown_pages()


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in _links(page):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # http:, https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        resolved = (page.parent / path_part).resolve() if path_part else page
        if not resolved.exists():
            broken.append(f"{target}: {resolved} does not exist")
        elif anchor and resolved.suffix == ".md" and anchor not in _anchors(resolved):
            broken.append(f"{target}: no heading #{anchor} in {resolved.name}")
    assert not broken, broken


def test_every_screenshot_is_shown_somewhere() -> None:
    linked = {
        (page.parent / target.partition("#")[0]).resolve()
        for page in PAGES
        for target in _links(page)
    }
    shots = sorted((ROOT / "screenshots").iterdir())
    assert shots
    assert [s.name for s in shots if s.resolve() not in linked] == []


def test_cli_page_names_every_option_of_every_command() -> None:
    text = (DOCS / "cli.md").read_text()
    parser = build_parser(COMMANDS)
    sub = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    missing = [
        f"{name} {option}"
        for name, command in sub.choices.items()
        for action in command._actions
        if not isinstance(action, argparse._HelpAction)
        for option in action.option_strings
        if f"`{option}" not in text
    ]
    assert not missing, missing
    assert "--version" in text
