"""freezeview's stepwise pipeline ends exactly where torch.jit.freeze does.

Every comparison asks the installed torch in the same run: the final graph's IR text
(with torch's per-clone type mangling normalized), the attributes that survive, and the
outputs on the same inputs, for the whole module corpus and for the default plan,
``optimize_numerics=False`` and ``optimize_for_inference``.
"""

from __future__ import annotations

import re
import threading
import time
import warnings
from collections.abc import Iterator

import pytest
import torch
from corpus import CASES, Case
from oracle import frozen_attribute_paths, torch_freeze

from freezeview.engine.freeze.passes import (
    GUARD_PASS,
    REGISTRY,
    PassInfo,
    default_passes,
    needs_guard,
)
from freezeview.engine.freeze.pipeline import (
    FREEZE_STEPS,
    FULL_DIFF_LIMIT,
    Pipeline,
    Plan,
    Step,
    freeze,
)
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph
from freezeview.engine.load.loading import LoadedModel
from freezeview.engine.plumbing.errors import BadInputError, PlanError

# --- module shapes used here (module level: torch.jit.script needs their source) ---------


class ConvBnNet(torch.nn.Module):
    """conv -> bn -> dropout -> *2 -> +1: folds in two rounds, dropout removed."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 8, 3)
        self.bn = torch.nn.BatchNorm2d(8)
        self.drop = torch.nn.Dropout(0.2)
        with torch.no_grad():
            self.bn.running_mean.uniform_(-0.5, 0.5)
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.bn(self.conv(x)) * 2.0 + 1.0)

    @classmethod
    def scripted(cls) -> torch.jit.ScriptModule:
        torch.manual_seed(0)
        return torch.jit.script(cls().eval())


class DropoutNet(torch.nn.Module):
    """linear -> dropout: only dropout removal fires."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x))

    @classmethod
    def scripted(cls) -> torch.jit.ScriptModule:
        torch.manual_seed(0)
        return torch.jit.script(cls().eval())


class StatefulNet(torch.nn.Module):
    """A buffer written in place and an int set in forward: both kept, both restored."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 3)
        self.register_buffer("count", torch.zeros(1))
        self.calls = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        self.calls = self.calls + 1
        return self.fc(x) + self.count

    @classmethod
    def scripted(cls) -> torch.jit.ScriptModule:
        torch.manual_seed(0)
        return torch.jit.script(cls().eval())


class TwoMethods(torch.nn.Module):
    """forward plus an exported method that also has a dropout."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = torch.nn.Linear(4, 4)
        self.drop = torch.nn.Dropout(0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x)

    @torch.jit.export
    def embed(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.fc(x)).relu()

    @classmethod
    def scripted(cls) -> torch.jit.ScriptModule:
        torch.manual_seed(0)
        return torch.jit.script(cls().eval())


# Per-clone type mangling and object addresses (packed params) differ between any two
# freezes of the same module, torch's own included.
_MANGLE = re.compile(r"___torch_mangle_\d+\.|0x[0-9a-f]+")

FREEZABLE = [c for c in CASES if c.expect_error is None]
REFUSED = [c for c in CASES if c.expect_error is not None]


def _text(graph: torch._C.Graph) -> str:
    return _MANGLE.sub("", str(graph))


def _torch_freeze(module: torch.jit.ScriptModule, case: Case, **kw: bool) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        # torch.jit.freeze, or its own steps for an already-frozen module (no `training`).
        return torch_freeze(module, case.preserved_attrs, **kw)


def _methods(module: torch.jit.ScriptModule, preserved: tuple[str, ...]) -> Iterator[str]:
    if module._c._has_method("forward"):
        yield "forward"
    for name in preserved:
        if module._c._has_method(name) and name != "forward":
            yield name


def _assert_same_as_torch(
    ours: torch.jit.ScriptModule, theirs: torch.jit.ScriptModule, case: Case
) -> None:
    original = case.build()
    for method in _methods(original, case.preserved_attrs):
        assert _text(ours._c._get_method(method).graph) == _text(
            theirs._c._get_method(method).graph
        ), f"{case.name}: {method} graph differs from torch's"
    assert frozen_attribute_paths(ours) == frozen_attribute_paths(theirs)


def _outputs(module: torch.jit.ScriptModule, inputs: tuple[torch.Tensor, ...]) -> object:
    with torch.no_grad():
        return module(*inputs)


