"""Time per node (freezeview/engine/measure/node_time.py, ``freeze --profile``).

torch is the oracle: the frozen graph torch's own ``torch.jit.freeze`` gives (which
nodes Static Runtime times), the ops torch.profiler records for the scripted module
itself, Static Runtime's own per-kind percentages and freezeview's own timing loop, all
measured in the same run. The fast tests hold the flags' refusals, that nothing profiles
without ``--profile``, and the comparisons' arithmetic.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.measure import node_clocks, node_time
from freezeview.engine.measure.node_time_values import (
    STATIC_RUNTIME,
    TORCH_PROFILER,
    NodeProfile,
    NodeTime,
    change_word,
)

SCHEMA = ROOT / "docs" / "schemas" / "node-time.schema.json"


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.relu(self.bn1(self.conv1(x)))
        out = self.bn2(self.conv2(out))
        out += x
        return self.relu(out)


class ResNetLike(nn.Module):
    """A ResNet-shaped net from torch.nn alone: a stem, two residual blocks, the head.

    No max pool: on a shared machine its time swings from block to block more than any
    conv's, and a comparison of shares would measure that."""

    def __init__(self, c: int = 32) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(3, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.relu = nn.ReLU(inplace=True)
        self.layer1 = nn.Sequential(_Block(c), _Block(c))
        self.avgpool = nn.AdaptiveAvgPool2d((1, 1))
        self.fc = nn.Linear(c, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.relu(self.bn1(self.conv1(x)))
        x = self.layer1(x)
        return self.fc(torch.flatten(self.avgpool(x), 1))


def resnet_like(seed: int = 0) -> torch.jit.ScriptModule:
    torch.manual_seed(seed)
    return torch.jit.script(ResNetLike().eval())


SHAPE = (1, 3, 32, 32)


# --- fast: flags, arithmetic ----------------------------------------------------------


def _node(i: int, kind: str, ms: float, spread: float = 0.0) -> NodeTime:
    return NodeTime(i, kind, "m", "", ms, spread, 0.0)


def _profile(step: int | None, nodes: list[NodeTime]) -> NodeProfile:
    total = sum(n.ms for n in nodes)
    kinds = node_time._kinds(nodes, total)
    return NodeProfile(
        step, "s", "s", TORCH_PROFILER, "", 1, 3, 5, 5, total, tuple(nodes), kinds, 8, 0.1
    )


def test_a_change_inside_the_noise_is_the_same() -> None:
    assert change_word(1.0, 1.04, 0.0) == "same"  # the 5 % floor
    assert change_word(1.0, 1.5, 0.6) == "same"
    assert change_word(1.0, 1.5, 0.1) == "slower"
    assert change_word(1.0, 0.5, 0.1) == "faster"


def test_compare_profiles_names_gone_new_and_moved_nodes() -> None:
    before = _profile(None, [_node(1, "aten::conv2d", 2.0), _node(2, "aten::batch_norm", 1.0)])
    after = _profile(3, [_node(7, "aten::conv2d", 1.0), _node(8, "aten::add", 0.5)])
    change = node_time.compare_profiles(before, after, {1: 7})
    words = {(n.kind, n.word) for n in change.nodes}
    assert words == {("aten::conv2d", "faster"), ("aten::batch_norm", "gone"), ("aten::add", "new")}
    kinds = {k.kind: (k.before_count, k.after_count) for k in change.kinds}
    assert kinds["aten::batch_norm"] == (1, 0) and kinds["aten::add"] == (0, 1)
    assert change.word == "faster" and change.against is None and change.step == 3


def test_ops_align_with_nodes_in_execution_order() -> None:
    nodes = [(0, "prim::Constant"), (1, "aten::conv2d"), (2, "prim::If"), (3, "aten::relu")]
    rows = [("aten::conv2d", 0, 5, ()), ("aten::detach", 5, 6, ()), ("aten::relu", 6, 8, ())]
    assert [(i, r[0]) for i, r in node_clocks.align_ops(rows, nodes)] == [
        (1, "aten::conv2d"),
        (3, "aten::relu"),
    ]
    # Nesting follows from the times: the ops inside conv2d are not top-level.
    marker = ("mark", 0, 100, ())
    inner = [("forward", 1, 90, ()), ("aten::conv2d", 2, 40, ()), ("aten::_conv", 3, 39, ())]
    inner.append(("aten::relu", 41, 50, ()))
    top = node_clocks.top_ops([marker, *inner], marker, {"aten::conv2d", "aten::relu"})
    assert [r[0] for r in top] == ["aten::conv2d", "aten::relu"]


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        ([], "needs sample inputs"),
        (["--input-shape", "1,3,8,8", "--time-budget", "0"], "--time-budget above 0"),
    ],
)
def test_profile_refuses_to_run_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], extra: list[str], said: str
) -> None:
    code = main(
        ["freeze", str(tmp_path / "m.pt"), "-o", str(tmp_path / "o.pt"), "--profile", *extra]
    )
    err = capsys.readouterr().err
    assert code == 2 and said in err and "Traceback" not in err


def test_without_profile_nothing_is_profiled(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def refuse(*args: Any, **kwargs: Any) -> Any:
        raise AssertionError("profiled without --profile")

    monkeypatch.setattr(node_time, "profile_graph", refuse)
    monkeypatch.setattr(node_time.NodeTimer, "observe", refuse)
    monkeypatch.setattr(torch.profiler, "profile", refuse)
    monkeypatch.setattr(torch._C, "_jit_to_static_module", refuse, raising=False)
    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(nn.Sequential(nn.Linear(4, 4), nn.ReLU()).eval()), str(model))
    assert main(["freeze", str(model), "-o", str(tmp_path / "o.pt"), "--json"]) == 0
    assert all(json.loads(x)["type"] != "node_time" for x in capsys.readouterr().out.splitlines())


