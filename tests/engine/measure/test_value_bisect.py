"""Where the numbers move (freezeview/engine/measure/value_bisect.py, ``freeze --bisect``).

torch is the oracle: for each model the test builds the two graphs itself with torch
(``torch.jit.freeze(optimize_numerics=False)``, then the one fold pass torch runs), matches
their computing nodes by kind and position among the nodes of that kind, exposes every
matched value as an extra graph output, runs both with torch and compares them in graph
order. The node freezeview names must be the first one that comparison finds, with the
same difference. The fast tests hold the refusal without inputs and the comparison's
rules (dtype changes, NaN, plain values).
"""

from __future__ import annotations

import json
import math
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.freeze import Pipeline
from freezeview.engine.measure.value_bisect import ValueBisector
from freezeview.engine.measure.value_exposure import compare_value

SCHEMA = ROOT / "docs" / "schemas" / "numerics-bisect.schema.json"
_READS = ("prim::Constant", "prim::GetAttr", "prim::ListConstruct")


class ConvBn(nn.Module):
    """conv -> batchnorm -> relu -> sum, in half precision with a tiny running variance:
    folding the batchnorm into the conv moves the outputs past tolerance."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))).sum(1)


class ConvAdd(nn.Module):
    """conv + a float64 buffer: eager type promotion gives float64; torch's conv-add
    fold puts the buffer into the conv's float32 bias, and the output comes back float32."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.register_buffer(
            "shift", torch.linspace(-2, 2, 8, dtype=torch.float64).reshape(1, 8, 1, 1)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x) + self.shift)


def conv_bn_half() -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    model = ConvBn().half().eval()
    assert model.bn.running_var is not None
    with torch.no_grad():
        model.bn.running_var.uniform_(1e-3, 1e-2)
        model.bn.weight.uniform_(5, 10)
    return torch.jit.script(model)


def conv_add_double() -> torch.jit.ScriptModule:
    torch.manual_seed(0)
    return torch.jit.script(ConvAdd().eval())


# --- the oracle: torch's own graphs, values exposed by the test ------------------------


def _computing(graph: torch._C.Graph) -> list[tuple[torch._C.Node, tuple[str, int]]]:
    """Top-level computing nodes with their key: (kind, position among that kind)."""
    seen: Counter[str] = Counter()
    out = []
    for node in graph.nodes():
        if node.kind() in _READS:
            continue
        out.append((node, (node.kind(), seen[node.kind()])))
        seen[node.kind()] += 1
    return out


def _run_exposed(
    module: torch.jit.ScriptModule, graph: torch._C.Graph, keys: list[Any], x: Any
) -> dict[Any, Any]:
    copy = graph.copy()
    by_key = {key: node for node, key in _computing(copy)}
    values = [next(iter(copy.outputs()))] + [by_key[k].outputsAt(0) for k in keys]
    packed = copy.create("prim::TupleConstruct", values, 1)
    packed.insertBefore(copy.return_node())
    packed.output().setType(torch._C.TupleType([v.type() for v in values]))
    copy.eraseOutput(0)
    copy.registerOutput(packed.output())
    fn = torch._C._create_function_from_graph("forward", copy)
    with torch.no_grad():
        got = fn(module._c, x)
    return dict(zip(keys, got[1:], strict=True))


