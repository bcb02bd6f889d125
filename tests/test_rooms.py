"""The rooms of the house: the screen, the session, the engine, the command line.

- ``freezeview/ui`` is the screen's process: it imports no torch, and reaches the engine
  only through :mod:`freezeview.session`'s public names (never one of its modules, never
  ``freezeview.engine``);
- the session never imports the screen or the command line;
- the command line and the session reach the engine through each stage package's public
  names (``freezeview.engine.freeze``), never a module below one;
- no circle of imports anywhere in freezeview: every import counts, a type-only one or
  one inside a function too (a circle of ideas is a circle);
- in the screen and the session, state has one owner: no module reads another object's
  ``_private`` attribute or method (one freezeview defines), only ``self``'s, ``cls``'s
  or ``super()``'s.

The engine's own stage rules are in tests/test_engine_stages.py.
"""

from __future__ import annotations

import ast
import importlib
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "freezeview"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> Iterator[tuple[int, str, list[str]]]:
    """(line, absolute module, names) for every import in ``path``, wherever it is."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield node.lineno, alias.name, []
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - (node.level - 1)]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            yield node.lineno, target, [a.name for a in node.names]


def _modules() -> dict[str, Path]:
    return {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(target: str, names: list[str], known: dict[str, Path]) -> list[str]:
    """The freezeview modules an import reaches: a submodule named in ``names``, or the
    module itself."""
    found = [f"{target}.{n}" for n in names if f"{target}.{n}" in known]
    return found or ([target] if target in known else [])


def test_the_screen_imports_no_torch_and_the_engine_only_through_the_session() -> None:
    wrong = []
    for path in sorted((PACKAGE / "ui").rglob("*.py")):
        for line, target, _ in _imports(path):
            root = target.split(".")[0]
            if root == "torch" or target.startswith("freezeview.engine"):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports {target}")
            elif target.startswith("freezeview.session."):
                wrong.append(
                    f"{path.relative_to(PACKAGE)}:{line} imports {target}, not the package"
                )
            elif target.startswith("freezeview.cli"):
                wrong.append(f"{path.relative_to(PACKAGE)}:{line} imports the command line")
    assert not wrong, "\n".join(wrong)


@pytest.mark.parametrize("room", ["session", "engine"])
def test_a_room_never_imports_the_screen_or_the_command_line(room: str) -> None:
    wrong = [
        f"{path.relative_to(PACKAGE)}:{line} imports {target}"
        for path in sorted((PACKAGE / room).rglob("*.py"))
        for line, target, _ in _imports(path)
        if target.startswith(("freezeview.ui", "freezeview.cli", "textual"))
    ]
    assert not wrong, "\n".join(wrong)


def test_the_command_line_and_the_session_reach_the_engine_through_its_stages() -> None:
    """The command line, the session and the Python API (``freezeview/__init__.py``):
    ``from ..engine.freeze import Pipeline``, never ``..engine.freeze.pipeline``: a
    stage's ``__init__`` is the list of what it offers (tests/test_engine_stages.py holds
    the engine's own modules to the same rule). Imports inside functions count, and so
    do the modules named to ``importlib`` (the session's lazy names)."""
    stages = {p.name for p in (PACKAGE / "engine").iterdir() if (p / "__init__.py").is_file()}
    offered = {s: set(importlib.import_module(f"freezeview.engine.{s}").__all__) for s in stages}
    named = re.compile(r"(?:freezeview|\.*)\.engine\.(\w+)\.[\w.]+")
    wrong = []
    for room in ("cli", "session", "__init__.py"):
        for path in (
            sorted((PACKAGE / room).rglob("*.py")) if room != "__init__.py" else [PACKAGE / room]
        ):
            where = path.relative_to(PACKAGE)
            for line, target, names in _imports(path):
                parts = target.split(".")
                if parts[:2] != ["freezeview", "engine"] or len(parts) < 3:
                    continue
                if len(parts) > 3 and parts[2] in stages:
                    wrong.append(f"{where}:{line} imports {target}")
                elif len(parts) == 3 and parts[2] in stages:
                    # A module of the stage by its name (``from ..engine.freeze import
                    # lazy_graph``), or a name the stage does not offer.
                    unoffered = [n for n in names if n not in offered[parts[2]]]
                    if unoffered:
                        wrong.append(f"{where}:{line} imports {unoffered} from {target}")
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Constant) and isinstance(node.value, str):
                    found = named.fullmatch(node.value)
                    if found and found.group(1) in stages:
                        wrong.append(f"{where}:{node.lineno} names {node.value}")
    assert not wrong, "\n".join(wrong)


def test_no_circle_of_imports_in_freezeview() -> None:
    known = _modules()
    edges: dict[str, set[str]] = {name: set() for name in known}
    for name, path in known.items():
        for _, target, names in _imports(path):
            if target.startswith("freezeview"):
                edges[name].update(m for m in _resolve(target, names, known) if m != name)
    # A package's __init__ offering its modules' names is no circle of ideas: the
    # package is its modules' front door, and a module that imports a sibling through
    # it is reported below as importing that sibling.
    for name in list(edges):
        edges[name] = {
            m
            for m in edges[name]
            if not (known[m].name == "__init__.py" and name.startswith(m + "."))
        }
    circles = _circles(edges)
    assert not circles, "\n".join(" -> ".join(c) for c in circles)


def _defined(names: set[str]) -> set[str]:
    """Which of ``names`` freezeview defines: a function, method or class, an attribute
    assigned, a module or class variable (only the files that mention one are parsed)."""
    found: set[str] = set()
    if not names:
        return found
    mention = re.compile(r"\b(?:" + "|".join(map(re.escape, sorted(names))) + r")\b")
    for path in sorted(PACKAGE.rglob("*.py")):
        source = path.read_text(encoding="utf-8")
        if not mention.search(source):
            continue
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.ctx, ast.Store):
                found.add(node.attr)
            elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
                found.add(node.id)
    return found & names


def _own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: the object reading its own."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


@pytest.mark.parametrize("room", ["ui", "session"])
def test_no_module_reads_another_objects_private_attributes(room: str) -> None:
    reads = [
        (path, node)
        for path in sorted((PACKAGE / room).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.Attribute)
        and node.attr.startswith("_")
        and not node.attr.startswith("__")
        and not _own(node.value)
    ]
    # Only freezeview's own private names count (Textual's are another matter: the
    # surgery on them is kept in one module each, with its reason).
    ours = _defined({node.attr for _, node in reads})
    wrong = [
        f"{path.relative_to(PACKAGE)}:{node.lineno} reads {ast.unparse(node)}"
        for path, node in reads
        if node.attr in ours
    ]
    assert not wrong, "\n".join(wrong)


def _circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One circle through each strongly connected group of modules (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []
    counter = 0

    def visit(node: str) -> None:
        nonlocal counter
        index[node] = low[node] = counter
        counter += 1
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups
