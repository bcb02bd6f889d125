"""The sandbox's copy shares storage as the user's module does, and runs as torch runs it.

A buffer and a view of it, one tensor under two names, a parameter and a buffer on one
storage, strided views at an offset, tensors in lists, dicts and tuples, and the fields of
a TorchScript object: torch's module shows a write through one of them in the others.
Each test runs a fresh module with torch (the oracle) and the same module's sandbox, and
compares the outputs, the state after the calls and the storage sharing; the module the
sandbox copies is left as it was (same storages, same values).

No ``from __future__ import annotations``: TorchScript reads the class annotations.
"""

import copy
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import torch
from models.small import Tied
from oracle import torch_freeze
from torch import nn

from freezeview.engine.freeze.sandbox import Sandbox, SandboxError
from freezeview.engine.graph import attribute_values


class TwoNames(nn.Module):
    """``b`` is the very tensor ``a`` is; forward writes ``a``."""

    def __init__(self) -> None:
        super().__init__()
        shared = torch.zeros(4)
        self.register_buffer("a", shared)
        self.register_buffer("b", shared)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a.add_(x.sum())
        return x + self.b


class ParameterAndBuffer(nn.Module):
    """``flat`` is a buffer on the parameter's storage; forward writes the buffer."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.arange(4.0))
        self.register_buffer("flat", self.w.detach().view(2, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.flat.mul_(2.0)
        return x * self.w


class OffsetsAndStrides(nn.Module):
    """A transposed, stepped view at an offset, and a dtype view of the same bytes."""

    def __init__(self) -> None:
        super().__init__()
        base = torch.arange(12.0).view(3, 4)
        self.register_buffer("base", base)
        self.register_buffer("strided", base.t()[1:, ::2])
        self.register_buffer("bits", base.view(torch.int32)[2])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.strided.add_(x.sum())
        return self.base * 1.0 + self.bits.sum().float()


class InContainers(nn.Module):
    """Views of one buffer in a list, a dict and a tuple, each written in forward."""

    rows: list[torch.Tensor]
    named: dict[str, torch.Tensor]
    pair: tuple[torch.Tensor, torch.Tensor]

    def __init__(self) -> None:
        super().__init__()
        base = torch.zeros(4, 2)
        self.register_buffer("base", base)
        self.rows = [base[0], base[1:3]]
        self.named = {"last": base[3], "all": base}
        self.pair = (base[:, 1], base)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.rows[0].add_(x.sum())
        self.named["last"].add_(2.0)
        self.pair[0].mul_(3.0)
        return x + self.base.sum() + self.rows[1].sum() + self.named["all"].sum()


@torch.jit.script
class Holder:
    def __init__(self, t: torch.Tensor) -> None:
        self.t = t

    def bump(self, by: float) -> None:
        self.t.add_(by)


class InObject(nn.Module):
    """A TorchScript object holds a view of a buffer and writes it."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("state", torch.zeros(4))
        self.holder = Holder(self.state[1:3])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.holder.bump(x.sum().item())
        return x + self.state


# torch refuses to freeze InContainers (its containers overlap a buffer); the frozen
# InObject writes an object folded into the graph (the sandbox refuses it, pinned below).
CASES = [
    *[
        pytest.param(make, frozen, id=f"{make.__name__}-{'frozen' if frozen else 'unfrozen'}")
        for make in (Tied, TwoNames, ParameterAndBuffer, OffsetsAndStrides)
        for frozen in (False, True)
    ],
    pytest.param(InContainers, False, id="InContainers-unfrozen"),
    pytest.param(InObject, False, id="InObject-unfrozen"),
]


def _tensors(value: Any, path: str) -> Iterator[tuple[str, torch.Tensor]]:
    """Every tensor of an attribute's value with a path: containers and object fields."""
    if isinstance(value, torch.Tensor):
        yield path, value
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            yield from _tensors(item, f"{path}[{i}]")
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _tensors(item, f"{path}[{key!r}]")
    elif isinstance(value, Holder):
        yield from _tensors(value.t, f"{path}.t")


