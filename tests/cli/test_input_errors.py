"""Sample inputs the model rejects: one sentence everywhere, with torch's own cause.

torch is the oracle: each test runs the model's forward on the same inputs itself and
takes the last line of torch's own message (the cause, after the TorchScript
interpreter's generic first line and traceback); freezeview's sentence must quote it.
The models raise an error of the test's own text, or are an embedding fed floats.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

import freezeview
from freezeview.cli import main
from freezeview.engine.plumbing.errors import BadInputError, inputs_rejected, torch_cause


class _Picky(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if x.dim() > 1:
            raise RuntimeError("custom cause: this model takes vectors only")
        return x * 2


def _torch_last_line(module: torch.nn.Module, *inputs: torch.Tensor) -> str:
    """What torch's own exception's message ends with, on these inputs."""
    with pytest.raises(Exception) as info:
        module(*inputs)
    return str(info.value).strip().splitlines()[-1].strip()


def _flat(text: str) -> str:
    return " ".join(text.split())


@pytest.fixture()
def picky(tmp_path: Path) -> Path:
    path = tmp_path / "picky.pt"
    torch.jit.save(torch.jit.script(_Picky().eval()), str(path))
    return path


@pytest.fixture()
def embedding(tmp_path: Path) -> Path:
    path = tmp_path / "embedding.pt"
    torch.jit.save(torch.jit.script(torch.nn.Embedding(10, 4).eval()), str(path))
    return path


def test_torch_cause_is_the_last_line_of_an_interpreter_error() -> None:
    module = torch.jit.script(_Picky().eval())
    last = _torch_last_line(module, torch.randn(2, 3))
    assert "custom cause: this model takes vectors only" in last
    with pytest.raises(Exception) as info:
        module(torch.randn(2, 3))
    assert torch_cause(info.value) == last
    # A one-line message is its own cause.
    assert torch_cause(ValueError("plain words")) == "plain words"
    assert torch_cause(ValueError()) == "ValueError"


def test_freeze_says_torchs_cause_for_a_forward_that_rejects_the_inputs(
    picky: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last = _torch_last_line(torch.jit.load(str(picky)), torch.randn(1, 8))
    code = main(["freeze", str(picky), "-o", str(tmp_path / "f.pt"), "--input-shape", "1,8"])
    err = _flat(capsys.readouterr().err)
    assert code == 2
    assert _flat(last) in err
    assert "--input-shape 1,8:int64" not in err  # not a dtype matter: no dtype hint


def test_float_indices_quote_torch_and_hint_at_the_dtype_suffix(
    embedding: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    last = _torch_last_line(torch.jit.load(str(embedding)), torch.randn(1, 8))
    out = tmp_path / "f.pt"
    assert main(["freeze", str(embedding), "-o", str(out), "--input-shape", "1,8"]) == 2
    freeze_err = _flat(capsys.readouterr().err)
    assert _flat(last) in freeze_err
    assert "--input-shape 1,8:int64" in freeze_err
    # The hint works: with the suffix torch takes the inputs.
    argv = ["freeze", str(embedding), "-o", str(out), "--input-shape", "1,8:int64"]
    assert main([*argv, "--time-budget", "0"]) == 0
    capsys.readouterr()
    # explain words it the same.
    assert main(["explain", str(embedding), "--input-shape", "1,8", "--time-budget", "0.01"]) == 2
    assert _flat(capsys.readouterr().err) == freeze_err


def test_the_python_api_raises_the_same_sentence(embedding: Path) -> None:
    x = torch.randn(1, 8)
    module = torch.jit.load(str(embedding))
    with pytest.raises(Exception) as info:
        module(x)
    expected = inputs_rejected(info.value, (x,)).message
    with pytest.raises(BadInputError) as raised:
        freezeview.freeze(str(embedding), inputs=(x,))
    assert raised.value.message == expected
