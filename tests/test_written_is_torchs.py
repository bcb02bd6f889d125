"""The file ``freezeview freeze`` writes is torch's freeze of the untouched input.

freezeview runs the model for numerics, latency and the round trip when sample inputs
are given. A frozen graph can write into its own constants (a tensor held in a list, a
dict or a tuple; a forked call; an interface), and frozen modules share tensors with the
model they came from: none of those runs may reach the written file. Each test writes a
model to disk, runs the real command on it, and compares the file (loaded fresh) with
``torch.jit.freeze(torch.jit.load(input))`` saved and loaded: node kinds and counts, kept
attributes, their values and which of them share storage, and the outputs of two
successive calls.
"""

from __future__ import annotations

import json
import warnings
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import torch
from corpus import CASES, Case, case_by_name
from oracle import attribute_paths, frozen_graph_signature, torch_freeze
from torch import nn

from freezeview.cli import main


class ListWrite(nn.Module):
    """torch's own freezing test: torch folds ``a`` and the graph writes its constant."""

    def __init__(self) -> None:
        super().__init__()
        self.a = [torch.tensor([1, 2, 3, 4, 5, 6])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a[0][1] += 10
        return self.a[0].sum()


class Aliased(nn.Module):
    """``a`` and ``b[0]`` are one tensor; torch keeps both, still sharing it."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.tensor([1, 2, 3, 4, 5, 6])
        self.b = [self.a, torch.tensor([10])]

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.a[1] += 10
        return self.b[0].sum()


class Counted(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = torch.zeros(1)
        self.bn = nn.BatchNorm1d(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.bn(x) + self.calls


class Forked(nn.Module):
    """torch folds ``a.calls`` into the fork's subgraph, which writes it every call."""

    def __init__(self) -> None:
        super().__init__()
        self.a = Counted()
        self.b = Counted()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        future = torch.jit.fork(self.a, x)
        return torch.jit.wait(future) + self.b(x)


def _one_input() -> tuple[torch.Tensor, ...]:
    return (torch.ones(2, 1),)


#: The shapes of issue 39, built here; the corpus's own written-constant cases beside.
SHAPES: dict[str, tuple[Any, Any]] = {
    "list": (lambda: torch.jit.script(ListWrite().eval()), _one_input),
    "aliased": (lambda: torch.jit.script(Aliased().eval()), _one_input),
    "fork": (lambda: torch.jit.script(Forked().eval()), _one_input),
    # torch.jit.freeze's output saved: the list is a graph constant the file carries.
    "already-frozen": (lambda: torch_freeze(torch.jit.script(ListWrite().eval())), _one_input),
}
CORPUS_SHAPES = [
    "written_dict_value",
    "written_tuple_element",
    "written_fork_read",
    "written_interface_list",
    "frozen_conv_bn",
    "frozen_kept_buffer",
]

#: How the command is run: without inputs, and with them at budget 0 and timed. Timed
#: runs what the default budget runs (each changed step's warm-up and timed blocks, the
#: verdict's pair, the round trip), on a short budget: the model is still called dozens
#: of times a step, in a fraction of the default's time.
RUNS: dict[str, list[str]] = {
    "no-inputs": [],
    "budget-0": ["--time-budget", "0"],
    "timed": ["--time-budget", "0.05"],
}


def _save(module: torch.jit.ScriptModule, path: Path) -> Path:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(module, str(path))
    return path


def _tensors(path: str, value: Any) -> list[tuple[str, torch.Tensor]]:
    """Tensor leaves of an attribute value, each with its path (``b.0`` for ``b[0]``)."""
    if isinstance(value, torch.Tensor):
        return [(path, value)]
    if isinstance(value, (list, tuple)):
        return [leaf for i, v in enumerate(value) for leaf in _tensors(f"{path}.{i}", v)]
    if isinstance(value, dict):
        return [leaf for k, v in value.items() for leaf in _tensors(f"{path}.{k}", v)]
    return []


def _state(module: torch.jit.ScriptModule) -> tuple[dict[str, torch.Tensor], set[frozenset[str]]]:
    """Every kept tensor by path, and which paths share storage."""
    leaves = {
        p: t for path, value in attribute_paths(module).items() for p, t in _tensors(path, value)
    }
    groups: dict[int, set[str]] = {}
    for path, tensor in leaves.items():
        if tensor.layout == torch.strided and tensor.numel():
            groups.setdefault(tensor.untyped_storage().data_ptr(), set()).add(path)
    return leaves, {frozenset(g) for g in groups.values() if len(g) > 1}


def _two_calls(module: torch.jit.ScriptModule, inputs: tuple[Any, ...]) -> list[Any]:
    import copy

    with torch.no_grad():
        return [copy.deepcopy(module(*inputs)) for _ in range(2)]


def _assert_is_torchs(
    ours_path: Path, source: Path, preserved: tuple[str, ...], inputs: Any
) -> None:
    """The written file equals torch's freeze of the untouched input, loaded from disk."""
    theirs_path = _save(
        torch_freeze(torch.jit.load(str(source)), preserved), source.with_name("torch.pt")
    )
    try:
        theirs = torch.jit.load(str(theirs_path))
    except RuntimeError:
        pytest.skip("torch cannot load its own frozen file of this model back")
    ours = torch.jit.load(str(ours_path))
    for method in ("forward", *preserved):
        if theirs._c._has_method(method):
            mine = frozen_graph_signature(ours._c._get_method(method).graph)
            torchs = frozen_graph_signature(theirs._c._get_method(method).graph)
            assert mine == torchs, (method, mine - torchs, torchs - mine)
    our_state, our_sharing = _state(ours)
    their_state, their_sharing = _state(theirs)
    assert set(attribute_paths(ours)) == set(attribute_paths(theirs))
    assert set(our_state) == set(their_state)
    for path, tensor in their_state.items():
        dense = tensor.to_dense() if tensor.layout != torch.strided else tensor
        mine = our_state[path]
        assert torch.equal(mine.to_dense() if mine.layout != torch.strided else mine, dense), path
    assert our_sharing == their_sharing
    if inputs is not None and theirs._c._has_method("forward"):
        torch.testing.assert_close(_two_calls(ours, inputs), _two_calls(theirs, inputs))


def _freeze_with_freezeview(
    source: Path, out: Path, run: str, inputs_file: Path | None, preserved: tuple[str, ...]
) -> dict[str, Any]:
    argv = ["freeze", str(source), "-o", str(out), "--force", "--json", *RUNS[run]]
    for name in preserved:
        argv += ["--preserve", name]
    if run != "no-inputs" and inputs_file is not None:
        argv += ["--inputs", str(inputs_file)]
    assert main(argv) == 0
    return {}


def _check(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    module: torch.jit.ScriptModule,
    make_inputs: Any,
    run: str,
    preserved: tuple[str, ...] = (),
) -> dict[str, Any]:
    source = _save(module, tmp_path / "model.pt")
    inputs = tuple(make_inputs()) if make_inputs is not None else None
    inputs_file = None
    if inputs is not None:
        inputs_file = tmp_path / "inputs.pt"
        torch.save(inputs, str(inputs_file))
    out = tmp_path / "frozen.pt"
    _freeze_with_freezeview(source, out, run, inputs_file, preserved)
    result = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    _assert_is_torchs(out, source, preserved, inputs)
    return result  # type: ignore[no-any-return]


@pytest.mark.parametrize("run", ["budget-0", "no-inputs"])
@pytest.mark.parametrize("shape", ["list", "aliased", "already-frozen"])
def test_written_file_is_torchs(
    shape: str, run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Runs on the sample inputs leave the written file as torch freezes the input."""
    build, inputs = SHAPES[shape]
    _check(tmp_path, capsys, build(), inputs, run)


def test_aliased_attributes_keep_sharing_storage(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``a`` and ``b[0]`` stay one storage in the written file, as in torch's."""
    build, inputs = SHAPES["aliased"]
    _check(tmp_path, capsys, build(), inputs, "budget-0")
    ours = torch.jit.load(str(tmp_path / "frozen.pt"))
    a, b = ours._c.getattr("a"), ours._c.getattr("b")
    assert a.untyped_storage().data_ptr() == b[0].untyped_storage().data_ptr()


def test_two_calls_are_reported_when_they_differ(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """freeze with inputs runs a copy of the frozen module twice and says when the
    outputs moved, by as much as torch's frozen module moves them."""
    build, inputs = SHAPES["list"]
    result = _check(tmp_path, capsys, build(), inputs, "budget-0")
    theirs = torch_freeze(build())
    first, second = _two_calls(theirs, inputs())
    moved = float((second - first).abs().max())
    assert moved > 0
    assert result["second_call"]["same"] is False
    assert result["second_call"]["max_abs_difference"] == pytest.approx(moved)
    assert result["second_call"]["note"]


def test_two_calls_same_for_a_model_that_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    case = case_by_name("frozen_conv_bn")
    result = _check(tmp_path, capsys, case.build(), case.inputs, "budget-0")
    assert result["second_call"]["same"] is True
    assert result["second_call"]["note"] == ""


def test_without_inputs_nothing_runs_twice(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    build, _ = SHAPES["list"]
    assert _check(tmp_path, capsys, build(), None, "no-inputs")["second_call"] is None


def test_the_input_model_is_never_run(tmp_path: Path) -> None:
    """The pipeline's own modules stay as loaded after numerics and timing."""
    from freezeview.engine.freeze.pipeline import Pipeline
    from freezeview.engine.measure.measured_run import MeasuredRun

    module = SHAPES["list"][0]()
    pipe = Pipeline(module, inputs=_one_input())
    run = MeasuredRun(pipe, budget=0.01)
    for _ in run.run():
        pass
    run.finish(check_roundtrip=False)
    assert module._c.getattr("a")[0].tolist() == [1, 2, 3, 4, 5, 6]
    assert pipe.frozen_module is not None
    torch.testing.assert_close(pipe.frozen_module(torch.ones(1)), torch.tensor(31))


@pytest.mark.slow
@pytest.mark.parametrize("run", list(RUNS))
@pytest.mark.parametrize("shape", [*SHAPES, *CORPUS_SHAPES])
def test_shapes_at_every_budget(
    shape: str, run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    if shape in SHAPES:
        build, inputs = SHAPES[shape]
        module, preserved = build(), ()
    else:
        case = case_by_name(shape)
        module, inputs, preserved = case.build(), case.inputs, case.preserved_attrs
    _check(tmp_path, capsys, module, inputs if run != "no-inputs" else None, run, preserved)


_FREEZABLE = [c for c in CASES if c.expect_error is None and c.method == "forward"]


@pytest.mark.slow
@pytest.mark.parametrize("run", ["no-inputs", "budget-0"])
@pytest.mark.parametrize("case", _FREEZABLE, ids=[c.name for c in _FREEZABLE])
def test_every_corpus_family(
    case: Case, run: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every freezable corpus case, with and without sample inputs."""
    inputs = case.inputs if run != "no-inputs" else None
    _check(tmp_path, capsys, case.build(), inputs, run, case.preserved_attrs)


def _family_heads() -> list[Case]:
    """The first freezable case of each corpus family (module of tests/corpus)."""
    import corpus

    heads = []
    for family in sorted(n for n in dir(corpus) if hasattr(getattr(corpus, n), "CASES")):
        cases = getattr(corpus, family).CASES
        head = next((c for c in cases if c in _FREEZABLE), None)
        if head is not None:
            heads.append(head)
    return heads


_HEADS = _family_heads()


@pytest.mark.slow
@pytest.mark.parametrize("case", _HEADS, ids=[c.name for c in _HEADS])
def test_every_corpus_family_timed(
    case: Case, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """One case per family with every step timed and the round trip run."""
    _check(tmp_path, capsys, case.build(), case.inputs, "timed", case.preserved_attrs)
    assert len(_HEADS) >= 10


def test_signature_counts_fork_subgraphs() -> None:
    """The comparison reaches into fork subgraphs (where torch folds ``a.calls``)."""
    frozen = torch_freeze(SHAPES["fork"][0]())
    kinds: Counter[str] = frozen_graph_signature(frozen.graph)
    assert kinds["prim::fork"] == 1 and kinds["aten::add_"] >= 2


def test_the_apps_runs_leave_its_model_as_loaded(tmp_path: Path) -> None:
    """The app's runs with sample inputs (numerics and timing of every step) run
    private copies: the loaded model it explains, exports and freezes again afterwards
    is the file's, and torch's freeze of it still gives torch's first call."""
    from freezeview.engine.freeze.passes import default_passes
    from freezeview.session import SessionOptions
    from freezeview.session.local import Session

    source = _save(SHAPES["list"][0](), tmp_path / "model.pt")
    inputs_file = tmp_path / "inputs.pt"
    torch.save(_one_input(), str(inputs_file))
    session = Session(
        path=source, options=SessionOptions(inputs_file=inputs_file, time_budget=0.01)
    )
    session.load()
    for _ in range(2):  # a run, then a re-run of the same loaded model
        views = list(session.run_steps([], default_passes(True, False)))
        assert views
    loaded = session.module
    assert loaded._c.getattr("a")[0].tolist() == [1, 2, 3, 4, 5, 6]
    first, _ = _two_calls(torch_freeze(loaded), _one_input())
    assert int(first) == 31


@pytest.mark.parametrize("name", ["quant_static_conv_bn_relu_fused", "quant_dynamic_lstm"])
def test_quantized_models_run_and_are_written_as_torch_freezes_them(
    name: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Static and dynamic torch.ao models: their packed params (torchbind objects that
    forward never writes) are run, for numerics and two calls, and the file is torch's."""
    case = case_by_name(name)
    result = _check(tmp_path, capsys, case.build(), case.inputs, "budget-0")
    assert result["second_call"]["same"] is True
