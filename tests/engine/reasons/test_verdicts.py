"""explain: verdicts and reasons on small modules and on the bundled example.

The broad agreement with torch is ``test_explain_vs_torch.py``; here each reason code
is pinned to a module that must produce it, and each verdict is still checked against
what ``torch.jit.freeze`` leaves on the module.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from models import small
from models.small import Counter, Tied, example_module, scripted

from freezeview.engine import REASON_CODES, PlanError, explain
from freezeview.engine.load.loading import LoadedModel


def _torch_kept(module: torch.jit.ScriptModule, preserved: list[str] | None = None) -> set[str]:
    frozen = torch.jit.freeze(module, preserved_attrs=preserved or [])
    kept: set[str] = set()
    stack = [("", frozen._c)]
    while stack:
        prefix, cmod = stack.pop()
        for name, value in torch._C._jit_debug_module_iterators(cmod)["named_attributes"]:
            path = f"{prefix}.{name}" if prefix else name
            kept.add(path)
            if isinstance(value, torch._C.ScriptModule):
                stack.append((path, value))
    return kept


def _check_against_torch(module: torch.jit.ScriptModule, preserved: list[str] | None = None):  # type: ignore[no-untyped-def]
    result = explain(module, preserved or [])
    kept = _torch_kept(module, preserved)
    ours = {v.path for v in result.with_status("kept")}
    assert ours == kept
    return result


def _line_of(snippet: str) -> int:
    lines = Path(small.__file__).read_text().splitlines()
    return next(i for i, line in enumerate(lines, 1) if snippet in line)


def test_in_place_set_attr_and_view_writes_are_named() -> None:
    result = _check_against_torch(scripted(Counter))
    count = result.by_path("count")
    assert count is not None and count.status == "kept"
    reason = count.reasons[0]
    assert reason.code == "in-place-write" and "aten::add_" in (reason.node or "")
    assert reason.source is not None and reason.source.endswith(
        f"small.py:{_line_of('self.count.add_(1)')}"
    )
    table = result.by_path("table")
    assert table is not None and table.codes == ("in-place-write",)
    assert "aten::mul_" in table.reasons[0].message and "%row" in table.reasons[0].message
    calls = result.by_path("calls")
    assert calls is not None and calls.codes == ("set-attr",)
    assert calls.reasons[0].source is not None and calls.reasons[0].source.endswith(
        f"small.py:{_line_of('self.calls = self.calls + 1')}"
    )
    weight = result.by_path("weight")
    assert weight is not None and weight.status == "inlined" and weight.codes == ("folded",)


def test_alias_of_a_written_buffer_is_kept_with_aliases_mutable() -> None:
    result = _check_against_torch(scripted(Tied))
    alias = result.by_path("alias")
    assert alias is not None and alias.status == "kept"
    assert alias.codes == ("aliases-mutable",)
    assert "'state'" in alias.reasons[0].message


def test_preserved_names_and_dotted_paths() -> None:
    module = scripted(Counter)
    result = _check_against_torch(module, ["weight"])
    weight = result.by_path("weight")
    assert weight is not None and weight.status == "kept" and weight.codes[0] == "preserved"
    assert result.preserved_attrs == ("weight",)


def test_unknown_preserved_name_suggests_close_names() -> None:
    with pytest.raises(PlanError) as caught:
        explain(scripted(Counter), ["wieght"])
    message = str(caught.value)
    assert "'wieght'" in message and "closest: weight" in message
    assert "\n" not in message and caught.value.exit_code == 1


def test_training_mode_is_refused_with_the_fix() -> None:
    module = torch.jit.script(Counter())
    with pytest.raises(PlanError, match=r"training mode.*--eval"):
        explain(module)


def test_example_model_shows_every_outcome() -> None:
    example = example_module()
    module = example.build()
    result = _check_against_torch(module, ["temperature"])
    expect = {
        "temperature": ("kept", "preserved"),
        "steps": ("kept", "in-place-write"),
        "history": ("kept", "in-place-write"),
        "last_scale": ("kept", "set-attr"),
        "legacy_table": ("dropped", "unused"),
        "calibrator": ("dropped", "unused"),
        "conv.weight": ("inlined", "folded"),
        "bn.num_batches_tracked": ("dropped", "dead-code"),
    }
    for path, (status, code) in expect.items():
        verdict = result.by_path(path)
        assert verdict is not None, path
        assert (verdict.status, verdict.codes[0]) == (status, code), path
    calibrator = result.by_path("calibrator")
    assert calibrator is not None and "--preserve calibrate" in calibrator.reasons[0].message
    # Preserving the exported method keeps the submodule state it assigns.
    with_method = _check_against_torch(module, ["calibrate"])
    seen = with_method.by_path("calibrator.seen")
    assert seen is not None and seen.status == "kept" and seen.codes == ("set-attr",)
    assert seen.reasons[0].method == "calibrate"


def test_every_kept_attribute_has_a_documented_reason() -> None:
    result = explain(example_module().build(), ["temperature", "calibrate"])
    for verdict in result.attributes:
        assert verdict.reasons, verdict.path
        for reason in verdict.reasons:
            assert reason.code in REASON_CODES


def test_json_follows_the_contract() -> None:
    loaded = LoadedModel.from_module(example_module().build(), name="example")
    doc = json.loads(json.dumps(explain(loaded, ["temperature"]).to_json()))
    assert set(doc) >= {"model", "torch_version", "plan", "attributes"}
    assert doc["plan"]["preserved_attrs"] == ["temperature"]
    first = doc["attributes"][0]
    assert set(first) >= {"path", "kind", "type", "status", "reasons"}
    assert {r["code"] for a in doc["attributes"] for r in a["reasons"]} <= set(REASON_CODES)
    statuses = {a["status"] for a in doc["attributes"]}
    assert statuses == {"inlined", "kept", "dropped"}
    reason = next(a for a in doc["attributes"] if a["path"] == "steps")["reasons"][0]
    assert set(reason) == {"code", "message", "node", "source", "method", "source_text"}


def test_explain_leaves_the_module_untouched() -> None:
    module = scripted(Counter)
    graph_before = str(module.forward.graph)
    count_before = module.count.clone()
    explain(module)
    assert str(module.forward.graph) == graph_before
    assert torch.equal(module.count, count_before)


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        ("attempted to freeze a module that return itself", "returns the module itself"),
        (
            "Freezing modules containing prim::ModuleContainerIndex is not supported",
            "prim::ModuleContainerIndex",
        ),
        ("failed to freeze interface attribute 'transform'", "interface attribute 'transform'"),
        ("module contains attributes values that overlaps [1, 2]", "overlapping values"),
        ("Unknown name: bogus", "unknown name 'bogus'"),
        ("something new\n  with detail", "torch refused to freeze m.pt: something new"),
    ],
)
def test_torch_refusals_become_freezeviews_sentences(message: str, expected: str) -> None:
    from freezeview.engine.reasons.refusals import torch_refusal

    sentence = torch_refusal(message, "m.pt")
    assert expected in sentence and "m.pt" in sentence and "\n" not in sentence