@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_default_plan_equals_torch_freeze(case: Case) -> None:
    """Default plan: same IR, same surviving attributes, same outputs as torch."""
    module = case.build()
    pipe = Pipeline(module, Plan.default(case.preserved_attrs))
    steps = pipe.run_all()
    assert all(s.error is None for s in steps), [s.error for s in steps]
    assert [s.name for s in steps[:3]] == list(FREEZE_STEPS)
    assert pipe.frozen_module is not None
    theirs = _torch_freeze(case.build(), case)
    _assert_same_as_torch(pipe.frozen_module, theirs, case)
    if module._c._has_method("forward"):
        inputs = case.inputs()
        # Stateful modules: compare the first call of fresh copies on both sides.
        ours = _outputs(freeze(case.build(), case.preserved_attrs).module, inputs)  # type: ignore[arg-type]
        torch.testing.assert_close(ours, _outputs(_torch_freeze(case.build(), case), inputs))


@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_no_optimize_equals_torch(case: Case) -> None:
    """optimize_numerics=False matches torch.jit.freeze(optimize_numerics=False)."""
    result = freeze(case.build(), case.preserved_attrs, optimize_numerics=False)
    assert result.module is not None
    theirs = _torch_freeze(case.build(), case, optimize_numerics=False)
    _assert_same_as_torch(result.module, theirs, case)
    # No fold loop; on a torch release off the verified table, the guard step last.
    guard = [GUARD_PASS] if needs_guard() else []
    assert [s.name for s in result.steps[3:]] == [*default_passes(False), *guard]


@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_cleanup_step_is_torch_freeze_module(case: Case) -> None:
    """The clean-up step shows exactly what torch._C._freeze_module gives."""
    pipe = Pipeline(case.build(), Plan.default(case.preserved_attrs))
    steps = pipe.run_all()
    cleanup = steps[2]
    raw = torch._C._freeze_module(case.build()._c, list(case.preserved_attrs))
    for method, snap in cleanup.snapshots.items():
        assert _MANGLE.sub("", snap.text) == _text(raw._get_method(method).graph)


@pytest.mark.parametrize("case", REFUSED, ids=[c.name for c in REFUSED])
def test_refused_modules_fail_on_a_step(case: Case) -> None:
    """When torch refuses to freeze, the step says why (naming the model) and quotes torch."""
    pipe = Pipeline(case.build(), Plan.default(case.preserved_attrs))
    steps = pipe.run_all()
    assert pipe.failed and pipe.frozen_module is None
    assert steps[-1].error is not None
    assert re.search(case.expect_error or "", steps[-1].error)
    assert steps[-1].error.startswith(pipe.loaded.name)
    with pytest.raises(PlanError):
        freeze(case.build(), case.preserved_attrs)


def test_optimize_for_inference_equals_torch() -> None:
    """With optimize_for_inference the graph equals torch.jit.optimize_for_inference."""
    result = freeze(ConvBnNet.scripted(), optimize_for_inference=True)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.optimize_for_inference(torch.jit.freeze(ConvBnNet.scripted()))
    assert result.module is not None
    assert _text(result.module.graph) == _text(theirs.graph)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(_outputs(result.module, (x,)), _outputs(theirs, (x,)))
    kinds = [s.kind for s in result.steps]
    assert kinds[:3] == ["freeze"] * 3 and "inference" in kinds


def test_preserved_method_is_optimized_like_torch() -> None:
    """Preserved methods get the same passes as forward (dropout removed in both)."""
    module = TwoMethods.scripted()
    result = freeze(module, ["embed"])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.freeze(TwoMethods.scripted(), preserved_attrs=["embed"])
    assert result.module is not None
    assert _text(result.module.embed.graph) == _text(theirs.embed.graph)
    assert "aten::dropout" not in str(result.module.embed.graph)
    assert "embed" in result.steps[-1].snapshots


def test_input_module_is_not_modified() -> None:
    """Freezing, folding and numerics runs leave the user's module exactly as it was."""
    module = StatefulNet.scripted()
    before_graph = str(module.graph)
    before_state = {k: v.clone() for k, v in module.state_dict().items()}
    before_calls = module.calls
    result = freeze(module, inputs=(torch.randn(2, 4),))
    assert result.module is not None
    assert str(module.graph) == before_graph
    assert module.calls == before_calls
    for key, value in module.state_dict().items():
        assert torch.equal(value, before_state[key]), key


