"""torch decides: explain's statuses are what torch's real freeze did, in this run.

``engine/reasons/torch_freeze.py`` freezes a clone with torch and reads what it kept and folded;
``engine/reasons/agreement.py`` shows torch's status over the replay's. These tests check the
outcome against the test oracle (torch's frozen module and log, read independently),
break freezeview's replay on purpose to show that torch's status still wins, and cover
the families that used to defeat the listing itself: TorchScript class instances whose
Python class is not importable, and preserved methods of submodules.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import oracle
import pytest
import torch
from corpus import foreign
from models.small import Counter, example_module, scripted

from freezeview.engine import PlanError, explain
from freezeview.engine.graph.module_slots import OpaqueObject, attribute_paths, module_iterators
from freezeview.engine.plumbing.stderr_capture import capture_stderr_fd
from freezeview.engine.reasons.replay import FreezeReplay
from freezeview.engine.reasons.torch_freeze import FREEZE_LOG_LINE, torch_outcome


@pytest.fixture(scope="module")
def foreign_models(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Models built in another interpreter from a source file that no longer exists.

    Their TorchScript classes cannot be imported here, as when someone else's model is
    inspected (``tests/corpus/foreign.py`` builds them).
    """
    folder = tmp_path_factory.mktemp("foreign")
    for name in ("objects", "tool"):
        (folder / f"{name}.pt").write_bytes(foreign.archive(name))
    return folder


def _statuses(result: object) -> dict[str, str]:
    return {v.path: v.status for v in result.attributes}  # type: ignore[attr-defined]


# -- the outcome itself ---------------------------------------------------------------------


def test_outcome_matches_the_oracle_on_the_example() -> None:
    module = example_module().build()
    result = explain(module, ["temperature"])
    assert _statuses(result) == oracle.status_from_torch(module, ["temperature"])
    assert result.torch_seconds > 0
    assert any("Folding GetAttr" in line for line in result.torch_log)


def test_torch_freeze_lists_kept_paths_and_folded_constants() -> None:
    module = scripted(Counter)
    outcome = torch_outcome(module._c)
    assert outcome.kept == oracle.frozen_attribute_paths(oracle.torch_freeze(module))
    logged = oracle.freeze_with_log(module)
    assert list(outcome.folded) == logged.folded


def test_a_freeze_waiting_for_another_still_reads_its_own_folds() -> None:
    """Two freezes at once in one process (the app: an explain the user abandoned still
    freezing when the next starts) take turns at the captured log; the one that waited
    reads torch's log of its own freeze, though the one before switched logging off
    again as it ended (it used to see no fold, and called folded attributes dropped)."""
    import threading
    import time

    from freezeview.engine.plumbing import stderr_capture

    module = example_module().build()
    expected = torch_outcome(module._c).folded
    assert expected
    found: list[tuple[str, ...]] = []
    with stderr_capture._CAPTURE_LOCK:  # a freeze under way holds the capture
        waiting = threading.Thread(target=lambda: found.append(torch_outcome(module._c).folded))
        waiting.start()
        time.sleep(0.2)
        torch._C._jit_set_logging_option("")  # as the freeze under way leaves it
    waiting.join(60)
    assert found == [expected]


def test_freezing_log_never_reaches_the_terminal(capfd: pytest.CaptureFixture[str]) -> None:
    explain(example_module().build())
    err = capfd.readouterr().err
    assert "freeze_module.cpp" not in err


def test_other_output_during_the_capture_is_written_back(
    capfd: pytest.CaptureFixture[str],
) -> None:
    with capture_stderr_fd(FREEZE_LOG_LINE) as lines:
        os.write(2, b"[UPDATE freeze_module.cpp:1] Folding GetAttr %x with self.w\n")
        os.write(2, b"a spinner frame\n")
    assert lines == ["[UPDATE freeze_module.cpp:1] Folding GetAttr %x with self.w"]
    assert capfd.readouterr().err == "a spinner frame\n"


# -- torch's status wins over a wrong replay --------------------------------------------------


