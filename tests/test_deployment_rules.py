"""``check``'s ``[deployment]`` rules (freezeview/engine/ci/deployment_rules.py and the
``[deployment]`` section of expectations.py), held against torch's real behaviour:
the constants of ``torch.jit.freeze``'s graph, what ``optimize_for_inference`` makes,
what a fresh process loads back. Timings are checked for consistency, never speed.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch
from measure_models import small_conv_net

from freezeview.cli import main
from freezeview.engine.ci.deployment_rules import constant_bytes_limit, hold_deployment_rule
from freezeview.engine.ci.expectations import ExpectationsError, Rule, read_expectations
from freezeview.engine.freeze import REGISTRY
from freezeview.engine.measure import constant_bytes
from freezeview.engine.measure.measure_values import Latency, Measurement

SHAPE = ["--input-shape", "1,3,16,16"]


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The small model and the expectations --write-expect writes for it today."""
    folder = tmp_path_factory.mktemp("deployment")
    model = folder / "small.pt"
    torch.jit.save(small_conv_net(), str(model))
    expect = folder / "small.toml"
    argv = ["check", str(model), "--write-expect", str(expect), *SHAPE, "--time-budget", "0.02"]
    assert main(argv) == 0
    return model, expect


@pytest.mark.slow
def test_written_defaults_hold_and_match_torch(
    written: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    model, expect = written
    text = expect.read_text()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        reference = torch.jit.freeze(small_conv_net())
    today = constant_bytes([reference.graph])
    # A limit with room above torch's figure today, and today's figure in a comment.
    assert f"max_constant_bytes = {constant_bytes_limit(today)}" in text
    assert f"# today {today:,} bytes" in text
    assert today < constant_bytes_limit(today) <= today + max(today // 10, 1024) + 1024
    assert "portable = true" in text and "roundtrip = true" in text
    assert "max_latency_ratio = " in text and "time_budget = 0.02" in text
    kinds = {r.kind for r in read_expectations(expect, set(REGISTRY)).rules}
    assert {"max-latency-ratio", "max-constant-bytes", "portable", "roundtrip"} <= kinds
    # Held back as written, the latency bound widened: whether this machine is busy right
    # now is not what this test is about (structure, never speed).
    held = expect.parent / "held.toml"
    held.write_text(re.sub(r"max_latency_ratio = [\d.]+", "max_latency_ratio = 1000.0", text))
    capsys.readouterr()
    assert main(["check", str(model), "--expect", str(held)]) == 0


def test_optimize_for_inference_breaks_them_naming_the_mkldnn_step(
    written: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model, expect = written
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        optimized = torch.jit.optimize_for_inference(torch.jit.freeze(small_conv_net()))
    if "prim::ConstantMKLDNNTensor" not in str(optimized.graph):
        pytest.skip("this torch build makes no MKLDNN constants")
    text = expect.read_text().replace(
        "optimize_for_inference = false", "optimize_for_inference = true"
    )
    # No latency rule: whether MKLDNN is slower here is the machine's business.
    text = "\n".join(line for line in text.splitlines() if "max_latency" not in line)
    broken = tmp_path / "ofi.toml"
    broken.write_text(text + "\n")
    capsys.readouterr()
    assert main(["check", str(model), "--expect", str(broken)]) == 1
    out = capsys.readouterr().out
    assert "deployment.portable" in out and "from step convert_to_mkldnn" in out
    assert "deployment.roundtrip" in out and "unsaveable" in out
    # torch's optimized graph holds more constant bytes than the frozen one: broken too,
    # and the step named is one of the inference passes that added them.
    if constant_bytes([optimized.graph]) > constant_bytes(
        [torch.jit.freeze(small_conv_net()).graph]
    ):
        line = next(x for x in out.splitlines() if x.strip().startswith("constant bytes"))
        assert "transpose_frozen_linear" in line or "convert_to_mkldnn" in line


@pytest.mark.parametrize(
    ("section", "words"),
    [
        ("[deployment]\nmax_latency_ratio = 1.0\n", "give [numerics]"),
        ("[deployment]\nroundtrip = true\n", "give [numerics]"),
        ("[deployment]\nthreads = 0\n", "deployment.threads"),
        ('[deployment]\nmax_constant_bytes = "big"\n', "deployment.max_constant_bytes"),
        ("[deployment]\nportable = 1\n", "deployment.portable"),
        ("[deployment]\nfast = true\n", "unknown key 'fast'"),
    ],
)
def test_bad_deployment_sections_are_one_sentence_with_the_line(
    tmp_path: Path, section: str, words: str
) -> None:
    path = tmp_path / "e.toml"
    path.write_text("[plan]\npreserve = []\n\n" + section)
    with pytest.raises(ExpectationsError) as err:
        read_expectations(path, set(REGISTRY))
    message = str(err.value)
    assert words in message and "line 5" in message and "\n" not in message


def _lat(median: float) -> Latency:
    return Latency(median, median, median, 0.0, 10, 1)


def test_latency_rule_holds_inside_the_noise_and_names_the_slowest_step() -> None:
    rule = Rule("max-latency-ratio", "", 1.0, 3)
    same = Measurement(1, 0.1, _lat(1.0), {2: _lat(1.02)}, names={2: "cleanup"})
    assert hold_deployment_rule(rule, same) is None
    slower = Measurement(
        1,
        0.1,
        _lat(1.0),
        {2: _lat(0.6), 14: _lat(2.4)},
        titles={2: "clean-up", 14: "to MKLDNN"},
        names={2: "cleanup", 14: "convert_to_mkldnn"},
    )
    broken = hold_deployment_rule(rule, slower)
    assert broken is not None and broken.actual == "2.40x"
    assert "step 14 (convert_to_mkldnn" in broken.message
    assert hold_deployment_rule(Rule("max-latency-ratio", "", 2.5, 3), slower) is None
    assert hold_deployment_rule(rule, None) is not None
