"""Tests for engine/draw/dot/: the DOT text (text.py) and how much Graphviz is handed
(ceiling.py).

The DOT writer is checked against the ``graphviz`` package it copies. Graphviz's placing
of boxes across ranks is capped for pictures of many long edges: a value every layer of a
deep stack reads is drawn as an edge that crosses every rank, which ``dot`` lays out as a
chain of virtual boxes; placing them was nearly all of the layout of a 48-layer
transformer drawn one box per layer (3.2 s of 3.3 s), 150 s at 96 layers. Such pictures
carry ``nslimit`` (ceiling.py's position_limit); others do not.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import replace

import pytest
import torch

from freezeview.engine.draw.dot import ceiling
from freezeview.engine.draw.dot.ceiling import CEILING_BOXES, CEILING_TIMEOUT, box_ceiling
from freezeview.engine.draw.dot.text import GraphAttrs
from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.draw.pictures.dot_source import dot_source
from freezeview.engine.draw.pictures.picture import snapshot_picture
from freezeview.engine.graph import GraphSnapshot
from freezeview.engine.graph.snapshot import snapshot_graph

_AWKWARD = [
    "",
    "n12",
    "node",
    "Graph",
    "-4.2",
    ".42",
    "4.",
    "1abc",
    "s_layers.0.self_attn",
    "a:b:sw",
    'say "hi"',
    'a\\"b',
    "x\\\\",
    "<<b>html</b>>",
    "<Tensor>\n",
    "line one\nline two",
    "Float(64, 3, 7, 7) <conv1.weight>",
    "é → ∅",
    "weight = [1, 1]",
]


def test_dot_writer_writes_what_the_graphviz_package_writes() -> None:
    """freezeview's DOT writer is a faster copy of graphviz.Digraph: same text, always."""
    import random
    import warnings

    import graphviz
    from graphviz import quoting

    from freezeview.engine.draw.dot.text import DotWriter, _quote, _quote_edge

    rng = random.Random(4)
    alphabet = ["a", "Z", "_", "0", ".", "-", " ", '"', "\\", "<", ">", "\n", ":", "é", "="]
    strings = _AWKWARD + [
        "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 7))) for _ in range(3000)
    ]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # graphviz warns on odd trailing backslashes
        for text in strings * 2:  # the second pass reads freezeview's quoting cache
            assert _quote(text) == quoting.quote(text), text
            assert _quote_edge(text) == quoting.quote_edge(text), text

    ours, theirs = DotWriter("freezeview"), graphviz.Digraph(name="freezeview")
    for graph in (ours, theirs):
        graph.attr(rankdir="TB", label=_AWKWARD[10], tooltip="t")
        graph.attr("node", fontname="Helvetica", fontsize="10")
        for k, text in enumerate(_AWKWARD[1:]):
            graph.node(f"n{k}", label=text, tooltip=text, id=f"n{k}", **{"class": "fv-op"})
            graph.edge(f"n{k}", text or "x", label=text, style="dashed")
    for outer in (ours, theirs):
        kind = type(outer)
        sub = kind(name="cluster_1")
        sub.attr(label="layer1", style="rounded,dashed", id="cluster_1")
        inner = kind(name="cluster_2")
        inner.node("n1", label="relu")
        sub.subgraph(inner)
        outer.subgraph(sub)
    assert ours.source == theirs.source


def test_the_ceiling_grows_with_the_timeout() -> None:
    assert box_ceiling(CEILING_TIMEOUT) == CEILING_BOXES
    # Layout time grows about as boxes cubed: eight times the time, twice the boxes.
    assert box_ceiling(8 * CEILING_TIMEOUT) == 2 * CEILING_BOXES
    assert box_ceiling(CEILING_TIMEOUT / 8) == CEILING_BOXES // 2
    assert box_ceiling(1e-12) == 1
    assert RenderOptions().ceiling == CEILING_BOXES
    assert RenderOptions(timeout=120).ceiling == box_ceiling(120) > CEILING_BOXES
    assert RenderOptions(timeout=120, max_boxes=50).ceiling == 50


# -- Graphviz's placing capped for pictures of many long edges ---------------------------


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
    graph = module.forward.graph.copy()  # type: ignore[attr-defined]
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph), frozenset(n for n, _ in module.named_modules() if n)


def _nslimit(source: str) -> str | None:
    found = re.search(r"\bnslimit=([0-9.]+)", source)
    return found.group(1) if found else None


def test_a_picture_of_many_long_edges_caps_graphvizs_placing() -> None:
    snap, modules = _snapshot(48)
    picture = snapshot_picture(snap, RenderOptions(modules=modules), 2)
    assert picture.bends >= ceiling.LONG_EDGE_BENDS
    assert _nslimit(picture.source) == f"{ceiling.POSITION_ITERATIONS_PER_BOX:g}"


def test_a_picture_of_few_long_edges_is_laid_out_as_graphviz_does() -> None:
    snap, modules = _snapshot(4)
    picture = snapshot_picture(snap, RenderOptions(modules=modules), 2)
    assert 0 < picture.bends < ceiling.LONG_EDGE_BENDS
    assert _nslimit(picture.source) is None


def test_a_callers_own_nslimit_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ceiling, "LONG_EDGE_BENDS", 1)
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