# --- slow: against torch --------------------------------------------------------------


@pytest.fixture(scope="module")
def timed() -> dict[str, Any]:
    """One pipeline run of the ResNet-like net, profiled at one thread."""
    from freezeview.engine.freeze import Pipeline, Plan, default_passes

    module = resnet_like()
    before = {k: v.clone() for k, v in module.state_dict().items()}
    x = torch.randn(SHAPE)
    pipe = Pipeline(module, Plan(passes=default_passes(True, False)), (x,))
    # Ten blocks or so: the medians stay put when the suite's other workers load the CPU.
    timer = node_time.NodeTimer(pipe, budget=0.1)
    for step in pipe.run():
        timer.observe(step)
    return {"module": module, "x": x, "timer": timer, "before": before}


@pytest.mark.slow
def test_static_runtime_times_the_nodes_of_torchs_frozen_graph(timed: dict[str, Any]) -> None:
    timer = timed["timer"]
    final = timer.profiles[-1]
    assert final.tool == STATIC_RUNTIME, final.why
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(resnet_like())
    torch_nodes = [n.kind() for n in frozen.graph.nodes() if n.kind() != "prim::Constant"]
    assert [n.kind for n in final.nodes] == torch_nodes
    # Per kind, within 3 points of Static Runtime's own percentages, every kind above 2 %.
    ours: Counter[str] = Counter()
    for k in final.kinds:
        ours[node_clocks.static_runtime_kind(k.kind)] += 100 * k.share
    theirs = final.torch_percent
    big = {k for k, v in theirs.items() if v > 2} | {k for k, v in ours.items() if v > 2}
    assert big and all(abs(ours[k] - theirs.get(k, 0.0)) <= 3 for k in big), (ours, theirs)


@pytest.mark.slow
def test_the_profiler_times_the_ops_torch_records_and_adds_up(timed: dict[str, Any]) -> None:
    unfrozen = timed["timer"].unfrozen
    assert unfrozen is not None and unfrozen.tool == TORCH_PROFILER
    # The ops torch.profiler records for one call of the scripted module itself.
    module, x = resnet_like(), timed["x"]
    with torch.inference_mode():
        for _ in range(3):
            module(x)
        with torch.profiler.profile() as prof, torch.profiler.record_function("here"):
            module(x)
    mark = next(e for e in prof.events() if e.name == "here")
    ops = list(mark.cpu_children)
    while len(ops) == 1 and not ops[0].name.startswith("aten::"):
        ops = list(ops[0].cpu_children)
    assert Counter(n.kind for n in unfrozen.nodes) == Counter(e.name for e in ops)
    # The nodes' medians add up to the forward as torch.profiler spans it (the same
    # forwards) within 15 %. Against freezeview's timing loop, seconds apart, only on a
    # quiet machine: benchmarks/bench_node_time.py holds that one.
    assert abs(unfrozen.total_ms / unfrozen.forward_ms - 1) <= 0.15, unfrozen


@pytest.mark.slow
def test_nodes_map_to_the_unfrozen_module_through_the_diff(timed: dict[str, Any]) -> None:
    timer = timed["timer"]
    unfrozen = {n.id: n for n in timer.unfrozen.nodes}
    final = timer.profiles[-1]
    convs = [n for n in final.nodes if n.kind == "aten::conv2d"]
    assert len(convs) == 5
    for node in convs:
        assert node.unfrozen in unfrozen
        assert (unfrozen[node.unfrozen].kind, unfrozen[node.unfrozen].scope) == (
            node.kind,
            node.scope,
        )
    # conv -> batchnorm took the batch norms away: the step's change says so.
    fold = next(c for c in timer.changes.values() if c.title.startswith("conv -> batchnorm"))
    gone = {(k.kind, k.before_count, k.after_count) for k in fold.kinds}
    assert ("aten::batch_norm", 5, 0) in gone
    # The model was never run: its state is as it was.
    now = timed["module"].state_dict()
    assert all(torch.equal(now[k], v) for k, v in timed["before"].items())


@pytest.mark.slow
def test_freeze_profile_json_trace_and_the_written_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "net.pt"
    torch.jit.save(small_conv_net(), str(model))
    given = model.read_bytes()
    out, trace = tmp_path / "a" / "frozen.pt", tmp_path / "trace"
    shape = ",".join(map(str, SMALL_INPUT_SHAPE))
    argv = ["freeze", str(model), "-o", str(out), "--input-shape", shape, "--time-budget"]
    assert main([*argv, "0.01", "--json", "--profile", "--trace", str(trace)]) == 0
    docs = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    lines = [d for d in docs if d["type"] == "node_time"]
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    for line in lines:
        validator.validate(line)
    assert lines[0]["step"] is None and lines[0]["change"] is None
    assert all(line["change"] is not None for line in lines[1:])
    # Each profile follows its step's line.
    steps = [d["index"] if d["type"] == "step" else d["step"] for d in docs[:-1]]
    assert all(s is None or s <= after for s, after in zip(steps[1:], steps[1:][1:], strict=False))
    for line in lines:
        events = json.loads(Path(line["trace"]).read_text())["traceEvents"]
        assert any(e.get("name") == "aten::conv2d" for e in events)
    # The input untouched; what is written is torch's freeze of it, saved under that name.
    assert model.read_bytes() == given
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.freeze(torch.jit.load(str(model)))
    (tmp_path / "b").mkdir()
    torch.jit.save(theirs, str(tmp_path / "b" / "frozen.pt"))
    assert out.read_bytes() == (tmp_path / "b" / "frozen.pt").read_bytes()