def test_numerics_per_step() -> None:
    """Exact steps report zero difference; the batch-norm fold moves the last bits."""
    x = torch.randn(4, 3, 8, 8)
    result = freeze(ConvBnNet.scripted(), inputs=(x,))
    by_name = {s.name: s for s in result.steps}
    for name in ("inline", "fold_attributes", "cleanup", "remove_dropout"):
        numerics = by_name[name].numerics
        assert numerics is not None and numerics.max_abs == 0.0, name
    folded = by_name["fold_conv_bn"].numerics
    assert folded is not None and folded.allclose
    final = result.steps[-1].numerics
    assert final is not None
    with torch.no_grad():
        expect = (result.module(x) - ConvBnNet.scripted()(x)).abs().max().item()  # type: ignore[misc]
    assert final.max_abs == pytest.approx(expect, abs=1e-7)


def test_numerics_not_checked_without_inputs() -> None:
    """Without sample inputs no step carries numerics."""
    result = freeze(ConvBnNet.scripted())
    assert all(s.numerics is None for s in result.steps)


def test_bad_inputs_are_one_sentence() -> None:
    """Inputs that do not fit the model give a BadInputError, not a traceback."""
    with pytest.raises(BadInputError, match="do not fit"):
        freeze(ConvBnNet.scripted(), inputs=(torch.randn(2, 5),))


def test_fold_step_lists_folded_and_kept() -> None:
    """The fold step names what became a constant and what stayed an attribute."""
    result = freeze(StatefulNet.scripted())
    fold = result.steps[1]
    assert fold.name == "fold_attributes"
    assert "count" in fold.kept and "fc.weight" in fold.folded
    # explain's reason for the kept buffer is on the step.
    assert any(note.startswith("kept count: ") for note in fold.notes), fold.notes
    assert fold.snapshot is not None
    kinds = fold.snapshot.kinds()
    reads = [n.attribute("name") for n in fold.snapshot.walk() if n.kind == "prim::GetAttr"]
    assert "weight" not in reads and "count" in reads
    assert kinds["prim::Constant"] > result.steps[0].snapshot.kinds()["prim::Constant"]  # type: ignore[union-attr]


def _cleanup_note(module: torch.jit.ScriptModule, frozen: torch.jit.ScriptModule) -> str:
    from freezeview.engine.graph.module_slots import attribute_paths
    from freezeview.engine.plumbing import plural

    before, after = attribute_paths(module._c), attribute_paths(frozen._c)
    kept = [path for path, is_module in after.items() if not is_module]
    removed = {path for path, is_module in before.items() if not is_module} - set(after)
    return (
        f"{plural(len(kept), 'attribute')} kept on the frozen module; "
        f"{plural(len(removed), 'attribute or submodule path')} removed"
    )


