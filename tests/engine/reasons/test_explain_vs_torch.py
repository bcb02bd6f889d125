"""freezeview's verdicts agree with torch on every module shape of the corpus.

For each case, ``explain`` must give every attribute path the status torch itself gives
it in the same run (``oracle.status_from_torch``: kept = still on the frozen module,
inlined = folded per torch's own freezing log, dropped = neither). Every ``kept`` verdict
carries a reason, and mutation reasons name the writing node and its source line.
Modules torch refuses to freeze must give one clear sentence (``PlanError``).
"""

from __future__ import annotations

import re

import oracle
import pytest
import torch
from corpus import CASES, Case, params

explain_module = pytest.importorskip("freezeview.engine.reasons.verdicts")
errors = pytest.importorskip("freezeview.engine.plumbing.errors")

MUTATION_CODES = {"set-attr", "in-place-write"}
# `file:line`, where the file may itself contain ':' (a Windows drive) or spaces.
SOURCE = re.compile(r".+:\d+")
NODE_KIND = re.compile(r"\b\w+::\w+")  # aten::, prim::, or a custom namespace


def _explain(case: Case, module: torch.jit.ScriptModule) -> object:
    return explain_module.explain(module, preserved_attrs=case.preserved_attrs)


def _table(rows: dict[str, tuple[str, str]]) -> str:
    width = max(map(len, rows), default=4)
    lines = [f"{'path':<{width}}  {'torch':<8} freezeview"]
    lines += [f"{path:<{width}}  {want:<8} {got}" for path, (want, got) in sorted(rows.items())]
    return "\n".join(lines)


def _snapshot(value: object) -> object:
    """A comparable copy of an attribute value (tensors cloned, containers walked)."""
    if isinstance(value, torch.Tensor):
        # Sparse tensors have no torch.equal; compare their dense form.
        return value.to_dense() if value.is_sparse else value.clone()
    if isinstance(value, list | tuple):
        return type(value)(_snapshot(item) for item in value)
    if isinstance(value, dict):
        return {key: _snapshot(item) for key, item in value.items()}
    if value is None or isinstance(value, bool | int | float | str | torch.device):
        return value
    # Modules and script objects: Python hands out a new wrapper per access, so there
    # is nothing stable to compare; their own attributes are listed under their paths.
    return type(value).__name__


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b


def _state(module: torch.jit.ScriptModule) -> dict[str, object]:
    """Attribute values, to check explain leaves the model untouched."""
    return {path: _snapshot(value) for path, value in oracle.attribute_paths(module).items()}


OK_CASES = [case for case in CASES if not case.expect_error]
REFUSED_CASES = [case for case in CASES if case.expect_error]


def _disagreements(case: Case, explanation: object, submodules: bool) -> dict[str, tuple[str, str]]:
    """Paths where freezeview's status differs from torch's, as ``{path: (torch, ours)}``.

    Submodules are compared separately from the other attributes: torch never turns a
    module into a constant, so their inlined/dropped split is the oracle's reading of
    torch's log (inlined when something under them was folded), not torch's own word.
    """
    module = case.build()
    expected = oracle.status_from_torch(module, case.preserved_attrs)
    is_module = {
        path: isinstance(value, torch._C.ScriptModule)
        for path, value in oracle.attribute_paths(module).items()
    }
    got = {verdict.path: verdict.status for verdict in explanation.attributes}
    return {
        path: (expected.get(path, "-"), got.get(path, "-"))
        for path in expected.keys() | got.keys()
        if is_module.get(path, False) == submodules and expected.get(path) != got.get(path)
    }


@pytest.mark.parametrize("case", params(OK_CASES))
def test_status_matches_torch(case: Case) -> None:
    """Every parameter, buffer and plain attribute gets torch's own status."""
    module = case.build()
    before = _state(module)
    explanation = _explain(case, module)
    paths = [verdict.path for verdict in explanation.attributes]
    assert len(paths) == len(set(paths)), "a path is listed twice"

    mismatches = _disagreements(case, explanation, submodules=False)
    assert not mismatches, f"{case.name}: freezeview disagrees with torch\n{_table(mismatches)}"

    after = _state(module)
    assert after.keys() == before.keys()
    for path, value in before.items():
        assert _same(after[path], value), f"explain changed {path}"


