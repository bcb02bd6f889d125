"""docs/reasons.md: every reason code's minimal model produces what the page says.

The page has one ``## `code` `` section per reason code. Each section holds a fenced
``python`` block that defines a module and scripts it as ``model`` (optionally naming
``preserved_attrs``), and one or more lines ``expect: KIND PATH is STATUS, CODE``. Each
block runs here, in this process: it is written to a file (TorchScript reads the source
of the classes it compiles), imported, and given to :func:`freezeview.explain`.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from typing import Any

import pytest
from docs_support import DOCS, ROOT, fenced_blocks

from freezeview.engine import REASON_CODES, explain

PAGE = DOCS / "reasons.md"

#: Codes the page documents without a model, and why (the page says the same).
WITHOUT_EXAMPLE = {
    # Shown only where freezeview's replay of freeze_module.cpp disagrees with torch;
    # every such model found became a fix, and the corpus test fails if one appears.
    "undetermined",
}

_SECTION_RE = re.compile(r"^## `([a-z-]+)`\s*$", re.M)
_EXPECT_RE = re.compile(
    r"^`?expect: (parameter|buffer|attribute|submodule) (\S+) is (inlined|kept|dropped), "
    r"([a-z-]+)`?\s*$",
    re.M,
)


def _sections() -> dict[str, str]:
    text = PAGE.read_text()
    found = list(_SECTION_RE.finditer(text))
    return {
        m.group(1): text[m.end() : found[i + 1].start() if i + 1 < len(found) else len(text)]
        for i, m in enumerate(found)
    }


SECTIONS = _sections()
EXAMPLES = sorted(code for code in SECTIONS if code not in WITHOUT_EXAMPLE)


def _load(code: str, source: str, directory: Path) -> dict[str, Any]:
    """Run one example as a real module file and return its namespace."""
    name = f"freezeview_docs_reason_{code.replace('-', '_')}"
    path = directory / f"{name}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    # TorchScript resolves names through sys.modules[cls.__module__].
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    finally:
        sys.modules.pop(name, None)
    return vars(module)


def test_every_engine_code_is_documented_and_nothing_else() -> None:
    assert set(SECTIONS) == set(REASON_CODES)


def test_the_engine_writes_exactly_the_closed_set() -> None:
    # Codes spelled out where reasons and the replay's write facts (which become
    # mutation reasons) are built, read from the source: a new code added there without
    # a page section fails here.
    engine = ROOT / "freezeview" / "engine"
    written: set[str] = set()
    for path in engine.rglob("*.py"):
        written |= set(re.findall(r'(?:Reason|WriteFact)\(\s*"([a-z-]+)"', path.read_text()))
    # Equal, not just included: a code the engine no longer writes is a dead page section.
    assert written == set(REASON_CODES)


def test_every_documented_code_has_an_example_or_says_why_not() -> None:
    for code, body in SECTIONS.items():
        blocks = fenced_blocks(body, "python")
        if code in WITHOUT_EXAMPLE:
            assert not blocks and "no minimal model" in body, code
        else:
            assert len(blocks) == 1, f"{code}: expected one python block"
            assert any(m.group(4) == code for m in _EXPECT_RE.finditer(body)), code


@pytest.mark.parametrize("code", EXAMPLES)
def test_example_produces_its_code(code: str, tmp_path: Path) -> None:
    body = SECTIONS[code]
    (source,) = fenced_blocks(body, "python")
    namespace = _load(code, source, tmp_path)
    model = namespace["model"]
    result = explain(model, list(namespace.get("preserved_attrs", [])))
    for match in _EXPECT_RE.finditer(body):
        kind, path, status, expected = match.groups()
        verdict = result.by_path(path)
        assert verdict is not None, f"{code}: no attribute {path!r}"
        assert (verdict.kind, verdict.status) == (kind, status), (code, path, verdict.codes)
        assert expected in verdict.codes, (code, path, verdict.codes)
