"""freezeview.engine never imports textual or freezeview.ui (checked in a fresh interpreter)."""

from __future__ import annotations

import subprocess
import sys

import pytest


def test_engine_does_not_import_the_ui() -> None:
    # Every module under freezeview.engine, plus the public facade, in one fresh process.
    code = (
        "import importlib, pkgutil, sys\n"
        "import freezeview\n"
        "import freezeview.engine as e\n"
        "for info in pkgutil.iter_modules(e.__path__):\n"
        "    importlib.import_module('freezeview.engine.' + info.name)\n"
        "bad = sorted(m for m in sys.modules if m == 'textual' or m.startswith('textual.')"
        " or m.startswith('freezeview.ui'))\n"
        "print(len(list(pkgutil.iter_modules(e.__path__))), ','.join(bad))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    count, _, bad = proc.stdout.strip().partition(" ")
    assert int(count) >= 6
    assert bad == "", f"freezeview.engine pulled in: {bad}"


@pytest.mark.slow
def test_public_explain_is_the_function_whatever_was_imported_first() -> None:
    # `freezeview.engine.explain` once named both a module and the function; importing
    # the module first then shadowed the function in the package.
    code = (
        "import freezeview.cli.explain, freezeview.engine.reasons.verdicts\n"
        "import freezeview\n"
        "from freezeview.engine import explain\n"
        "assert callable(explain) and callable(freezeview.explain), (explain, freezeview.explain)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
