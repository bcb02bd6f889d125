"""check holds its rules against torch's statuses by path, without freezeview's module tree.

When every rule holds, ``check`` needs torch's status per attribute path, the kept
tensor bytes and the passes that fired; the inventory (types, values, readers of every
attribute) and freezeview's reasons are read only when a rule is broken or someone reads
``report.facts``. These tests keep that shortcut honest: the statuses read off torch's
one listing of the paths are exactly the ones ``torch_statuses_only`` gives on every
corpus module, and a check gives the same report either way.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
import torch
from corpus import CASES, Case, params
from models.versions import save_version

import freezeview.engine.ci.model_facts as model_facts
import freezeview.engine.reasons.verdicts as verdicts
from freezeview.engine.ci.check import check, expectations_text
from freezeview.engine.ci.model_facts import _tensor_bytes, gather_facts, kept_tensor_bytes
from freezeview.engine.freeze.pipeline import Plan
from freezeview.engine.load.loading import LoadedModel, load_model
from freezeview.engine.reasons.torch_freeze import module_statuses, torch_outcome

OK_CASES = [case for case in CASES if not case.expect_error]


@pytest.mark.parametrize("case", params(OK_CASES))
def test_statuses_by_path_are_torch_statuses_only(case: Case) -> None:
    """One listing of the paths gives explain's statuses (shared modules, forks, objects)."""
    module = case.build()
    loaded = LoadedModel.from_module(module)
    outcome = torch_outcome(module._c, list(case.preserved_attrs))
    quick = module_statuses(outcome, module._c)
    full = verdicts.torch_statuses_only(loaded, case.preserved_attrs, outcome)
    if quick is None:
        # Only the module view can tell: constants folded inside a torch.jit.fork body
        # (explain resolves those), or an object torch cannot list in one call.
        if full is not None:
            with pytest.raises(RuntimeError):
                torch._C._jit_debug_module_iterators(module._c)
        return
    assert full is not None, "torch_statuses_only needs explain here; so must the shortcut"
    statuses, submodules = quick
    assert statuses == {v.path: v.status for v in full.attributes}
    assert submodules == {v.path for v in full.attributes if v.kind == "submodule"}
    kept = [p for p, s in statuses.items() if s == "kept" and p not in submodules]
    assert _outcome_of(lambda: _tensor_bytes(module._c, kept)) == _outcome_of(
        lambda: kept_tensor_bytes(loaded, full)
    )


def _outcome_of(compute: Any) -> Any:
    """What ``compute`` returns, or the name of what it raises (a kept sparse tensor has
    no storage to count: both ways fail alike)."""
    try:
        return compute()
    except Exception as exc:
        return type(exc).__name__


class Shared(torch.nn.Module):
    """One submodule under two names, and a tensor kept by an in-place write."""

    def __init__(self) -> None:
        super().__init__()
        self.a = torch.nn.Linear(4, 4)
        self.b = self.a
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return self.b(self.a(x))


@pytest.fixture(scope="module")
def shared(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("quick") / "shared.pt"
    torch.jit.save(torch.jit.script(Shared().eval()), str(path))
    return path


def _written(model: Path, folder: Path) -> Path:
    expect = folder / f"{model.stem}.toml"
    expect.write_text(expectations_text(gather_facts(load_model(model), Plan.default())))
    return expect


def _count_calls(monkeypatch: pytest.MonkeyPatch, module: Any, name: str) -> list[int]:
    calls = [0]
    real = getattr(module, name)

    def counted(*args: Any, **kwargs: Any) -> Any:
        calls[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, counted)
    return calls


def test_a_holding_check_reads_no_module_tree_until_asked(
    shared: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    expect = _written(shared, tmp_path)
    inventories = _count_calls(monkeypatch, verdicts, "build_inventory")
    explains = _count_calls(monkeypatch, model_facts, "explain")
    report = check(load_model(shared), expect)
    assert report.ok
    assert report.to_json()["kept_tensor_bytes"] == 12
    assert inventories == [0] and explains == [0]
    # report.facts is what gather_facts gives for the run, read on first use.
    facts = report.facts
    assert inventories == [1] and explains == [0]
    assert report.facts is facts
    expected = gather_facts(load_model(shared), Plan.default(), reasons=False)
    assert [(v.path, v.kind, v.status) for v in facts.explanation.attributes] == [
        (v.path, v.kind, v.status) for v in expected.explanation.attributes
    ]
    assert (facts.kept_bytes, facts.kept_tensors, facts.passes_fired, facts.node_kinds) == (
        expected.kept_bytes,
        expected.kept_tensors,
        expected.passes_fired,
        expected.node_kinds,
    )


def test_a_check_freezes_once_and_takes_no_picture(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """torch freezes once and runs each pass as often as torch.jit.freeze's loop does;
    freezeview takes no snapshot and lists no module tree for a check that holds."""
    import freezeview.engine.freeze.lazy_graph as steps

    path = save_version("base", tmp_path / "base.pt")
    expect = _written(path, tmp_path)
    freezes = _count_calls(monkeypatch, torch._C, "_freeze_module")
    folds = _count_calls(monkeypatch, torch._C, "_jit_pass_fold_frozen_conv_bn")
    snapshots = _count_calls(monkeypatch, steps, "snapshot_graph")
    inventories = _count_calls(monkeypatch, verdicts, "build_inventory")
    report = check(load_model(path), expect)
    assert report.ok and report.to_json()["passes_fired"]["fold_conv_bn"] == 1
    # Round 1 folds, round 2 finds nothing more: the loop of torch's optimize_frozen_graph.
    assert (freezes, folds, snapshots, inventories) == ([1], [2], [0], [0])


def _without_seconds(document: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in document.items() if key != "seconds"}


@pytest.mark.parametrize("broken", [False, True])
@pytest.mark.parametrize("model", ["shared", "in-place"])
def test_the_shortcut_gives_the_report_the_module_tree_gives(
    model: str,
    broken: bool,
    shared: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same rules, counts, violations and reasons with and without the shortcut."""
    path = shared if model == "shared" else save_version(model, tmp_path / f"{model}.pt")
    expect = _written(path, tmp_path)
    if broken:
        text = re.sub(r"kept = \[.*?\]", "kept = []", expect.read_text(), flags=re.DOTALL)
        text = re.sub(r"max_kept_tensor_bytes = \d+", "max_kept_tensor_bytes = 1", text)
        expect.write_text(text + "fold_conv_add_or_sub = 1\n")
    quick = check(load_model(path), expect)
    with monkeypatch.context() as patch:
        patch.setattr(model_facts, "module_statuses", lambda outcome, cmod: None)
        slow = check(load_model(path), expect)
    assert quick.torch_facts.statuses is not None and slow.torch_facts.statuses is None
    assert quick.ok is (not broken) and slow.ok is (not broken)
    assert json.dumps(_without_seconds(quick.to_json())) == json.dumps(
        _without_seconds(slow.to_json())
    )
