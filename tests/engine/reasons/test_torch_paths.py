"""torch's statuses by path (``engine/reasons/torch_paths.py``) read the paths explain's
inventory has listed: the same paths torch lists, and no second walk of the model."""

from __future__ import annotations

import pytest
from corpus import CASES, Case
from models.small import Counter, scripted

from freezeview.engine import explain
from freezeview.engine.graph import attribute_paths, build_inventory
from freezeview.engine.reasons import torch_paths
from freezeview.engine.reasons.verdicts import inventory_paths


def test_explain_walks_the_model_once_for_its_paths(monkeypatch: pytest.MonkeyPatch) -> None:
    def walked(*_args: object) -> None:
        raise AssertionError("listed the model's attribute paths a second time")

    monkeypatch.setattr(torch_paths, "attribute_paths", walked)
    assert explain(scripted(Counter)).attributes


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_inventorys_paths_are_torchs(case: Case) -> None:
    module = case.build()
    assert inventory_paths(build_inventory(module)) == attribute_paths(module._c)
