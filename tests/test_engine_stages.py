"""The engine's stages: one sub-package each, imports flowing one way between them.

freezeview/engine/ is one sub-package per stage of the work (docs/architecture.md). A
module may import from its own stage and from stages before it in ``STAGES``, never
from a later one; within a stage the modules import each other without a circle; no
module imports another module's ``_private`` name; and every name a stage's
``__init__`` offers resolves. Type-only imports count: a circle of ideas is a circle.
"""

from __future__ import annotations

import ast
import importlib
import subprocess
import sys
from pathlib import Path

import pytest

ENGINE = Path(__file__).resolve().parent.parent / "freezeview" / "engine"

# The order imports flow in: each stage uses only the stages before it.
STAGES = (
    "plumbing",
    "load",
    "graph",
    "reasons",
    "diff",
    "freeze",
    "measure",
    "migrate",
    "draw",
    "output",
    "ci",
)


def _modules() -> list[Path]:
    return sorted(p for p in ENGINE.rglob("*.py"))


def _stage_of(path: Path) -> str | None:
    rel = path.relative_to(ENGINE).parts
    return rel[0] if len(rel) > 1 else None


def _engine_imports(path: Path) -> list[tuple[int, tuple[str, ...], list[str]]]:
    """(line, target parts under freezeview.engine, imported names) for every import."""
    package = path.relative_to(ENGINE).parts[:-1]
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom):
            names = [a.name for a in node.names]
            if node.level:
                base = package[: len(package) - (node.level - 1)] if node.level > 1 else package
                if node.level - 1 > len(package):
                    continue  # above the engine: freezeview itself
                target = (*base, *(node.module.split(".") if node.module else ()))
            elif node.module and node.module.startswith("freezeview.engine"):
                target = tuple(node.module.split(".")[2:])
            else:
                continue
            found.append((node.lineno, target, names))
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name.startswith("freezeview.engine."):
                    found.append((node.lineno, tuple(alias.name.split(".")[2:]), []))
    return found


def test_every_engine_module_lives_in_a_stage() -> None:
    loose = [p.name for p in ENGINE.glob("*.py") if p.name != "__init__.py"]
    assert loose == []
    stages = sorted(p.name for p in ENGINE.iterdir() if (p / "__init__.py").exists())
    assert stages == sorted(STAGES)


def test_imports_flow_one_way_between_stages() -> None:
    backwards = []
    for path in _modules():
        own = _stage_of(path)
        if own is None:
            continue
        for line, target, _ in _engine_imports(path):
            if not target or target[0] not in STAGES:
                continue
            if STAGES.index(target[0]) > STAGES.index(own):
                rel = path.relative_to(ENGINE)
                backwards.append(f"{rel}:{line} imports {'.'.join(target)}")
    assert backwards == []


def test_no_circle_between_the_modules_of_a_stage() -> None:
    graph: dict[str, set[str]] = {}
    for path in _modules():
        own = _stage_of(path)
        if own is None or path.name == "__init__.py":
            continue
        name = f"{own}.{path.stem}"
        graph[name] = set()
        for _, target, imported in _engine_imports(path):
            if len(target) >= 2 and target[0] == own:
                graph[name].add(f"{own}.{target[1]}")
            elif len(target) == 1 and target[0] == own:
                graph[name].update(f"{own}.{n}" for n in imported)
    circles = []
    state: dict[str, int] = {}

    def visit(node: str, trail: list[str]) -> None:
        state[node] = 1
        for nxt in sorted(graph.get(node, ())):
            if nxt not in graph:
                continue
            if state.get(nxt) == 1:
                circles.append(" -> ".join([*trail[trail.index(nxt) :], nxt]))
            elif nxt not in state:
                visit(nxt, [*trail, nxt])
        state[node] = 2

    for node in sorted(graph):
        if node not in state:
            visit(node, [node])
    assert circles == []


def test_no_module_imports_another_modules_private_names() -> None:
    private = []
    for path in _modules():
        for line, target, names in _engine_imports(path):
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    rel = path.relative_to(ENGINE)
                    private.append(f"{rel}:{line} imports {name} from {'.'.join(target)}")
    assert private == []


def test_a_stage_is_reached_through_its_package() -> None:
    """Another stage's modules are reached through the names its __init__ offers."""
    direct = []
    for path in _modules():
        own = _stage_of(path)
        if own is None:
            continue
        for line, target, names in _engine_imports(path):
            other = len(target) >= 2 and target[0] in STAGES and target[0] != own
            if other and target[1] != "lazy":
                rel = path.relative_to(ENGINE)
                direct.append(f"{rel}:{line} imports {names} from {'.'.join(target)}")
    assert direct == []


@pytest.mark.parametrize("stage", STAGES)
def test_every_offered_name_resolves(stage: str) -> None:
    package = importlib.import_module(f"freezeview.engine.{stage}")
    offered = package.__all__
    assert offered, f"{stage} offers nothing"
    for name in offered:
        value = getattr(package, name)
        assert value is not None
        assert not isinstance(value, type(package)), f"{stage}.{name} is a module"
    assert set(offered) <= set(dir(package))
    with pytest.raises(AttributeError):
        package.no_such_name  # noqa: B018


def test_importing_a_stage_package_imports_no_torch() -> None:
    """The app's screen process reads torch-free modules of a stage: the package is lazy."""
    code = (
        "import sys\n"
        + "".join(f"import freezeview.engine.{s}\n" for s in STAGES)
        + "import freezeview.engine.graph.snapshot_values\n"
        + "import freezeview.engine.reasons.verdict_values\n"
        + "print('torch' in sys.modules)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"
