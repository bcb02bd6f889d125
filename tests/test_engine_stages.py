"""The engine's stages: one sub-package each, imports flowing one way between them.

freezeview/engine/ is one sub-package per stage of the work (docs/architecture.md). A
module may import from its own stage and from stages before it in ``STAGES``, never
from a later one; within a stage the modules import each other without a circle, and so
do a stage's sub-packages (engine/draw/dot, folding, pictures, terminal); no
module imports another module's ``_private`` name; and every name a stage's
``__init__`` offers resolves. Type-only imports count: a circle of ideas is a circle.
"""

from __future__ import annotations

import ast
import functools
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


@functools.cache
def _tree(path: Path) -> ast.Module:
    """The module's syntax tree, parsed once for all the tests of this file."""
    return ast.parse(path.read_text(encoding="utf-8"))


# The tests that read the engine's syntax trees run on one worker, which parses it once.
_PARSED_ONCE = pytest.mark.xdist_group("engine-syntax")


@functools.cache
def _engine_imports(path: Path) -> list[tuple[int, tuple[str, ...], list[str]]]:
    """(line, target parts under freezeview.engine, imported names) for every import.

    Parsed once per module for all the tests of this file (callers do not change it)."""
    package = path.relative_to(ENGINE).parts[:-1]
    found = []
    for node in ast.walk(_tree(path)):
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


@_PARSED_ONCE
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


def _module_name(path: Path) -> str:
    """``draw.folding.plan`` for freezeview/engine/draw/folding/plan.py."""
    parts = path.relative_to(ENGINE).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _stage_graph() -> dict[str, set[str]]:
    """Module -> the modules of its own stage it imports (packages' __init__ left out)."""
    paths = [p for p in _modules() if _stage_of(p) is not None and p.name != "__init__.py"]
    names = {_module_name(p) for p in paths}
    graph: dict[str, set[str]] = {}
    for path in paths:
        own = _stage_of(path)
        name = _module_name(path)
        graph[name] = set()
        for _, target, imported in _engine_imports(path):
            if not target or target[0] != own:
                continue
            for candidate in (".".join(target), *(".".join((*target, n)) for n in imported)):
                if candidate in names and candidate != name:
                    graph[name].add(candidate)
    return graph


def _circles(graph: dict[str, set[str]]) -> list[str]:
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
    return circles


@_PARSED_ONCE
def test_no_circle_between_the_modules_of_a_stage() -> None:
    assert _circles(_stage_graph()) == []


@_PARSED_ONCE
def test_no_circle_between_the_sub_packages_of_a_stage() -> None:
    """A stage split into sub-packages (draw: dot, folding, pictures, terminal) has them
    import each other one way: no circle of sub-packages, even through different modules."""
    packages: dict[str, set[str]] = {}
    for module, targets in _stage_graph().items():
        parts = module.split(".")
        if len(parts) < 3:
            continue  # a module of the stage itself, in no sub-package
        own = ".".join(parts[:2])
        packages.setdefault(own, set())
        for target in targets:
            other = ".".join(target.split(".")[:2])
            if len(target.split(".")) >= 3 and other != own:
                packages[own].add(other)
    assert _circles(packages) == []


def test_every_sub_package_says_what_lives_there() -> None:
    bare = [
        str(p.relative_to(ENGINE))
        for p in ENGINE.glob("*/*/__init__.py")
        if not ast.get_docstring(ast.parse(p.read_text(encoding="utf-8")))
    ]
    assert bare == []


@_PARSED_ONCE
def test_no_module_imports_another_modules_private_names() -> None:
    private = []
    for path in _modules():
        for line, target, names in _engine_imports(path):
            for name in names:
                if name.startswith("_") and not name.startswith("__"):
                    rel = path.relative_to(ENGINE)
                    private.append(f"{rel}:{line} imports {name} from {'.'.join(target)}")
    assert private == []


@_PARSED_ONCE
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


def _private_names_of_engine_classes() -> set[str]:
    """Every ``_private`` attribute or method an engine class defines: its methods, the
    names assigned in its body (dataclass fields, ``__slots__``), and what its methods set
    on ``self`` or ``cls``. The engine's classes are the only freezeview classes an engine
    module can hold (it never imports the session, the screen or the command line)."""
    names: set[str] = set()
    for path in _modules():
        for cls in ast.walk(_tree(path)):
            if not isinstance(cls, ast.ClassDef):
                continue
            for stmt in cls.body:
                if isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef)):
                    names.add(stmt.name)
                elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    names.add(stmt.target.id)
                elif isinstance(stmt, ast.Assign):
                    for target in stmt.targets:
                        if not isinstance(target, ast.Name):
                            continue
                        names.add(target.id)
                        if target.id == "__slots__" and isinstance(
                            stmt.value, (ast.Tuple, ast.List)
                        ):
                            names.update(
                                e.value
                                for e in stmt.value.elts
                                if isinstance(e, ast.Constant) and isinstance(e.value, str)
                            )
            for node in ast.walk(cls):
                if (
                    isinstance(node, ast.Attribute)
                    and isinstance(node.ctx, ast.Store)
                    and isinstance(node.value, ast.Name)
                    and node.value.id in ("self", "cls")
                ):
                    names.add(node.attr)
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _own(value: ast.expr) -> bool:
    """``self``, ``cls`` or ``super()``: an object reading its own attributes."""
    if isinstance(value, ast.Name):
        return value.id in ("self", "cls")
    return (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Name)
        and value.func.id == "super"
    )


@_PARSED_ONCE
def test_the_engine_reads_no_other_objects_private_attributes() -> None:
    """State has one owner: an engine module reads ``obj._name`` only of ``self``, ``cls``
    or ``super()``; a collaborator asks through a public property or method. torch's own
    private names (``module._c``) are not freezeview's and stay allowed."""
    private = _private_names_of_engine_classes()
    assert {"_graphs", "_claimed", "_execute"} <= private  # it finds what it looks for
    reads = [
        f"{path.relative_to(ENGINE)}:{node.lineno} reads {ast.unparse(node)}"
        for path in _modules()
        for node in ast.walk(_tree(path))
        if isinstance(node, ast.Attribute) and node.attr in private and not _own(node.value)
    ]
    assert sorted(reads) == []
