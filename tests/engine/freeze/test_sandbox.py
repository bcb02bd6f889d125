"""The sandbox runs a module's graphs as torch runs the module, on a private copy.

A graph run as a function knows no default values and no method name; a quantized
model's folded packed params are TorchScript objects Python cannot copy. Each test
builds a small module and compares the sandbox's run with torch's own call.
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path
from typing import Optional

import pytest
import torch
from corpus import case_by_name
from oracle import torch_freeze
from torch import nn

from freezeview.cli import main
from freezeview.engine.freeze.sandbox import Sandbox, SandboxError


class Defaults(nn.Module):
    """forward's trailing arguments have defaults, as nn.TransformerEncoder's do."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(3, 3)

    def forward(
        self,
        x: torch.Tensor,
        mask: Optional[torch.Tensor] = None,  # noqa: UP045 (TorchScript's spelling)
        scale: float = 0.5,
        times: int = 3,
        on: bool = True,
    ) -> torch.Tensor:
        y = self.linear(x) * scale * times
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return y if on else x


class TwoInputs(nn.Module):
    def forward(self, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return x + y


@torch.jit.script
class Box:
    def __init__(self) -> None:
        self.n = torch.zeros(1)

    def bump(self) -> None:
        self.n.add_(1)


class WritesItsBox(nn.Module):
    """torch folds ``box`` (an object) and the frozen graph writes its tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.box = Box()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.box.bump()
        return x + self.box.n


def _save(module: torch.jit.ScriptModule, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.jit.save(module, str(path))
    return path


@pytest.mark.parametrize("frozen", [False, True], ids=["unfrozen", "frozen"])
@pytest.mark.parametrize("given", [1, 2, 3, 5])
def test_missing_arguments_take_the_forwards_defaults(frozen: bool, given: int) -> None:
    """Called with fewer inputs than forward takes, the run is torch's ``m(*inputs)``."""
    module = torch.jit.script(Defaults().eval())
    if frozen:
        module = torch_freeze(module)
    x = torch.randn(2, 3)
    inputs = (x, x > 0, 2.0, 4, False)[:given]
    expect = module(*inputs)
    run = Sandbox(module).function(module._c._get_method("forward").graph)
    torch.testing.assert_close(run(*inputs), expect)


def test_torchs_error_names_forward_never_an_internal_function(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An input missing without a default is the user's error, said with forward's name."""
    source = _save(torch.jit.script(TwoInputs().eval()), tmp_path / "m.pt")
    inputs = tmp_path / "in.pt"
    torch.save((torch.ones(2),), str(inputs))
    argv = ["freeze", str(source), "-o", str(tmp_path / "o.pt"), "--inputs", str(inputs)]
    assert main([*argv, "--time-budget", "0"]) == 2
    err = capsys.readouterr().err
    assert "forward" in err and "freezeview_private" not in err


def test_freeze_with_inputs_fills_defaults(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``freeze --inputs`` gives one tensor to a forward with defaults: it runs, and
    every step's outputs are torch's."""
    module = torch.jit.script(Defaults().eval())
    source = _save(module, tmp_path / "m.pt")
    inputs = tmp_path / "in.pt"
    torch.save((torch.randn(2, 3),), str(inputs))
    out = tmp_path / "o.pt"
    argv = ["freeze", str(source), "-o", str(out), "--inputs", str(inputs), "--json"]
    assert main([*argv, "--time-budget", "0"]) == 0
    *steps, result = [json.loads(line) for line in capsys.readouterr().out.strip().splitlines()]
    numerics = [step["numerics"] for step in steps if step["numerics"]]
    assert numerics and all(n["allclose"] and not n["note"] for n in numerics)
    assert result["second_call"]["same"] is True


@pytest.mark.parametrize("name", ["quant_static_conv_bn_relu_fused", "quant_dynamic_lstm"])
def test_quantized_packed_params_run_as_torch_runs_them(name: str) -> None:
    """torch folds packed params (torchbind objects only quantized ops read): the
    frozen graph runs on the sandbox and gives torch's outputs, twice."""
    case = case_by_name(name)
    frozen = torch_freeze(case.build())
    inputs = tuple(case.inputs())
    run = Sandbox(frozen).function(frozen.graph)
    with torch.no_grad():
        expect = frozen(*inputs)
        torch.testing.assert_close(run(*inputs), expect)
        torch.testing.assert_close(run(*inputs), expect)


def test_a_written_object_constant_is_refused_naming_its_writer() -> None:
    """An object constant the frozen graph writes cannot be copied: the refusal names
    the object's type and the writing node, and says nothing of the inputs."""
    frozen = torch_freeze(torch.jit.script(WritesItsBox().eval()))
    kinds = [n.output().type().kind() for n in frozen.graph.findAllNodes("prim::Constant")]
    if "ClassType" not in kinds:
        pytest.skip("this torch keeps the object an attribute")
    with pytest.raises(SandboxError) as caught:
        Sandbox(frozen).function(frozen.graph)
    said = str(caught.value)
    assert "Box" in said and "aten::add_" in said and "input" not in said


def test_explain_and_freeze_say_why_a_written_object_is_not_run(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The refusal is said as what it is (the inputs fit: torch runs them), explain
    exits 0 with its explanation, and freeze's verdict does not ask for inputs."""
    module = torch.jit.script(WritesItsBox().eval())
    x = (torch.zeros(1),)
    module(*x)  # torch runs the inputs
    if "ClassType" not in [
        n.output().type().kind() for n in torch_freeze(module).graph.findAllNodes("prim::Constant")
    ]:
        pytest.skip("this torch keeps the object an attribute")
    source = _save(torch.jit.script(WritesItsBox().eval()), tmp_path / "m.pt")
    inputs = tmp_path / "in.pt"
    torch.save(x, str(inputs))
    budget = ["--time-budget", "0.01"]
    assert main(["explain", str(source), "--inputs", str(inputs), *budget]) == 0
    said = capsys.readouterr()
    assert "latency not measured" in said.out and "Box" in said.out
    assert "do not fit" not in said.out + said.err
    out = tmp_path / "o.pt"
    assert main(["freeze", str(source), "-o", str(out), "--inputs", str(inputs), *budget]) == 0
    said = capsys.readouterr()
    assert "give sample inputs" not in said.out and "failed on the inputs" not in said.out
