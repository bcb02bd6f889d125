"""Sample inputs and output comparison (freezeview/engine/freeze/numerics.py)."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from torch import nn

from freezeview.engine.freeze.numerics import (
    compare_outputs,
    load_inputs,
    parse_input_shape,
    random_inputs,
)
from freezeview.engine.freeze.sandbox import Sandbox
from freezeview.engine.plumbing.errors import BadInputError


class Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(2))
        self.steps = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.total.add_(x.sum())
        self.steps = self.steps + 1
        return self.total * 2


def test_parse_input_shape() -> None:
    """Sizes, an optional dtype, and one sentence for nonsense."""
    assert parse_input_shape("1,3,224,224") == ((1, 3, 224, 224), torch.float32)
    assert parse_input_shape("2,4:float16") == ((2, 4), torch.float16)
    for bad in ("", "a,b", "1,-2", "2,2:complex99"):
        with pytest.raises(BadInputError):
            parse_input_shape(bad)


def test_random_inputs_are_reproducible() -> None:
    """Same shapes, same numbers; the global RNG is left alone."""
    state = torch.random.get_rng_state()
    a = random_inputs(["2,3", "4:int64"])
    b = random_inputs(["2,3", "4:int64"])
    assert torch.equal(torch.random.get_rng_state(), state)
    assert all(torch.equal(x, y) for x, y in zip(a, b, strict=True))
    assert a[0].dtype == torch.float32 and a[1].dtype == torch.int64


def test_load_inputs(tmp_path: Path) -> None:
    """A tensor or a tuple of tensors loads; anything else is a BadInputError."""
    one = tmp_path / "one.pt"
    torch.save(torch.ones(2), one)
    assert len(load_inputs(one)) == 1
    two = tmp_path / "two.pt"
    torch.save((torch.ones(2), torch.zeros(3)), two)
    assert [t.shape[0] for t in load_inputs(two)] == [2, 3]
    junk = tmp_path / "junk.pt"
    junk.write_text("not a pickle")
    with pytest.raises(BadInputError, match="could not be read"):
        load_inputs(junk)
    other = tmp_path / "other.pt"
    torch.save({"x": torch.ones(1)}, other)
    with pytest.raises(BadInputError, match="holds dict"):
        load_inputs(other)
    with pytest.raises(BadInputError, match="no such file"):
        load_inputs(tmp_path / "missing.pt")


def test_compare_outputs() -> None:
    """Nested outputs compare element-wise; mismatched structure is infinite."""
    ref = (torch.tensor([1.0, -2.0]), [torch.tensor([3.0])])
    same = compare_outputs(ref, (ref[0].clone(), [ref[1][0].clone()]))
    assert same.max_abs == 0.0 and same.allclose and same.outputs == 2 and same.exact
    moved = compare_outputs(ref, (torch.tensor([1.0, -2.5]), [torch.tensor([3.0])]))
    assert moved.max_abs == pytest.approx(0.5)
    assert moved.max_rel == pytest.approx(0.5 / 3.0)
    assert not moved.allclose
    shape = compare_outputs(torch.ones(2), torch.ones(3))
    assert math.isinf(shape.max_abs) and "shape" in shape.note
    count = compare_outputs((torch.ones(1),), (torch.ones(1), torch.ones(1)))
    assert "2 outputs instead of 1" in count.note
    assert compare_outputs(torch.tensor([float("nan")]), torch.tensor([float("nan")])).max_abs == 0


def test_sandbox_runs_the_current_graph() -> None:
    """A graph copy runs on the sandbox as self, the module's cached plan notwithstanding."""
    module = torch.jit.script(nn.Linear(3, 2).eval())
    x = torch.randn(4, 3)
    expect = module(x)
    torch.testing.assert_close(Sandbox(module).function(module.graph)(x), expect)


def test_sandbox_leaves_the_module_alone_and_restores_its_copy() -> None:
    """A run writes the sandbox's copy only; restore puts back what was written in
    place and what a prim::SetAttr re-assigned."""
    module = torch.jit.script(Counter().eval())
    box = Sandbox(module)
    call = box.function(module.graph)
    call(torch.ones(3))
    assert module.steps == 0 and torch.equal(module.total, torch.zeros(2))
    assert box.copy.getattr("steps") == 1 and box.copy.getattr("total")[0].item() == 3.0
    box.restore()
    assert box.copy.getattr("steps") == 0
    assert torch.equal(box.copy.getattr("total"), torch.zeros(2))
    torch.testing.assert_close(call(torch.ones(3)), module(torch.ones(3)))
