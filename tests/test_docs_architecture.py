"""The map a newcomer reads: docs/architecture.md's picture and every package's docstring.

The picture (docs/architecture.svg) is drawn from docs/architecture.dot by
``scripts/render_architecture.py``, which writes the source's SHA-256 into the SVG: an
edited .dot without a new drawing fails here, without running Graphviz. Each package's
``__init__.py`` docstring names its modules and sub-packages (``:mod:`.name```, one line
each): a module added, split or removed without its line leaves the map wrong, and fails
here too. Both read files only (no import, no subprocess).
"""

from __future__ import annotations

import ast
import hashlib
import re
from pathlib import Path

import pytest
from docs_support import DOCS, ROOT

PACKAGE = ROOT / "freezeview"
PACKAGES = sorted(p.parent for p in PACKAGE.rglob("__init__.py"))

# A reference to a module of this package in reST: ``:mod:`.name` ``, ``:class:`~.name.X` ``...
# (one leading dot: ``..name`` is a sibling package's module, checked in its own docstring).
_OWN_MODULE = re.compile(r":[a-z]+:`~?\.(?!\.)(\w+)")


def _rooms(package: Path) -> set[str]:
    """The modules and sub-packages directly inside ``package``."""
    modules = {p.stem for p in package.glob("*.py") if p.name != "__init__.py"}
    subpackages = {p.parent.name for p in package.glob("*/__init__.py")}
    return modules | subpackages


def _named(package: Path) -> set[str]:
    tree = ast.parse((package / "__init__.py").read_text())
    return set(_OWN_MODULE.findall(ast.get_docstring(tree) or ""))


@pytest.mark.parametrize("package", PACKAGES, ids=[str(p.relative_to(ROOT)) for p in PACKAGES])
def test_package_docstring_names_each_module(package: Path) -> None:
    """The package's docstring names each of its modules and sub-packages, and no other."""
    rooms, named = _rooms(package), _named(package)
    init = package.relative_to(ROOT) / "__init__.py"
    missing, stale = sorted(rooms - named), sorted(named - rooms)
    assert missing == [], f"add a line `- :mod:`.NAME`: what it holds;` to {init}'s docstring"
    assert stale == [], f"{init}'s docstring names modules that are gone"


def test_architecture_picture_is_drawn_from_its_source() -> None:
    source = (DOCS / "architecture.dot").read_bytes()
    stamp = f"<!-- architecture.dot sha256:{hashlib.sha256(source).hexdigest()} -->"
    svg = (DOCS / "architecture.svg").read_text()
    assert "<svg" in svg
    assert stamp in svg, "docs/architecture.svg is older than its .dot: make architecture-picture"
    assert "](architecture.svg)" in (DOCS / "architecture.md").read_text()
