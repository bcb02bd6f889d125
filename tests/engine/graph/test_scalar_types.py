"""A dtype, layout or memory format TorchScript passes as an int is shown by its name.

torch stores ``torch.quint8`` in a graph as ``prim::Constant[value=13]()``; the graph
view's box rows and the inspector show the name the op reads it as, and leave the same
int fed to an ``int`` argument a number. The names are checked against what torch's
own run of the module produces (the output's dtype, its memory format).
"""

from __future__ import annotations

import pytest
import torch

from freezeview.engine.draw.folding.build import build_drawing
from freezeview.engine.graph import snapshot as snapshot_module
from freezeview.engine.graph.facts import node_facts
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph


class Quantizes(torch.nn.Module):
    """A quantize whose zero point is the very int its dtype is stored as (freezing pools
    the two into one constant), a cast and a memory-format change."""

    def __init__(self, zero_point: int) -> None:
        super().__init__()
        self.zero_point = zero_point

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        q = torch.quantize_per_tensor(x, 0.1, self.zero_point, torch.quint8)
        y = x.to(torch.float64)
        z = x.contiguous(memory_format=torch.channels_last)
        return q.int_repr(), y, z


def _frozen() -> tuple[torch.jit.ScriptModule, int]:
    # The int torch stores quint8 as, asked of torch (the test holds no number of its own).
    graph = torch._C.Graph()
    number = graph.insertConstant(torch.quint8).toIValue()
    module = torch.jit.freeze(torch.jit.script(Quantizes(number).eval()))
    return module, number


@pytest.fixture(params=["printout", "walk"])
def snap(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> GraphSnapshot:
    """The frozen graph's snapshot, read from torch's printout or by walking its nodes."""
    if request.param == "walk":

        def refuse(*args: object) -> GraphSnapshot:
            raise ValueError("walk the nodes")

        monkeypatch.setattr(snapshot_module, "_fast_snapshot", refuse)
    return snapshot_graph(_frozen()[0].graph)


def test_box_rows_name_the_dtype_and_memory_format_the_op_reads(snap: GraphSnapshot) -> None:
    module, number = _frozen()
    q, y, z = module(torch.rand(1, 3, 4, 4))
    view = build_drawing(snap, level=None)
    rows = {v.title: v.rows for v in view.nodes.values()}
    quantize = rows["quantize_per_tensor"]
    # torch's run: the quantized tensor's dtype is the one the box names.
    assert q.dtype == torch.uint8  # int_repr of a quint8
    assert f"dtype = {torch.quint8}" in quantize
    # The same pooled constant fed to the int zero point stays a number.
    assert f"zero_point = {number}" in quantize
    assert f"dtype = {y.dtype}" in rows["to"]
    assert z.is_contiguous(memory_format=torch.channels_last)
    assert f"memory_format = {torch.channels_last}" in rows["contiguous"]
    assert not any(f"= {number}" in r and "dtype" in r for r in quantize)


def test_the_inspector_names_the_dtype_where_it_is_read(snap: GraphSnapshot) -> None:
    _, number = _frozen()
    quantize = next(n for n in snap.walk() if n.kind == "aten::quantize_per_tensor")
    facts = node_facts(snap, quantize.id)
    sources = [src for _, _, src in facts.inputs]
    assert sources[3] == f"prim::Constant {torch.quint8}"
    assert sources[2] == "prim::Constant"  # the zero point: an int
    constant = next(n for n in snap.walk() if n.output_names == (quantize.inputs[3],))
    assert constant.constant is not None and constant.constant.text == str(number)
    read_as = node_facts(snap, constant.id).read_as
    assert read_as == (f"{torch.quint8} (dtype of aten::quantize_per_tensor)",)