def test_cleanup_note_lists_the_input_paths_only_when_read(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """check and compare never read the clean-up step's notes, so a run does not list
    every path of the input module for them; a reader gets the same sentence."""
    listed = _Counter(Pipeline.module_paths)
    monkeypatch.setattr(Pipeline, "module_paths", lambda self: listed(self))
    module = StatefulNet.scripted()
    pipe = Pipeline(module)
    steps = pipe.run_all()
    assert pipe.frozen_module is not None and listed.calls == 0
    assert steps[2].name == "cleanup"
    assert steps[2].notes[-1] == _cleanup_note(module, pipe.frozen_module)
    assert listed.calls == 1


def test_cleanup_note_survives_a_failed_count(monkeypatch: pytest.MonkeyPatch) -> None:
    """When the counts cannot be read, the step's own note still leads the one saying so."""
    import freezeview.engine.freeze.freeze_phase as freeze_phase

    def broken(*args: object) -> object:
        raise RuntimeError("no counts today")

    monkeypatch.setattr(freeze_phase, "kind_counts", broken)
    module = StatefulNet.scripted()
    pipe = Pipeline(module)
    cleanup = pipe.run_all()[2]
    assert pipe.frozen_module is not None
    assert cleanup.notes == (
        _cleanup_note(module, pipe.frozen_module),
        "could not count this step's changes: no counts today",
    )


def test_unchanged_steps_share_the_previous_snapshot() -> None:
    """A pass that did nothing costs no new snapshot and says why it did not fire."""
    result = freeze(DropoutNet.scripted())
    quiet = [s for s in result.steps if not s.changed and s.kind != "freeze"]
    assert quiet
    for step in quiet:
        assert step.snapshot is result.steps[step.index - 1].snapshot
        assert step.notes and step.notes[0].startswith("did not fire: ")


def test_loop_rounds_repeat_until_nothing_changes() -> None:
    """Loop passes repeat in rounds; the last round changes nothing."""
    result = freeze(ConvBnNet.scripted())
    loop = [s for s in result.steps if s.round is not None]
    last_round = max(s.round for s in loop if s.round is not None)
    assert last_round >= 2
    assert not any(s.changed for s in loop if s.round == last_round)
    assert all(any(s.changed for s in loop if s.round == r) for r in range(1, last_round))


def test_failing_pass_stops_the_pipeline() -> None:
    """A pass that raises is reported on its step; earlier steps stay, nothing is frozen."""

    def boom(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool:
        raise RuntimeError("injected failure")

    registry = dict(REGISTRY)
    registry["boom"] = PassInfo(
        "boom", "boom", "always fails", True, "once", "never", "_jit_pass_inline", boom
    )
    plan = Plan(passes=("remove_dropout", "boom", "fold_conv_bn"))
    pipe = Pipeline(ConvBnNet.scripted(), plan, registry=registry)
    steps = pipe.run_all()
    assert steps[-1].name == "boom" and "injected failure" in (steps[-1].error or "")
    assert pipe.failed and pipe.frozen_module is None
    assert [s.name for s in steps[:4]] == [*FREEZE_STEPS, "remove_dropout"]
    assert steps[3].snapshot is not None


def test_cancel_stops_between_steps() -> None:
    """Setting the cancel event stops before the next step."""
    cancel = threading.Event()
    pipe = Pipeline(ConvBnNet.scripted())
    seen: list[Step] = []
    for step in pipe.run(cancel=cancel):
        seen.append(step)
        if len(seen) == 2:
            cancel.set()
    assert len(seen) == 2 and pipe.cancelled and pipe.frozen_module is None


def test_progress_callback_announces_each_step() -> None:
    """The progress callback hears of every step before it runs."""
    heard: list[str] = []
    pipe = Pipeline(ConvBnNet.scripted())
    steps = list(pipe.run(progress=lambda p: heard.append(p.name)))
    assert heard == [s.name for s in steps]


def _rerun(first: Pipeline, plan: Plan) -> Pipeline:
    """Run ``plan`` on ``first``'s module as the app re-runs it: a new pipeline on the
    same loaded model, offered the last run's inline and fold steps."""
    again = Pipeline(first.loaded, plan)
    again.offer_steps(first.picture_steps)
    again.run_all()
    return again


def test_a_rerun_without_a_pass_keeps_the_earlier_steps_and_matches_torch() -> None:
    """Running again without a pass shows the same steps up to it (the freeze phase's
    pictures reused as they are) and still ends at torch's result."""
    pipe = Pipeline(ConvBnNet.scripted())
    first = pipe.run_all()
    index = next(s.index for s in first if s.name == "fold_conv_bn")
    plan = pipe.plan.replace(passes=tuple(p for p in pipe.plan.passes if p != "fold_conv_bn"))
    rerun = _rerun(pipe, plan)
    new = rerun.steps
    shown = [(s.name, s.changed) for s in new[:index]]
    assert shown == [(s.name, s.changed) for s in first[:index]]
    assert new[0] is first[0] and new[1] is first[1]
    assert new[index].index == index and new[index].name != "fold_conv_bn"
    assert "fold_conv_bn" not in {s.name for s in new}
    assert "aten::batch_norm" in str(rerun.frozen_module.graph)  # type: ignore[union-attr]
    # Back to the default plan: the same final graph as torch again.
    back = _rerun(rerun, Plan.default())
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.freeze(ConvBnNet.scripted())
    assert _text(back.frozen_module.graph) == _text(theirs.graph)  # type: ignore[union-attr]


def test_rerun_with_other_preserved_attrs_refreezes() -> None:
    """Changing what is preserved changes the freeze phase: it is recomputed."""
    pipe = Pipeline(StatefulNet.scripted())
    first = pipe.run_all()
    rerun = _rerun(pipe, pipe.plan.replace(preserved_attrs=("fc",)))
    assert all(a is not b for a, b in zip(rerun.steps[1:], first[1:], strict=False))
    assert "fc" in frozen_attribute_paths(rerun.frozen_module)  # type: ignore[arg-type]
    assert "fc" not in frozen_attribute_paths(pipe.frozen_module)  # type: ignore[arg-type]


def test_plan_validation() -> None:
    """Unknown passes name the valid ones; numerics and inference rules hold."""
    with pytest.raises(PlanError, match="valid passes are: remove_dropout"):
        Plan(passes=("nope",)).validate()
    with pytest.raises(PlanError, match="changes numerics"):
        Plan(passes=("fold_conv_bn",), optimize_numerics=False).validate()
    with pytest.raises(PlanError, match="optimize-for-inference"):
        Plan(passes=("convert_to_mkldnn",)).validate()
    with pytest.raises(PlanError, match="twice"):
        Plan(passes=("remove_dropout", "remove_dropout")).validate()
    assert Plan.default().passes == default_passes()
    assert Plan.default(optimize_numerics=False).passes == (
        "remove_dropout",
        "concat_frozen_linear",
    )


def test_unknown_preserved_name_and_training_mode() -> None:
    """A preserved name that does not exist, or a training-mode model, is a PlanError."""
    with pytest.raises(PlanError, match="cannot preserve 'nope'"):
        Pipeline(ConvBnNet.scripted(), Plan.default(["nope"]))
    training = torch.jit.script(ConvBnNet())
    with pytest.raises(PlanError, match="training mode"):
        Pipeline(LoadedModel.from_module(training))


def test_default_order_equals_optimize_frozen_graph() -> None:
    """Registry order (with its loop) == torch's _jit_pass_optimize_frozen_graph, per graph."""
    for build in (ConvBnNet.scripted, DropoutNet.scripted, StatefulNet.scripted):
        for numerics in (True, False):
            a = torch._C._freeze_module(build()._c, [])
            b = torch._C._freeze_module(build()._c, [])
            torch._C._jit_pass_optimize_frozen_graph(a._get_method("forward").graph, numerics)
            plan = Plan.default(optimize_numerics=numerics)
            pipe = Pipeline(build(), plan)
            pipe.run_all()
            assert pipe.frozen_module is not None
            assert _text(pipe.frozen_module.graph) == _text(a._get_method("forward").graph)
            assert b is not None


# --- lazy pictures: stepping costs about what torch.jit.freeze costs ----------------------


def _small_encoder() -> torch.jit.ScriptModule:
    """A 3-layer scripted TransformerEncoder: ~4.6k inlined nodes, above FULL_DIFF_LIMIT."""
    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    encoder = torch.nn.TransformerEncoder(layer, 3, enable_nested_tensor=False)
    return torch.jit.script(encoder.eval())


@pytest.fixture(scope="module")
def encoder() -> torch.jit.ScriptModule:
    return _small_encoder()


class _Counter:
    """Wraps a function and counts its calls (optionally slowly, to make threads overlap)."""

    def __init__(self, fn: object, delay: float = 0.0) -> None:
        self.fn = fn
        self.calls = 0
        self.delay = delay

    def __call__(self, *args: object, **kwargs: object) -> object:
        self.calls += 1
        if self.delay:
            time.sleep(self.delay)
        return self.fn(*args, **kwargs)  # type: ignore[operator]


def test_stepping_takes_no_snapshot_until_asked(
    encoder: torch.jit.ScriptModule, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A run snapshots nothing and runs neither explain nor why-not diagnostics.

    Each picture is taken the first time a step's snapshot is read, once; counts, node
    counts and notes come on demand too, and so does freezeview's own inlined copy
    (torch inlines its clone inside _freeze_module, unseen by Python).
    """
    import freezeview.engine.freeze.lazy_graph as pipeline_module
    import freezeview.engine.reasons as verdicts_module

    snaps = _Counter(pipeline_module.snapshot_graph)
    explains = _Counter(verdicts_module.explain)
    whys = _Counter(PassInfo.why_not)
    monkeypatch.setattr(pipeline_module, "snapshot_graph", snaps)
    monkeypatch.setattr(verdicts_module, "explain", explains)
    monkeypatch.setattr(PassInfo, "why_not", lambda self, snap: whys(self, snap))
    inlines = _Counter(torch._C._jit_pass_inline)
    monkeypatch.setattr(torch._C, "_jit_pass_inline", inlines)
    pipe = Pipeline(encoder)
    steps = pipe.run_all()
    assert pipe.frozen_module is not None and len(steps) > 5
    assert (snaps.calls, explains.calls, whys.calls, inlines.calls) == (0, 0, 0, 0)
    # The freeze steps' facts come on demand, from one inlined copy.
    assert steps[0].changed and steps[1].changed and "layers.0.linear1.weight" in steps[1].folded
    assert inlines.calls == 1
    # Node counts and the method list need no snapshot either.
    assert steps[0].node_count is not None and steps[0].node_count > FULL_DIFF_LIMIT
    assert sorted(steps[-1].snapshots) == ["forward"]
    assert snaps.calls == 0
    # Reading one step's picture takes exactly one snapshot, once.
    first = steps[2].snapshot
    assert snaps.calls == 1 and steps[2].snapshot is first
    # Steps that changed nothing share the picture of the step before them.
    quiet = next(s for s in steps[3:] if not s.changed)
    assert quiet.snapshot is steps[quiet.index - 1].snapshot
    # The fold step's notes run explain (once, for the kept reasons) ...
    fold = steps[1]
    noun = "attribute" if len(fold.folded) == 1 else "attributes"
    assert fold.notes[0].startswith(f"{len(fold.folded)} {noun} folded")
    assert explains.calls == (1 if fold.kept else 0)
    # ... and a quiet pass's notes run its diagnosis.
    assert quiet.notes[0].startswith("did not fire: ") and whys.calls == 1


def test_lazy_snapshots_equal_eager_ones(encoder: torch.jit.ScriptModule) -> None:
    """Pictures taken after the run (and after a rerun) equal ones taken as each step ran.

    The pipeline keeps the working graph's state by copying it before a pass rewrites
    it; a copy renumbers unnamed values, so this also checks that the names shown are
    those of the graph torch produced.
    """
    for module in (encoder, ConvBnNet.scripted(), TwoMethods.scripted()):
        preserved = ("embed",) if module._c._has_method("embed") else ()
        pipe = Pipeline(module, Plan.default(preserved))
        eager: dict[int, dict[str, GraphSnapshot]] = {}
        for step in pipe.run():
            if step.kind != "freeze" or step.name == "cleanup":
                assert pipe.working is not None
                eager[step.index] = {
                    m: snapshot_graph(pipe.working._c._get_method(m).graph, m)
                    for m in step.snapshots
                }
            elif step.name == "inline":
                eager[0] = {}
                for m in step.snapshots:
                    graph = module._c._get_method(m).graph.copy()
                    torch._C._jit_pass_inline(graph)
                    eager[0][m] = snapshot_graph(graph, m)
        first = list(pipe.steps)
        assert 2 in eager  # the clean-up step: torch's own frozen graph, as it came
        # A rerun re-freezes the same module; the first run's pictures must not move.
        if len(first) > 4:
            _rerun(pipe, pipe.plan.replace(passes=("remove_dropout",)))
        for index, snaps in eager.items():
            for m, snap in snaps.items():
                lazy = first[index].snapshots[m]
                assert lazy.text == snap.text, (index, m)
                assert lazy == snap, (index, m)
                assert (
                    first[index].node_count is None
                    or m != "forward"
                    or (first[index].node_count == snap.node_count)
                )


def test_pictures_survive_changes_to_the_frozen_module() -> None:
    """The last step's picture is the graph as freezing left it, whatever the caller does next."""
    result = freeze(DropoutNet.scripted())
    assert result.module is not None
    expected = str(result.module.graph)
    assert torch._C._jit_pass_transpose_frozen_linear(result.module.graph)
    assert str(result.module.graph) != expected
    assert result.steps[-1].snapshot is not None
    assert result.steps[-1].snapshot.text == expected


def test_snapshot_is_taken_once_across_threads(monkeypatch: pytest.MonkeyPatch) -> None:
    """The app reads steps from a worker thread: concurrent readers share one snapshot."""
    import freezeview.engine.freeze.lazy_graph as pipeline_module

    snaps = _Counter(pipeline_module.snapshot_graph, delay=0.05)
    monkeypatch.setattr(pipeline_module, "snapshot_graph", snaps)
    steps = freeze(ConvBnNet.scripted()).steps
    barrier = threading.Barrier(4)
    pictures: list[object] = []
    notes: list[object] = []

    def read() -> None:
        barrier.wait()
        pictures.append(steps[2].snapshot)
        notes.append(steps[2].notes)

    threads = [threading.Thread(target=read) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(pictures) == 4 and all(p is pictures[0] for p in pictures)
    assert len(notes) == 4 and all(n is notes[0] for n in notes)
    # The clean-up's counts need its own picture and the fold step's (full diff below
    # FULL_DIFF_LIMIT): two snapshots in all, however many threads asked.
    assert snaps.calls == 2


def test_counts_by_kind_on_big_graphs_match_snapshots(encoder: torch.jit.ScriptModule) -> None:
    """Above FULL_DIFF_LIMIT the counts come from the printout; they equal the snapshots'."""
    steps = Pipeline(encoder).run_all()
    for step in steps:
        if step.index == 0 or not step.changed:
            continue
        before, after = steps[step.index - 1].snapshot, step.snapshot
        assert before is not None and after is not None
        if max(before.node_count, after.node_count) <= FULL_DIFF_LIMIT:
            continue
        delta = after.kinds()
        delta.subtract(before.kinds())
        assert step.nodes_added == sum(n for n in delta.values() if n > 0), step.title
        assert step.nodes_removed == -sum(n for n in delta.values() if n < 0), step.title


@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_node_counts_without_snapshots_are_exact(case: Case) -> None:
    """Every step's node count (read from torch's printout) equals its snapshot's."""
    steps = Pipeline(case.build(), Plan.default(case.preserved_attrs)).run_all()
    for step in steps:
        counts = {m: g.node_count for m, g in step._graphs.items()}
        kinds = {m: g.kinds() for m, g in step._graphs.items()}
        for m, snap in step.snapshots.items():
            assert counts[m] == snap.node_count, (step.title, m)
            assert kinds[m] == snap.kinds(), (step.title, m)


def test_fold_loop_runs_as_many_rounds_as_torch() -> None:
    """The loop stops when no fold reports folding, as torch's do-while does.

    After dropout removal, fold_conv_bn's dead-code elimination drops the dropout's
    unused constants: the step shows that change, but no fold happened, so (like
    torch) no second round runs.
    """
    steps = freeze(DropoutNet.scripted()).steps
    rounds = {s.round for s in steps if s.round is not None}
    assert rounds == {1}
    conv_bn = next(s for s in steps if s.name == "fold_conv_bn")
    assert conv_bn.changed and conv_bn.nodes_removed > 0


@pytest.mark.parametrize("case", FREEZABLE, ids=[c.name for c in FREEZABLE])
def test_fold_step_folded_and_kept_follow_torch(case: Case) -> None:
    """The fold step's kept paths are exactly the read ones torch's freeze leaves on the module."""
    steps = Pipeline(case.build(), Plan.default(case.preserved_attrs)).run_all()
    fold = steps[1]
    survivors = frozen_attribute_paths(_torch_freeze(case.build(), case))
    assert set(fold.kept) <= survivors, case.name
    assert not set(fold.folded) & survivors, case.name
    assert fold.changed == bool(fold.folded)


def test_explanation_reuses_the_freeze_steps_torch_run(monkeypatch: pytest.MonkeyPatch) -> None:
    """explain reads its statuses off the pipeline's own torch freeze: torch runs once."""
    from models.small import example_module

    calls: list[list[str]] = []
    real = torch._C._freeze_module

    def counting(module, preserved=(), *args):  # type: ignore[no-untyped-def]
        calls.append(list(preserved))
        return real(module, preserved, *args)

    monkeypatch.setattr(torch._C, "_freeze_module", counting)
    pipe = Pipeline(example_module().build(), Plan.default(["temperature"]))
    steps = list(pipe.run())
    assert steps and pipe.frozen_module is not None
    explanation = pipe.explanation()
    assert explanation is not None and calls == [["temperature"]]
    kept = {v.path for v in explanation.with_status("kept")}
    assert kept == frozen_attribute_paths(pipe.frozen_module)


def test_first_note_and_counts_without_the_kept_reasons(monkeypatch: pytest.MonkeyPatch) -> None:
    """``first_note`` is ``notes[0]``; the fold step gives it, and its counts, without explain.

    Its kept-attribute reasons (the notes after the first) run explain; the CLI's table
    shows the counts and the first note only.
    """
    import freezeview.engine.freeze.pipeline as pipeline_mod

    counter = _Counter(pipeline_mod._explain_or_none)
    monkeypatch.setattr(pipeline_mod, "_explain_or_none", counter)
    steps = Pipeline(StatefulNet.scripted()).run_all()
    fold = next(s for s in steps if s.name == "fold_attributes")
    assert fold.kept  # forward writes `count` and `calls`: torch keeps both
    heads = [(s.first_note, s.nodes_added, s.nodes_removed, s.nodes_changed) for s in steps]
    assert counter.calls == 0
    assert heads == [
        (s.notes[0] if s.notes else "", s.nodes_added, s.nodes_removed, s.nodes_changed)
        for s in steps
    ]
    assert counter.calls == 1 and any(n.startswith("kept count") for n in fold.notes)


def test_released_graphs_keep_their_counts(encoder: torch.jit.ScriptModule) -> None:
    """``release_graphs`` lets a step's graphs go; what was read stays readable.

    A graph the following step still shows (a pass that changed nothing) is kept.
    """
    from freezeview.engine.freeze.steps import release_graphs

    pipe = Pipeline(encoder)
    steps = list(pipe.run())
    inline = steps[0]
    count = inline.node_count  # from the printout: no snapshot taken
    picture = inline._graphs["forward"]
    assert picture.graph() is not None
    release_graphs(inline, steps[1])
    assert picture.graph() is None
    with pytest.raises(RuntimeError, match="released"):
        picture.snapshot()
    assert inline.node_count == count and picture.text
    shared = next(
        i
        for i in range(3, len(steps) - 1)
        if steps[i + 1]._graphs["forward"] is steps[i]._graphs["forward"]
    )
    release_graphs(steps[shared], steps[shared + 1])
    assert (
        steps[shared + 1]._graphs["forward"].snapshot().node_count == steps[shared + 1].node_count
    )
    assert pipe.frozen_module is not None and str(pipe.frozen_module.graph)


def test_fold_picture_takes_the_released_inline_graph_over(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Read row by row with releases (as the CLI does), the fold step folds the inline
    step's graph in place instead of copying it; read at the end, it copies. Both say
    the same."""
    import freezeview.engine.freeze.freeze_phase as phase
    from freezeview.engine.freeze.steps import forget_known_counts, release_graphs

    built: list[object] = []
    folded: list[object] = []
    real_pick, real_fold = phase.pick_graph, phase.fold_graph

    def pick(graphs: object, method: str) -> object:
        build = real_pick(graphs, method)  # type: ignore[arg-type]
        return lambda: built.append(build()) or built[-1]

    monkeypatch.setattr(phase, "pick_graph", pick)
    monkeypatch.setattr(
        phase, "fold_graph", lambda g, *a, **k: folded.append(g) or real_fold(g, *a, **k)
    )

    def read(step: Step) -> tuple[object, ...]:
        return step.changed, step.node_count, step.nodes_added, step.nodes_removed, step.notes

    whole = [read(s) for s in Pipeline(ConvBnNet.scripted()).run_all()]
    assert len(built) == len(folded) == 1 and folded[0] is not built[0]
    built.clear()
    folded.clear()
    forget_known_counts()  # the same steps' counts: diffed again, as in a new process
    steps: list[Step] = []
    rows = []
    for step in Pipeline(ConvBnNet.scripted()).run():
        steps.append(step)
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        rows.append(read(step))
        if len(steps) > 1:
            release_graphs(steps[-2], step)
    assert len(built) == len(folded) == 1 and folded[0] is built[0]
    assert rows == whole


def test_steps_printed_as_before_take_their_counts_and_notes(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A step whose graphs print as an earlier step's did (the same model frozen with
    the same plan again) takes that step's counts and summary instead of snapshots and
    a diff; a step never seen before is diffed, and says what a first run says."""
    import freezeview.engine.diff as diff_package
    from freezeview.engine.freeze.steps import forget_known_counts

    def facts(pipeline: Pipeline) -> list[tuple[object, ...]]:
        return [
            (s.name, s.nodes_added, s.nodes_removed, s.nodes_changed, s.notes)
            for s in pipeline.run_all()
        ]

    first = facts(Pipeline(ConvBnNet.scripted()))
    diffs: list[int] = []
    real = diff_package.diff_snapshots
    monkeypatch.setattr(diff_package, "diff_snapshots", lambda *a: diffs.append(1) or real(*a))
    assert facts(Pipeline(ConvBnNet.scripted())) == first
    assert diffs == []
    forget_known_counts()
    assert facts(Pipeline(ConvBnNet.scripted())) == first
    assert diffs