def _state(module: Any) -> dict[str, torch.Tensor]:
    cmod = getattr(module, "_c", module)
    found = attribute_values(cmod)
    assert found is not None
    out: dict[str, torch.Tensor] = {}
    for path, value in found:
        out.update(_tensors(value, path))
    return out


def _sharing(state: dict[str, torch.Tensor]) -> set[frozenset[str]]:
    """Which tensors share a storage (paths grouped by storage)."""
    groups: dict[int, set[str]] = {}
    for path, tensor in state.items():
        groups.setdefault(tensor.untyped_storage().data_ptr(), set()).add(path)
    return {frozenset(paths) for paths in groups.values()}


def _build(make: Callable[[], nn.Module], frozen: bool) -> torch.jit.ScriptModule:
    module = torch.jit.script(make().eval())
    return torch_freeze(module) if frozen else module


def _assert_same_state(mine: dict[str, torch.Tensor], theirs: dict[str, torch.Tensor]) -> None:
    assert mine.keys() == theirs.keys()
    for path, tensor in theirs.items():
        torch.testing.assert_close(mine[path], tensor, rtol=0, atol=0, msg=path)


@pytest.mark.parametrize(("make", "frozen"), CASES)
def test_sandbox_runs_shared_storage_as_torch_does(
    make: Callable[[], nn.Module], frozen: bool
) -> None:
    """Two calls and a restored third give torch's outputs and state; the copy's tensors
    share storage as the module's do (never the module's storage); the module is as it
    was."""
    torchs = _build(make, frozen)
    given = _build(make, frozen)
    before = {p: (t.untyped_storage().data_ptr(), t.clone()) for p, t in _state(given).items()}
    x = torch.ones(4)

    box = Sandbox(given)
    run = box.function(given._c._get_method("forward").graph)
    assert _sharing(_state(box.copy)) == _sharing(_state(given))
    ours = {t.untyped_storage().data_ptr() for t in _state(given).values()}
    assert ours.isdisjoint(t.untyped_storage().data_ptr() for t in _state(box.copy).values())

    with torch.no_grad():
        first = torchs(x)
        torch.testing.assert_close(run(x), first)
        torch.testing.assert_close(run(x), torchs(x))
        _assert_same_state(_state(box.copy), _state(torchs))
        box.restore()
        fresh = _build(make, frozen)
        torch.testing.assert_close(run(x), fresh(x))
        _assert_same_state(_state(box.copy), _state(fresh))

    assert _sharing(_state(box.copy)) == _sharing(_state(given))
    after = _state(given)
    assert after.keys() == before.keys()
    for path, (pointer, value) in before.items():
        assert after[path].untyped_storage().data_ptr() == pointer, path
        assert torch.equal(after[path], value), path


def test_torch_refuses_to_freeze_the_containers_case() -> None:
    """Why InContainers runs unfrozen only: torch's own freeze refuses it."""
    with pytest.raises(RuntimeError):
        torch_freeze(torch.jit.script(InContainers().eval()))


def test_a_folded_object_the_graph_writes_is_refused() -> None:
    """torch folds ``holder`` into the frozen graph, which writes its tensor: the sandbox
    does not run it (it refuses, naming the object) rather than write what is saved."""
    frozen = torch_freeze(torch.jit.script(InObject().eval()))
    kinds = [n.output().type().kind() for n in frozen.graph.findAllNodes("prim::Constant")]
    if "ClassType" not in kinds:
        pytest.skip("this torch keeps the object an attribute")
    with pytest.raises(SandboxError, match="Holder"):
        Sandbox(frozen).function(frozen.graph)


def test_two_names_stay_one_tensor_in_the_copy() -> None:
    """torch's deepcopy keeps one tensor one tensor; re-seating keeps it so."""
    box = Sandbox(torch.jit.script(TwoNames().eval()))
    assert box.copy.getattr("a")._cdata == box.copy.getattr("b")._cdata