def torch_first_difference(
    scripted: torch.jit.ScriptModule, fold: str, x: torch.Tensor
) -> tuple[tuple[str, int], float, torch.dtype, torch.dtype]:
    """The first computing node of the folded graph whose value differs from its match
    in the graph before the fold, found by torch alone: its key, max abs difference and
    the two dtypes."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(scripted, optimize_numerics=False)
    before = frozen.graph.copy()
    after = before.copy()
    getattr(torch._C, fold)(after)
    keys_before = {key for _, key in _computing(before)}
    keys = [key for _, key in _computing(after) if key in keys_before]
    # Non-in-place models: a value exposed at the end is the value the node made.
    got_b = _run_exposed(frozen, before, keys, x)
    got_a = _run_exposed(frozen, after, keys, x)
    for key in keys:
        b, a = got_b[key], got_a[key]
        if b.dtype != a.dtype or not torch.equal(b.double(), a.double()):
            return key, float((b.double() - a.double()).abs().max()), b.dtype, a.dtype
    raise AssertionError("torch finds no differing value")


def _key_of(snapshot: Any, node_id: int) -> tuple[str, int]:
    kind = snapshot.node(node_id).kind
    top = [n for n in snapshot.block.nodes if n.kind == kind]
    return kind, [n.id for n in top].index(node_id)


# --- slow: the models run ---------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize(
    "measured",
    [("--time-budget", "0"), ("--time-budget", "0.01", "--profile")],
    ids=["bisect", "bisect-and-profile"],
)
def test_freeze_names_the_node_torch_finds_when_conv_bn_moves_the_outputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], measured: tuple[str, ...]
) -> None:
    """With --profile too: timing a step's nodes must leave its graphs to the bisection."""
    model = tmp_path / "half.pt"
    torch.jit.save(conv_bn_half(), str(model))
    given = model.read_bytes()
    out = tmp_path / "a" / "frozen.pt"
    argv = ["freeze", str(model), "-o", str(out), "--input-shape", "1,3,8,8:float16"]
    assert main([*argv, *measured, "--json"]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    found = [d for d in docs if d["type"] == "numerics_bisect"]
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for line in found:
        validator.validate(line)
    # Bisected by itself, once: the step that took the outputs past tolerance.
    steps = {d["index"]: d for d in docs if d["type"] == "step"}
    crossing = [i for i, s in steps.items() if s["numerics"] and not s["numerics"]["allclose"]]
    assert [f["step"] for f in found] == [crossing[0]] and not found[0]["asked"]
    line = found[0]
    assert steps[line["step"]]["name"] == "fold_conv_bn" and line["status"] == "named"
    # The oracle: torch's own graphs, every matched value exposed and compared in order.
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0)).half()
    key, worst, _, _ = torch_first_difference(
        torch.jit.load(str(model)), "_jit_pass_fold_frozen_conv_bn", x
    )
    assert (line["node"]["kind"], line["node"]["scope"]) == (key[0], "conv")
    assert line["node"]["diff"]["max_abs"] == pytest.approx(worst, rel=1e-6)
    assert line["chain"][0]["id"] == line["node"]["id"] and len(line["chain"]) >= 2
    assert {i["name"].split("_fused")[0] for i in line["inputs"]} == {"conv.weight", "conv.bias"}
    # The input untouched; what is written is torch's freeze of it, saved under that name.
    assert model.read_bytes() == given
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.freeze(torch.jit.load(str(model)))
    (tmp_path / "b").mkdir()
    torch.jit.save(theirs, str(tmp_path / "b" / "frozen.pt"))
    assert out.read_bytes() == (tmp_path / "b" / "frozen.pt").read_bytes()


@pytest.mark.slow
def test_bisect_names_the_node_of_a_fold_that_drops_a_dtype_promotion() -> None:
    scripted = conv_add_double()
    x = torch.randn(1, 3, 8, 8)
    before_state = {k: v.clone() for k, v in scripted.state_dict().items()}
    pipe = Pipeline(scripted, None, (x,))
    bisector = ValueBisector(pipe, every=True)
    snapshots = {}
    for step in pipe.run():
        if bisector.observe(step) is not None:
            snapshots[step.index] = step.snapshot
    moved = [b for b in bisector.bisections if b.status != "same"]
    assert [b.name for b in moved] == ["fold_conv_add_or_sub"]
    found = moved[0]
    key, worst, _, _ = torch_first_difference(scripted, "_jit_pass_fold_frozen_conv_add_or_sub", x)
    assert found.status == "named" and found.node is not None and found.node.diff is not None
    assert _key_of(snapshots[found.step], found.node.id) == key
    assert found.node.diff.max_abs == pytest.approx(worst, rel=1e-6)
    # The outputs' dtype is what torch's two modules give.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        eager, frozen = scripted(x), torch.jit.freeze(scripted)(x)
    assert found.outputs is not None
    assert (found.outputs.dtype_before, found.outputs.dtype_after) == (
        str(eager.dtype).replace("torch.", ""),
        str(frozen.dtype).replace("torch.", ""),
    )
    assert found.outputs.dtype_changed == (eager.dtype != frozen.dtype)
    # Every step the graph did not move agrees bit for bit, and the module never ran.
    assert all(b.differ == 0 for b in bisector.bisections if b.status == "same")
    assert all(torch.equal(v, before_state[k]) for k, v in scripted.state_dict().items())


# --- fast: refusal and comparison rules ---------------------------------------------------


def test_bisect_refuses_to_run_without_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code = main(["freeze", str(tmp_path / "m.pt"), "-o", str(tmp_path / "o.pt"), "--bisect"])
    err = capsys.readouterr().err
    assert code == 2 and "--bisect needs sample inputs" in err
    assert len(err.strip().splitlines()) == 1 and not (tmp_path / "o.pt").exists()


def test_compare_value_counts_dtype_nan_and_plain_values() -> None:
    a = torch.tensor([1.0, float("nan"), 3.0])
    assert compare_value(a, a.clone()).equal
    moved = compare_value(a, torch.tensor([1.0, float("nan"), 3.5]))
    assert not moved.equal and moved.max_abs == 0.5 and moved.max_rel == pytest.approx(0.5 / 3)
    recast = compare_value(a.half(), a.float())
    assert not recast.equal and recast.max_abs == 0.0 and recast.dtype_changed
    assert "float16 -> float32" in recast.text()
    assert math.isinf(compare_value(a, torch.tensor([1.0, 2.0, 3.0])).max_abs or 0.0)
    assert compare_value([1, 2], [1, 2]).equal and not compare_value(3, 4).equal
    assert compare_value(None, torch.zeros(2)).text() == "None -> float32 tensor [2]"
