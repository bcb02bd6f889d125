"""``--help``, ``--version`` and usage errors answer without importing torch.

Building the parser used to import every subcommand's part of the engine, and with it
torch: ``freezeview --help`` took as long as ``import torch`` (1.2 s). Each case runs in
one fresh interpreter, in the order below, and what it imported is read right after it.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

# What answering may import of freezeview's engine: the error classes the CLI catches,
# the Ctrl-C guard it runs each command's imports under, and the packages around them.
LIGHT_ENGINE = {
    "freezeview.engine",
    "freezeview.engine.plumbing",
    "freezeview.engine.plumbing.errors",
    "freezeview.engine.plumbing.interrupts",
    "freezeview.engine.plumbing.lazy",
}
# Never, for an answer that needs no model.
HEAVY = ("torch", "numpy", "rich", "textual", "pygments", "freezeview.ui")

CASES: list[tuple[list[str], int]] = [
    (["--help"], 0),
    (["--version"], 0),
    ([], 2),
    (["explain", "--help"], 0),
    (["freeze", "--help"], 0),
    (["export", "--help"], 0),
    (["check", "--help"], 0),
    (["compare", "--help"], 0),
    (["passes", "--help"], 0),
    (["migrate", "--help"], 0),
    (["migrate", "model.pt", "--no-such-option"], 2),
    (["app", "--help"], 0),
    (["model.pt", "--help"], 0),
    (["explain"], 2),
    (["explain", "model.pt", "--no-such-option"], 2),
    (["freeze", "model.pt"], 2),
    (["export", "model.pt"], 2),
    (["export", "model.pt", "-o", "out", "--format", "png8"], 2),
    (["check", "model.pt"], 2),
    (["compare", "old.pt"], 2),
    (["passes", "--no-such-option"], 2),
    (["model.pt", "--passes"], 2),
]

PROBE = """
import contextlib, io, json, sys
from freezeview.cli import main
cases = json.loads(sys.argv[1])
heavy = tuple(json.loads(sys.argv[2]))
for argv, _ in cases:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code if isinstance(exc.code, int) else 2
    loaded = sorted(
        m for m in sys.modules
        if m.startswith("freezeview.engine") or m.split(".")[0] in heavy or m.startswith(heavy)
    )
    print(json.dumps({"argv": argv, "code": code, "loaded": loaded, "out": out.getvalue(),
                      "err": err.getvalue()}))
"""


@pytest.fixture(scope="module")
def answers() -> list[dict[str, object]]:
    """Every case's exit code, output and what was imported by then (one interpreter)."""
    proc = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(CASES), json.dumps(HEAVY)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    return [json.loads(line) for line in proc.stdout.splitlines()]


def _params() -> list[object]:
    return [
        pytest.param(i, argv, code, id=" ".join(argv) or "(nothing)")
        for i, (argv, code) in enumerate(CASES)
    ]


@pytest.mark.parametrize(("index", "argv", "code"), _params())
def test_answers_without_torch(
    answers: list[dict[str, object]], index: int, argv: list[str], code: int
) -> None:
    answer = answers[index]
    assert answer["argv"] == argv
    assert answer["code"] == code, answer["err"]
    said = f"{answer['out']}{answer['err']}"
    assert "usage: freezeview" in said or said.startswith("freezeview "), said
    loaded = [str(m) for m in answer["loaded"]]  # type: ignore[attr-defined]
    command = f"freezeview {' '.join(argv)}"
    assert "torch" not in loaded, f"{command} imported torch"
    heavy = [m for m in loaded if not m.startswith("freezeview.engine")]
    assert heavy == [], f"{command} imported {heavy[:8]}"
    engine = sorted(set(loaded) - LIGHT_ENGINE)
    assert engine == [], f"{command} imported {engine}"


