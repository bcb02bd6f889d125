"""Already-frozen models open everywhere: explain, freeze, export, check and the app.

A file written from ``torch.jit.freeze``'s output has no ``training`` flag and keeps its
weights as graph constants. torch loads, runs and freezes it again; freezeview says it
is already frozen, lists what freezing left (constants with their sizes and the paths
their names point to, the attributes it kept) and runs the steps that still change it.
Everything is compared with torch on the same module in the same run (the corpus's
``already-frozen`` cases cover statuses and the stepwise result).
"""

from __future__ import annotations

import json
import warnings
from pathlib import Path

import oracle
import pytest
import torch
from corpus import case_by_name
from corpus.frozen import ConvBnHead, Counter, Mlp

from freezeview.cli import main
from freezeview.engine import explain
from freezeview.engine.freeze.pipeline import Pipeline
from freezeview.engine.freeze.plan import Plan
from freezeview.engine.load import LoadedModel, check_eval, in_training_mode, load_model
from freezeview.session.local import Session


def _freeze(module: torch.jit.ScriptModule, **options: object) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        return torch.jit.freeze(module, **options)  # type: ignore[arg-type]


def _save(module: torch.jit.ScriptModule, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(module, str(path))
    return path


def _tensor_constants(graph: torch._C.Graph) -> list[torch.Tensor]:
    return [
        node.output().toIValue()
        for node in graph.nodes()
        if node.kind() == "prim::Constant" and node.output().type().kind() == "TensorType"
    ]


@pytest.fixture(scope="module")
def frozen_pt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """torch.jit.freeze's output of a conv + bn + dropout + linear model, saved."""
    torch.manual_seed(0)
    module = torch.jit.script(ConvBnHead().eval())
    return _save(_freeze(module), tmp_path_factory.mktemp("frozen") / "frozen.pt")


def test_a_frozen_module_is_in_eval_mode_and_said_to_be_frozen(frozen_pt: Path) -> None:
    loaded = load_model(frozen_pt)
    assert not loaded.module._c.hasattr("training")  # what makes every command crash
    assert loaded.already_frozen and not loaded.was_training
    assert not in_training_mode(loaded.module)
    check_eval(loaded)  # no error: freezing needs eval mode, and this module is
    plain = LoadedModel.from_module(torch.jit.script(ConvBnHead().eval()))
    assert not plain.already_frozen
    training = LoadedModel.from_module(torch.jit.script(ConvBnHead().train()))
    assert in_training_mode(training.module) and not training.already_frozen


def test_constants_are_the_frozen_graph_s_with_their_sizes(frozen_pt: Path) -> None:
    module = torch.jit.load(str(frozen_pt))
    result = explain(module)
    assert result.frozen is not None
    expected = sorted(
        (tuple(t.shape), t.numel() * t.element_size()) for t in _tensor_constants(module.graph)
    )
    got = sorted((c.shape, c.nbytes) for c in result.frozen.constants)
    assert got == expected and expected
    # A saved file keeps no value names: the constants are named as .code names them.
    code = str(module.code)
    assert all(c.name in code for c in result.frozen.constants)


def test_constants_of_an_unsaved_frozen_module_name_their_attribute_paths() -> None:
    torch.manual_seed(0)
    original = torch.jit.script(Mlp().eval())
    folded = oracle.torch_inlined_paths(original)
    result = explain(_freeze(original))
    assert result.frozen is not None
    assert {c.path for c in result.frozen.constants} == folded
    assert {c.path for c in result.frozen.constants} == {
        "fc1.weight",
        "fc1.bias",
        "fc2.weight",
        "fc2.bias",
    }


def test_attributes_freezing_kept_are_listed_and_kept_again(tmp_path: Path) -> None:
    torch.manual_seed(0)
    frozen = _freeze(torch.jit.script(Counter().eval()))
    survivors = oracle.frozen_attribute_paths(frozen) - {"training"}
    path = _save(frozen, tmp_path / "counter.pt")
    result = explain(load_model(path))
    assert result.frozen is not None
    assert set(result.frozen.kept) == survivors == {"calls"}
    again = oracle.status_from_torch(torch.jit.load(str(path)))
    assert {v.path: v.status for v in result.attributes} == again


def test_explain_says_it_is_frozen(frozen_pt: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(frozen_pt)]) == 0
    out = capsys.readouterr().out
    assert "already frozen" in out and "CONSTANTS.c0" in out
    assert main(["explain", str(frozen_pt), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    graph = torch.jit.load(str(frozen_pt)).graph
    assert len(doc["already_frozen"]["constants"]) == len(_tensor_constants(graph))


def test_freeze_runs_the_steps_torch_would(
    frozen_pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "again.pt"
    assert main(["freeze", str(frozen_pt), "-o", str(out)]) == 0
    printed = capsys.readouterr()
    assert "already frozen" in printed.out + printed.err
    ours = torch.jit.load(str(out))
    # Saved and loaded back too: a file writes some constant lists as list constructions.
    refrozen = oracle.torch_freeze(torch.jit.load(str(frozen_pt)))
    theirs = torch.jit.load(str(_save(refrozen, tmp_path / "theirs.pt")))
    assert oracle.frozen_graph_signature(ours.graph) == oracle.frozen_graph_signature(theirs.graph)
    x = torch.randn(1, 3, 8, 8)
    torch.testing.assert_close(ours(x), theirs(x))


def test_freezing_again_folds_what_the_first_freeze_left(tmp_path: Path) -> None:
    """Frozen without the numeric passes: freezing it again folds conv and bn, as torch."""
    module = case_by_name("frozen_no_optimize").build()
    before = oracle.frozen_graph_signature(module.graph)
    pipe = Pipeline(module, Plan.default())
    steps = pipe.run_all()
    assert all(s.error is None for s in steps)
    assert pipe.frozen_module is not None
    ours = oracle.frozen_graph_signature(pipe.frozen_module.graph)
    torch_frozen = oracle.torch_freeze(case_by_name("frozen_no_optimize").build())
    theirs = oracle.frozen_graph_signature(torch_frozen.graph)
    assert ours == theirs
    assert before["aten::batch_norm"] and not theirs["aten::batch_norm"]
    assert any(s.changed for s in steps if s.kind != "freeze")
    # The first step says why there is little left to do.
    assert any("already frozen" in note for note in steps[0].notes)


def test_export_and_check_work_and_say_it_is_frozen(
    frozen_pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "export"
    assert main(["export", str(frozen_pt), "-o", str(out), "--format", "dot"]) == 0
    assert (out / "index.html").is_file()
    assert "is already frozen" in capsys.readouterr().err
    expect = tmp_path / "frozen.freeze.toml"
    assert main(["check", str(frozen_pt), "--write-expect", str(expect)]) == 0
    assert main(["check", str(frozen_pt), "--expect", str(expect)]) == 0
    assert "is already frozen" in capsys.readouterr().err


def test_the_app_session_opens_explains_and_runs(frozen_pt: Path) -> None:
    session = Session(path=frozen_pt)
    opened = session.open()
    assert any("already frozen" in line for line in opened.warnings)
    assert session.explain([]) == []  # nothing is left to inline or keep
    steps = list(session.run_steps([], [p.id for p in session.available_passes() if p.default]))
    assert steps and all(not s.error for s in steps)


def test_optimize_for_inference_s_mkldnn_weights_are_listed_with_their_paths() -> None:
    """In memory (its file would not load back): MKLDNN constants are a node kind apart."""
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        module = torch.jit.optimize_for_inference(torch.jit.script(ConvBnHead().eval()))
    mkldnn = [n for n in module.graph.nodes() if n.kind() == "prim::ConstantMKLDNNTensor"]
    if not mkldnn:
        pytest.skip("this torch's optimize_for_inference made no MKLDNN constant here")
    result = explain(module)
    assert result.frozen is not None
    listed = {c.name: c for c in result.frozen.constants}
    for node in mkldnn:
        name = node.output().debugName().removeprefix("self.")
        assert name in listed, sorted(listed)
        tensor = node.t("value")
        assert listed[name].shape == tuple(tensor.shape)
        assert listed[name].nbytes == tensor.numel() * tensor.element_size()
        assert listed[name].path.split(".")[0] == "conv"  # conv.weight, conv.bias
    assert len(result.frozen.constants) == len(mkldnn) + len(_tensor_constants(module.graph))


def test_explain_and_freeze_with_inputs_do_what_torch_does(
    frozen_pt: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch.jit.freeze reads ``training``, which a frozen file lacks, and freezes the
    module again once ``.eval()`` was called on it: explain and freeze, given inputs,
    both time and write that freeze, and the load's note says what torch does."""
    loaded = torch.jit.load(str(frozen_pt))
    with pytest.raises(AttributeError):
        _freeze(loaded)
    loaded.eval()
    theirs = _save(_freeze(loaded), tmp_path / "theirs.pt")
    inputs = tmp_path / "in.pt"
    torch.save((torch.randn(1, 3, 8, 8),), str(inputs))
    note = " ".join(load_model(frozen_pt).notes)
    assert "refuses" in note and "`.eval()`" in note and "again" in note
    budget = ["--time-budget", "0.02"]
    assert main(["explain", str(frozen_pt), "--inputs", str(inputs), *budget]) == 0
    assert "frozen forward" in capsys.readouterr().out
    out = tmp_path / "again.pt"
    assert main(["freeze", str(frozen_pt), "-o", str(out), "--inputs", str(inputs), *budget]) == 0
    ours, torchs = torch.jit.load(str(out)), torch.jit.load(str(theirs))
    assert oracle.frozen_graph_signature(ours.graph) == oracle.frozen_graph_signature(torchs.graph)