def test_restore_puts_back_bytes_no_tensor_names() -> None:
    """A write through the view reaches bytes only the base names; restore puts them back
    as the module has them."""
    module = torch.jit.script(OffsetsAndStrides().eval())
    box = Sandbox(module)
    run = box.function(module._c._get_method("forward").graph)
    with torch.no_grad():
        run(torch.ones(4))
        box.restore()
    assert torch.equal(box.copy.getattr("base"), module.base)
    copied = box.copy.getattr("base").untyped_storage().data_ptr()
    assert copied != module.base.untyped_storage().data_ptr()


def test_a_deepcopy_would_break_what_the_sandbox_keeps() -> None:
    """The defect this guards against is torch's own deepcopy (it clones tensor objects
    one by one); if torch ever keeps storage sharing, this says the re-seating may go."""
    module = torch.jit.script(Tied().eval())
    copied = copy.deepcopy(module._c)
    shared = copied.getattr("state").untyped_storage().data_ptr() == (
        copied.getattr("alias").untyped_storage().data_ptr()
    )
    box = Sandbox(module)
    assert box.copy.getattr("state").untyped_storage().data_ptr() == (
        box.copy.getattr("alias").untyped_storage().data_ptr()
    )
    if shared:
        pytest.skip("this torch's deepcopy keeps views sharing storage")


_FOREIGN = """
import sys

import torch
from torch import nn


@torch.jit.script
class Holder:
    def __init__(self, t: torch.Tensor):
        self.t = t

    def bump(self, by: float):
        self.t.add_(by)


class InObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("state", torch.zeros(4))
        self.holder = Holder(self.state[1:3])

    def forward(self, x):
        self.holder.bump(x.sum().item())
        return x + self.state


torch.jit.save(torch.jit.script(InObject().eval()), sys.argv[1])
"""


def _foreign() -> torch.jit.ScriptModule:
    """InObject saved by another interpreter from a source deleted since: here its
    Holder class cannot be imported (as in someone else's model)."""
    import io
    import os
    import subprocess
    import sys
    import tempfile
    from pathlib import Path

    from made_once import made_once

    def make() -> dict[str, bytes]:
        with tempfile.TemporaryDirectory(prefix="freezeview-sandbox-") as folder:
            source = Path(folder) / "their_holder.py"
            source.write_text(_FOREIGN)
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            target = Path(folder) / "m.pt"
            subprocess.run([sys.executable, str(source), str(target)], check=True, env=env)
            return {"m.pt": target.read_bytes()}

    return torch.jit.load(io.BytesIO(made_once("sandbox-foreign", [_FOREIGN], make)["m.pt"]))


@pytest.mark.slow
def test_an_object_python_cannot_import_is_copied_by_torch_alone() -> None:
    """Documented limit (sandbox.py's docstring): the fields of an object whose class
    Python cannot import cannot be read with public torch APIs, so its tensors are
    torch's deepcopy's own storages. The run never reaches the module (its storages and
    values stay), but the object's write no longer shows in the buffer it views, where
    torch's module shows it."""
    torchs, given = _foreign(), _foreign()
    with pytest.raises(RuntimeError):
        given._c.getattr("holder")  # torch cannot give Python this object
    state = given.state
    pointer, value = state.untyped_storage().data_ptr(), state.clone()
    x = torch.ones(4)
    box = Sandbox(given)
    run = box.function(given._c._get_method("forward").graph)
    with torch.no_grad():
        expect = torchs(x)
        got = run(x)
    assert not torch.equal(expect, x)  # torch shows the object's write in `state`
    torch.testing.assert_close(got, x + value)  # the sandbox's copy does not
    assert given.state.untyped_storage().data_ptr() == pointer
    assert torch.equal(given.state, value)
    copied = box.copy.getattr("state")
    assert copied.untyped_storage().data_ptr() != pointer
