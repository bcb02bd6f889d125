"""check without sample inputs measures the result only, unless a rule is broken.

A ``[deployment]`` section is held against the frozen result's constant bytes and
portability. Each step's figures (its picture's constant bytes, the step that brought in
backend-only nodes) only name the step to blame when a rule breaks, and measuring them
builds every step's picture: on a stack of 2,048 blocks the fold step's picture alone
was a third of check. check now measures them only to explain a broken rule, and the
report is the same as measuring every step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from measure_models import small_conv_net

from freezeview.cli import main
from freezeview.engine.ci.check import check
from freezeview.engine.freeze.pipeline import Pipeline


@pytest.fixture(scope="module")
def written(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("final-only")
    model = folder / "small.pt"
    torch.jit.save(small_conv_net(), str(model))
    expect = folder / "small.toml"
    assert main(["check", str(model), "--write-expect", str(expect)]) == 0
    assert "max_constant_bytes = " in expect.read_text()
    return model, expect


def _pictures(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """Counts the step pictures built (Pipeline.step_graphs calls)."""
    count = [0]
    original = Pipeline.step_graphs

    def counted(self: Pipeline, step: object) -> object:
        count[0] += 1
        return original(self, step)  # type: ignore[arg-type]

    monkeypatch.setattr(Pipeline, "step_graphs", counted)
    return count


def _results(report) -> list[tuple[str, tuple[str, ...]]]:  # type: ignore[no-untyped-def]
    return [(r.rule.title, tuple(v.message for v in r.violations)) for r in report.results]


def test_rules_that_hold_build_no_step_picture(
    written: tuple[Path, Path], monkeypatch: pytest.MonkeyPatch
) -> None:
    model, expect = written
    pictures = _pictures(monkeypatch)
    report = check(model, expect)
    assert report.ok and pictures[0] == 0
    assert not report.torch_facts.per_step
    sizes = report.torch_facts.measurement.sizes
    assert sizes is not None and sizes.constant_bytes > 0


def test_a_broken_constant_limit_still_names_the_step(
    written: tuple[Path, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model, expect = written
    broken = tmp_path / "tight.toml"
    broken.write_text(
        re.sub(r"max_constant_bytes = \d+", "max_constant_bytes = 16", expect.read_text())
    )
    pictures = _pictures(monkeypatch)
    report = check(model, broken)
    assert not report.ok and pictures[0] > 0 and report.torch_facts.per_step
    (violation,) = [v for v in report.violations if v.message.startswith("constant bytes")]
    assert "; step 1 (fold_attributes: " in violation.message and " added " in violation.message
    # The same report as measuring every step from the start.
    from freezeview.engine.ci import model_facts

    original = model_facts.torch_facts
    monkeypatch.setattr(
        model_facts, "torch_facts", lambda *a, **k: original(*a, **{**k, "per_step": True})
    )
    import freezeview.engine.ci.check as check_module

    monkeypatch.setattr(check_module, "torch_facts", model_facts.torch_facts)
    assert _results(check(model, broken)) == _results(report)
