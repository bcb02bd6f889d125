"""Submodules run through ``torch.jit.fork``: torch's statuses, the same on every run.

torch freezes a fork's body against the submodule it is handed and logs the constants
folded there relative to that submodule; with two submodules of one type the log names
the same constants twice. freezeview reads the log in order (each fork body, where it
ends), so each branch gets its own statuses, whatever the process's hash seed; a fork
that still holds its module keeps it, with the reason ``forked``. Everything is compared
with torch on the same module (``oracle``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import oracle
import pytest
import torch
from corpus import case_by_name

from freezeview.engine import explain
from freezeview.engine.graph import attribute_paths, build_inventory
from freezeview.engine.reasons.module_objects import ModuleView
from freezeview.engine.reasons.replay import FreezeReplay
from freezeview.engine.reasons.torch_freeze import folded_paths, torch_outcome
from freezeview.engine.reasons.torch_paths import fork_bodies

FORK_CASES = ["fork", "fork_shared_type", "fork_distinct_types", "fork_nested"]


@pytest.mark.parametrize("name", FORK_CASES)
def test_folded_constants_are_read_back_to_torch_s_paths(name: str) -> None:
    """Each constant folded in a fork's body is named after the branch it came from."""
    module = case_by_name(name).build()
    iterators: dict[int, object] = {}
    inventory = build_inventory(module, iterators)
    replay = FreezeReplay(ModuleView(module._c, iterators), [], inventory, True, name)
    replay.prepare_graphs()
    outcome = torch_outcome(module._c)
    found = folded_paths(outcome.log, attribute_paths(module._c), fork_bodies(replay))
    assert set(found) == oracle.torch_inlined_paths(module)
    assert len(found) == len(outcome.folded)  # one path per line of torch's log


def test_two_forked_submodules_of_one_type_get_torch_s_statuses() -> None:
    module = case_by_name("fork_shared_type").build()
    expected = oracle.status_from_torch(module)
    result = explain(module)
    got = {v.path: v.status for v in result.attributes}
    assert got == expected
    assert not result.disagreements
    # torch keeps both forked branches and inlines both branches' weights.
    assert expected["a"] == expected["b"] == "kept"
    assert expected["a.fc.weight"] == expected["b.fc.weight"] == "inlined"
    assert expected["scale"] == "inlined"  # the root's own `scale`, read after the forks


@pytest.mark.parametrize("name", ["fork_shared_type", "fork_distinct_types", "fork_nested"])
def test_a_kept_forked_module_says_forked_and_names_no_folded_attribute(name: str) -> None:
    module = case_by_name(name).build()
    survivors = oracle.frozen_attribute_paths(oracle.torch_freeze(case_by_name(name).build()))
    result = explain(module)
    forked = [v for v in result.attributes if "forked" in v.codes]
    assert forked, "a forked module torch keeps says so"
    for verdict in forked:
        assert verdict.status == "kept" and verdict.path in survivors
        assert verdict.codes == ("forked",)
        reason = verdict.reasons[0]
        assert reason.node and "prim::fork" in reason.node
        assert reason.source and reason.source.rsplit(":", 1)[-1].isdigit()
    for verdict in result.attributes:
        for reason in verdict.reasons:
            if reason.code == "holds-kept":
                held = reason.message.split(":", 1)[1]
                for name_ in (n.strip() for n in held.split(",") if n.strip() != "..."):
                    assert name_.startswith(f"{verdict.path}."), reason.message
                    assert name_ in survivors, reason.message


@pytest.mark.slow
def test_statuses_do_not_change_with_the_hash_seed(tmp_path: Path) -> None:
    """The branch a constant is credited to never depended on chance (string hashing)."""
    model = tmp_path / "forked.pt"
    torch.jit.save(case_by_name("fork_shared_type").build(), str(model))
    outputs = []
    for seed in ("1", "2", "3"):
        env = {**os.environ, "PYTHONHASHSEED": seed}
        argv = [sys.executable, "-m", "freezeview", "explain", str(model), "--json"]
        run = subprocess.run(argv, capture_output=True, text=True, env=env, check=True)
        doc = json.loads(run.stdout)
        outputs.append(
            {a["path"]: (a["status"], a["reasons"][0]["code"]) for a in doc["attributes"]}
        )
        assert not doc["disagreements"]
    assert outputs[0] == outputs[1] == outputs[2]


def test_a_tensor_handed_to_a_fork_names_the_fork() -> None:
    """Alias analysis takes a fork's arguments as written: the fork is the writer named."""
    module = case_by_name("fork_function").build()
    expected = oracle.status_from_torch(module)
    verdict = explain(module).by_path("w")
    assert verdict is not None and verdict.status == expected["w"] == "kept"
    reason = verdict.reasons[0]
    assert reason.code == "in-place-write" and len(verdict.reasons) == 1
    assert reason.node and "prim::fork" in reason.node and "%w" in reason.node
    assert reason.source and reason.source_text and "torch.jit.fork" in reason.source_text
