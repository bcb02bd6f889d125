"""Helpers the documentation tests share: where docs/ is, and reading its Markdown."""

from __future__ import annotations

import re
from pathlib import Path

__all__ = ["DOCS", "ROOT", "fenced_blocks", "markdown_pages"]

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"

_FENCE_RE = re.compile(r"^```(\w*)\n(.*?)^```", re.S | re.M)


def markdown_pages() -> list[Path]:
    """README.md and every page of the guide (docs/*.md and docs/notes/*.md)."""
    return [ROOT / "README.md", *sorted(DOCS.glob("*.md")), *sorted(DOCS.glob("notes/*.md"))]


def fenced_blocks(text: str, language: str) -> list[str]:
    """The bodies of the fenced code blocks in ``text`` marked with ``language``."""
    return [body for lang, body in _FENCE_RE.findall(text) if lang == language]
