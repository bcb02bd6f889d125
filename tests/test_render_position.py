"""Graphviz's placing of boxes across ranks capped for pictures of many long edges.

A value every layer of a deep stack reads is drawn as an edge that crosses every rank,
which ``dot`` lays out as a chain of virtual boxes; placing them was nearly all of the
layout of a 48-layer transformer drawn one box per layer (3.2 s of 3.3 s), 150 s at 96
layers. Such pictures carry ``nslimit`` (box_ceiling.position_limit); others do not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest
import torch

from freezeview.engine.draw import box_ceiling
from freezeview.engine.draw.render_dot import GraphAttrs, dot_source
from freezeview.engine.draw.render_pictures import snapshot_picture
from freezeview.engine.draw.render_plan import RenderOptions
from freezeview.engine.graph import GraphSnapshot
from freezeview.engine.graph.snapshot import snapshot_graph


class _Layer(torch.nn.Module):
    def forward(self, h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.relu(h * a + b)


class _Shared(torch.nn.Module):
    """A stack whose every layer reads the same two values."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(layers))

    def forward(self, h: torch.Tensor, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        a, b = a * 2, b + 1
        for layer in self.layers:
            h = layer(h, a, b)
        return h


def _snapshot(layers: int) -> tuple[GraphSnapshot, frozenset[str]]:
    module = torch.jit.script(_Shared(layers))
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph), frozenset(n for n, _ in module.named_modules() if n)


def _nslimit(source: str) -> str | None:
    found = re.search(r"\bnslimit=([0-9.]+)", source)
    return found.group(1) if found else None


def test_a_picture_of_many_long_edges_caps_graphvizs_placing() -> None:
    snap, modules = _snapshot(48)
    picture = snapshot_picture(snap, RenderOptions(modules=modules), 2)
    assert picture.bends >= box_ceiling.LONG_EDGE_BENDS
    assert _nslimit(picture.source) == f"{box_ceiling.POSITION_ITERATIONS_PER_BOX:g}"


def test_a_picture_of_few_long_edges_is_laid_out_as_graphviz_does() -> None:
    snap, modules = _snapshot(4)
    picture = snapshot_picture(snap, RenderOptions(modules=modules), 2)
    assert 0 < picture.bends < box_ceiling.LONG_EDGE_BENDS
    assert _nslimit(picture.source) is None


def test_a_callers_own_nslimit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(box_ceiling, "LONG_EDGE_BENDS", 1)
    snap, modules = _snapshot(4)
    options = RenderOptions(modules=modules)
    options = replace(options, graph=replace(options.graph, nslimit=50))
    assert _nslimit(snapshot_picture(snap, options, 2).source) == "50"
    assert _nslimit(dot_source([], attrs=GraphAttrs())) is None


@pytest.mark.skipif(shutil.which("dot") is None, reason="needs Graphviz")
def test_graphviz_lays_the_capped_picture_out() -> None:
    snap, modules = _snapshot(48)
    source = snapshot_picture(snap, RenderOptions(modules=modules), 2).source
    done = subprocess.run(["dot", "-Tsvg"], input=source.encode(), capture_output=True, timeout=60)
    assert done.returncode == 0 and done.stdout.lstrip().startswith(b"<?xml")
