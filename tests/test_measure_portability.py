"""Save, load in a fresh process, compare (freezeview/engine/measure/portability.py).

torch is the oracle: what it saves, what a fresh interpreter loads back, what that returns.
"""

from __future__ import annotations

import io
import warnings

import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net
from torch import nn

from freezeview.engine.measure.portability import portability, roundtrip, unsaveable_reason


def _frozen(optimize: bool = False) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(small_conv_net())
        return torch.jit.optimize_for_inference(frozen) if optimize else frozen


@pytest.mark.slow
def test_frozen_model_round_trips_with_the_same_outputs(tmp_path) -> None:
    """A fresh process loads what torch.jit.save wrote and returns the same outputs."""
    frozen = _frozen()
    x = torch.randn(SMALL_INPUT_SHAPE)
    expected = frozen(x)
    assert roundtrip(frozen, (x,), expected) == ("same", "")
    # A file written already is loaded as it is (freeze -o): a wrong file shows.
    other = tmp_path / "other.pt"
    torch.jit.save(torch.jit.freeze(torch.jit.script(nn.Linear(3, 3).eval())), str(other))
    outcome, sentence = roundtrip(frozen, (x,), expected, saved=other)
    assert outcome == "unsaveable" and sentence.endswith(".")
    report = portability(frozen, {"forward": frozen.graph}, roundtrip_result=("same", ""))
    assert report.saveable and report.portable and report.roundtrip == "same"
    assert report.devices == ("cpu",) and report.dtypes == ("float32",)


def test_mkldnn_constants_are_unsaveable_as_torch_says() -> None:
    """Where freezeview says unsaveable, torch's own load of the saved bytes fails."""
    optimized = _frozen(optimize=True)
    if not unsaveable_reason({"forward": optimized.graph}):
        pytest.skip("this torch build made no MKLDNN constants")
    buffer = io.BytesIO()
    torch.jit.save(optimized, buffer)
    buffer.seek(0)
    with pytest.raises(Exception):  # noqa: B017 - torch's own error; its text varies
        torch.jit.load(buffer)
    x = torch.randn(SMALL_INPUT_SHAPE)
    outcome, sentence = roundtrip(optimized, (x,), optimized(x))
    assert outcome == "unsaveable" and "MKLDNN" in sentence
    report = portability(optimized, {"forward": optimized.graph}, backend_step="convert_to_mkldnn")
    assert not report.saveable and not report.portable
    assert report.roundtrip == "unsaveable" and report.step == "convert_to_mkldnn"