@pytest.mark.parametrize("wrong", [True, False], ids=["replay-keeps-all", "replay-keeps-none"])
def test_a_broken_replay_still_shows_torchs_status(
    monkeypatch: pytest.MonkeyPatch, wrong: bool
) -> None:
    module = example_module().build()
    truth = oracle.status_from_torch(module, ["temperature"])
    monkeypatch.setattr(FreezeReplay, "slot_survives", lambda self, mod, name: wrong)
    result = explain(module, ["temperature"])
    assert _statuses(result) == truth
    assert result.disagreements, "breaking the replay must show as disagreements"
    for disagreement in result.disagreements:
        verdict = result.by_path(disagreement.path)
        assert verdict is not None and verdict.status == disagreement.torch_status
        assert verdict.codes == ("undetermined",)
        assert "could not work out why" in verdict.reasons[0].message
        assert disagreement.replay_status != disagreement.torch_status
    doc = json.loads(json.dumps(result.to_json()))
    assert {d["path"] for d in doc["disagreements"]} == {d.path for d in result.disagreements}


def test_agreeing_replay_has_no_undetermined_reason() -> None:
    result = explain(example_module().build(), ["temperature"])
    assert result.disagreements == []
    assert all("undetermined" not in v.codes for v in result.attributes)


# -- TorchScript classes whose Python class is not importable --------------------------------


def test_script_class_objects_are_listed_without_python(foreign_models: Path) -> None:
    module = torch.jit.load(str(foreign_models / "objects.pt"))
    # What freezeview no longer calls: torch fails on the class it cannot import, in words
    # that vary by release ("not found", or an internal assert on older ones).
    with pytest.raises(RuntimeError):
        torch._C._jit_debug_module_iterators(module._c)
    values = dict(module_iterators(module._c)["named_attributes"])
    assert isinstance(values["scale"], OpaqueObject)
    assert values["scale"].type_name.endswith(".Scale")
    assert set(attribute_paths(module._c)) >= {"scale", "spare", "tally", "bias", "count"}


def test_script_class_statuses_and_reasons_match_torch(foreign_models: Path) -> None:
    module = torch.jit.load(str(foreign_models / "objects.pt"))
    result = explain(module)
    assert _statuses(result) == oracle.status_from_torch(module)
    assert result.disagreements == []
    scale = result.by_path("scale")
    assert scale is not None and scale.type.endswith(".Scale")
    # torch folds an object whose own method mutates a field: the object is the constant,
    # and the frozen graph writes into it on every call (a written constant).
    tally = result.by_path("tally")
    assert tally is not None and tally.status == "inlined"
    assert tally.codes == ("written-constant",)
    spare = result.by_path("spare")
    assert spare is not None and spare.status == "dropped"


def test_source_text_comes_from_the_archive(foreign_models: Path) -> None:
    module = torch.jit.load(str(foreign_models / "objects.pt"))
    result = explain(module)
    count = result.by_path("count")
    assert count is not None and count.codes == ("in-place-write",)
    reason = count.reasons[0]
    line = foreign.source_line("self.count.add_(1)")
    assert reason.source is not None and reason.source.endswith(f"their_models.py:{line}")
    assert not Path(reason.source.rsplit(":", 1)[0]).exists()
    assert reason.source_text == "self.count.add_(1)"
    assert result.to_json()["attributes"][0]["reasons"] is not None


# -- preserved methods of submodules ---------------------------------------------------------


def test_a_submodule_method_is_accepted_as_torch_accepts_it(foreign_models: Path) -> None:
    module = torch.jit.load(str(foreign_models / "tool.pt"))
    frozen = oracle.torch_freeze(module, ["tool.square"])
    assert frozen.tool.square(torch.ones(4)).tolist() == [1.0] * 4
    result = explain(module, ["tool.square"])
    assert _statuses(result) == oracle.status_from_torch(module, ["tool.square"])
    tool = result.by_path("tool")
    assert tool is not None and tool.status == "kept"
    assert tool.codes[0] == "preserved" and "tool.square" in tool.reasons[0].message
    assert "tool.square" in result.methods


def test_a_submodule_method_torch_cannot_freeze_is_one_sentence() -> None:
    class Tool(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.k = torch.nn.Parameter(torch.ones(2))

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return x + self.k

        @torch.jit.export
        def scaled(self, x: torch.Tensor) -> torch.Tensor:
            return x * self.k

    class Holder(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.tool = Tool()

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.tool(x)

    module = torch.jit.script(Holder().eval())
    with pytest.raises(RuntimeError, match="does not have a field with name 'k'"):
        oracle.torch_freeze(module, ["tool.scaled"])
    with pytest.raises(PlanError) as caught:
        explain(module, ["tool.scaled"])
    message = str(caught.value)
    assert "\n" not in message and "'k'" in message and "preserve the submodule" in message
