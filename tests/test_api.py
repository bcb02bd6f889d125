"""Tests for freezeview/__init__.py: the typed Python API facade.

Each function has the real parameters of the engine function it calls (an editor shows
them, a type checker checks them), importing freezeview imports no torch, and each
call gives what the engine gives.
"""

from __future__ import annotations

import inspect
import subprocess
import sys

import pytest
import torch
from models.small import example_module

import freezeview
from freezeview.engine.ci import check as check_module
from freezeview.engine.ci import compare as compare_module
from freezeview.engine.freeze import pipeline
from freezeview.engine.output import export as export_module

FACADE = {
    "freeze": pipeline.freeze,
    "export": export_module.export,
    "check": check_module.check,
    "compare": compare_module.compare,
}


@pytest.mark.parametrize("name", sorted(FACADE))
def test_the_facade_has_the_engine_functions_parameters(name: str) -> None:
    facade = inspect.signature(getattr(freezeview, name))
    engine = inspect.signature(FACADE[name])
    kinds = [(p.kind, p.default) for p in facade.parameters.values()]
    assert kinds == [(p.kind, p.default) for p in engine.parameters.values()]
    assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in facade.parameters.values())
    assert facade.return_annotation not in (inspect.Signature.empty, "Any")
    doc = getattr(freezeview, name).__doc__ or ""
    assert "Args:" in doc and "Returns:" in doc and "Example::" in doc


def test_importing_freezeview_imports_no_torch() -> None:
    code = "import sys, freezeview; freezeview.__all__; print('torch' in sys.modules)"
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60
    )
    assert out.stdout.strip() == "False"


def test_freeze_through_the_facade_equals_torch_jit_freeze() -> None:
    module = example_module().build()
    result = freezeview.freeze(module, preserved_attrs=["temperature"])
    frozen = torch.jit.freeze(module, preserved_attrs=["temperature"])
    ours = sorted(n.kind() for n in result.module.graph.nodes())
    theirs = sorted(n.kind() for n in frozen.graph.nodes())
    assert ours == theirs
    assert hasattr(result.module, "temperature")
