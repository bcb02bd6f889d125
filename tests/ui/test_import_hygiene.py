"""The app's first screen must not wait for torch: importing the app (and the CLI's
path into it) must not import torch."""

from __future__ import annotations

import subprocess
import sys


def _imports_torch(statement: str) -> bool:
    code = f"import sys; {statement}; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], check=True, capture_output=True, text=True, timeout=120
    )
    return out.stdout.strip().splitlines()[-1] == "True"


def test_importing_the_app_does_not_import_torch() -> None:
    assert not _imports_torch("import freezeview.ui.app")


def test_the_app_command_line_does_not_import_torch() -> None:
    assert not _imports_torch("import freezeview.cli as c; c.build_parser(('app',))")


def test_what_the_screen_receives_from_the_engine_process_is_torch_free() -> None:
    # The screen unpickles snapshots, inventories and views sent by the engine process,
    # and diffs snapshots itself; none of that may bring torch into the screen.
    assert not _imports_torch(
        "import freezeview.engine.graph.snapshot_values, freezeview.engine.graph.inventory_values, "
        "freezeview.engine.diff.diff, freezeview.engine.graph.facts, freezeview.session.summaries, "
        "freezeview.session.remote"
    )


def test_marking_an_attribute_does_not_import_torch() -> None:
    # The tree's selection marks the attribute's readers and writers: writers come from
    # the nodes' schemas, read without torch (torch in the screen: +300 MB, 1 s frozen).
    assert not _imports_torch(
        "from freezeview.engine.graph.snapshot_values import GraphSnapshot, NodeSnapshot; "
        "from freezeview.engine.graph import facts; "
        "facts.schema_effects('aten::add_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)')"
    )


def test_the_main_screen_does_not_import_the_app() -> None:
    """ui/app.py imports ui/screens/main.py, never the other way round (ui/host.py)."""
    import ast
    from pathlib import Path

    import freezeview.ui.screens.main as main

    tree = ast.parse(Path(main.__file__).read_text())
    relative = {
        node.module
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level > 0 and node.module is not None
    }
    assert "app" not in relative and "host" in relative, relative