def test_export_help_states_the_engines_defaults() -> None:
    """export's --help says the drawing code's choices and defaults without importing it."""
    from freezeview.cli import export as export_cli
    from freezeview.engine.draw.dot.ceiling import box_ceiling
    from freezeview.engine.draw.folding.drawing import CONSTANT_MODES
    from freezeview.engine.draw.folding.plan import RenderOptions
    from freezeview.engine.draw.pictures.render import FORMATS

    assert export_cli.FORMATS == FORMATS
    assert export_cli.CONSTANT_MODES == CONSTANT_MODES
    assert RenderOptions.budget == export_cli.DEFAULT_BUDGET
    assert RenderOptions.timeout == export_cli.DEFAULT_TIMEOUT
    assert box_ceiling(RenderOptions.timeout) == export_cli.DEFAULT_MAX_BOXES


BROKEN_PROBE = """
import json, sys
sys.modules["freezeview.cli." + sys.argv[1]] = None  # its import now raises ImportError
from freezeview.cli import main
sys.argv = ["freezeview", *json.loads(sys.argv[2])]
code = main()  # as the console script calls it
print(json.dumps({"code": code, "torch": "torch" in sys.modules}))
"""


@pytest.mark.parametrize(
    ("broken", "argv"),
    [("freeze", ["--help"]), ("freeze", ["freeze", "model.pt"]), ("app", ["model.pt"])],
    ids=["help", "the-command", "the-app"],
)
def test_a_command_that_fails_to_import_is_an_error(broken: str, argv: list[str]) -> None:
    """A subcommand whose module cannot be imported is an error, never a missing command.

    Otherwise ``--help`` would just not list it (and tests that look for it there would
    skip); here the console script says which command, exits 1, and still imports no torch.
    """
    proc = subprocess.run(
        [sys.executable, "-c", BROKEN_PROBE, broken, json.dumps(argv)],
        capture_output=True,
        text=True,
        timeout=60,
    )
    *printed, last = proc.stdout.splitlines() or [""]
    result = json.loads(last)
    assert result == {"code": 1, "torch": False}, proc.stderr
    assert not any("usage:" in line for line in printed), proc.stdout
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error:") and f"'{broken}'" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


def test_building_the_parser_raises_on_a_broken_command(monkeypatch: pytest.MonkeyPatch) -> None:
    """In the suite, a command module that fails to import fails every test that builds
    the parser (no skip, no silently shorter --help)."""
    from freezeview.cli import CommandImportError, build_parser

    monkeypatch.setitem(sys.modules, "freezeview.cli.export", None)
    with pytest.raises(CommandImportError) as raised:
        build_parser()
    assert raised.value.command == "export"
    assert isinstance(raised.value.__cause__, ImportError)


def _command_modules() -> set[str]:
    """The modules of the ``freezeview.cli`` package that define a subcommand (a
    top-level ``register``), read from their source so that a module that fails to
    import still counts."""
    import ast
    import pkgutil

    import freezeview.cli

    found = set()
    for info in pkgutil.iter_modules(freezeview.cli.__path__):
        path = Path(freezeview.cli.__path__[0]) / f"{info.name}.py"
        tree = ast.parse(path.read_text(encoding="utf-8"))
        if any(isinstance(n, ast.FunctionDef) and n.name == "register" for n in tree.body):
            found.add(info.name)
    return found


def test_every_command_module_imports_and_is_in_the_parser() -> None:
    """Each subcommand module of the cli package imports, registers its command, and is
    one of the commands ``freezeview --help`` lists (no hand-written list to forget)."""
    import importlib

    from freezeview import cli

    expected = _command_modules()
    assert {"explain", "freeze", "app"} <= expected, expected  # the discovery works
    for name in sorted(expected):
        module = importlib.import_module(f"freezeview.cli.{name}")  # fails the test, never skips
        assert callable(getattr(module, "run", None)), f"freezeview.cli.{name} has no run()"
    cli.build_parser()
    assert set(cli.SUBCOMMANDS) == expected
    assert set(cli.COMMANDS) == expected