@pytest.mark.parametrize("case", params(OK_CASES))
def test_submodule_status_matches_torch(case: Case) -> None:
    """Every submodule is kept exactly when torch keeps it, else inlined or dropped."""
    explanation = _explain(case, case.build())
    mismatches = _disagreements(case, explanation, submodules=True)
    assert not mismatches, f"{case.name}: freezeview disagrees with torch\n{_table(mismatches)}"


@pytest.mark.parametrize("case", params(OK_CASES))
def test_reasons(case: Case) -> None:
    """Kept verdicts say why; mutation reasons name the node kind and a file:line."""
    explanation = _explain(case, case.build())
    for verdict in explanation.attributes:
        assert verdict.reasons, f"{verdict.path} ({verdict.status}) has no reason"
        for reason in verdict.reasons:
            assert reason.message.strip(), f"{verdict.path}: empty message for {reason.code}"
            assert reason.code in explain_module.REASON_CODES, reason.code
            if reason.code not in MUTATION_CODES:
                continue
            assert reason.node and NODE_KIND.search(reason.node), (
                f"{verdict.path}: {reason.code} reason names no node kind: {reason.node!r}"
            )
            if reason.code == "set-attr":
                assert "prim::SetAttr" in reason.node
            assert reason.source and SOURCE.fullmatch(reason.source), (
                f"{verdict.path}: {reason.code} reason has no file:line: {reason.source!r}"
            )

    codes = {code for verdict in explanation.attributes for code in verdict.codes}
    if "set-attr" in case.tags:
        assert "set-attr" in codes
    if "in-place" in case.tags:
        assert "in-place-write" in codes
    for name in case.preserved_attrs:
        verdict = explanation.by_path(name)
        if verdict is not None:  # a method name is not an attribute
            assert "preserved" in verdict.codes, f"{name}: {verdict.codes}"


@pytest.mark.parametrize("case", params(REFUSED_CASES))
def test_refused_modules_give_one_sentence(case: Case) -> None:
    """Where torch refuses to freeze, explain raises PlanError with a one-line message."""
    with pytest.raises(RuntimeError, match=case.expect_error):
        oracle.torch_freeze(case.build(), case.preserved_attrs)
    with pytest.raises(errors.PlanError) as caught:
        _explain(case, case.build())
    message = str(caught.value)
    assert message.strip() and "\n" not in message, message
    assert "Traceback" not in message
    assert caught.value.exit_code == 1


@pytest.mark.parametrize("case", params(OK_CASES))
def test_replay_agrees_with_torch(case: Case) -> None:
    """freezeview's own replay predicts torch's status: no reason is `undetermined`.

    explain shows torch's status whatever the replay says; this is what keeps its reasons
    honest (a disagreement turns every reason of that attribute into `undetermined`).
    """
    explanation = _explain(case, case.build())
    wrong = {d.path: (d.torch_status, d.replay_status) for d in explanation.disagreements}
    assert not wrong, f"{case.name}: the replay disagrees with torch\n{_table(wrong)}"


@pytest.mark.parametrize("case", params(OK_CASES))
def test_statuses_without_reasons_match_torch(case: Case) -> None:
    """check and compare read torch's statuses alone first: the same ones, no reasons."""
    from freezeview.engine.load.loading import LoadedModel
    from freezeview.engine.reasons.torch_freeze import torch_outcome

    module = case.build()
    outcome = torch_outcome(module._c, list(case.preserved_attrs))
    quick = explain_module.torch_statuses_only(
        LoadedModel.from_module(module), case.preserved_attrs, outcome
    )
    if quick is None:  # constants folded inside a torch.jit.fork body: explain resolves them
        assert "fork" in case.tags
        return
    expected = oracle.status_from_torch(module, case.preserved_attrs)
    got = {v.path: v.status for v in quick.attributes}
    assert got == expected
    assert all(not v.reasons for v in quick.attributes)
