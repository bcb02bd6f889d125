"""A run shown an earlier run's inline and fold steps (``Pipeline.offer_steps``): the
same steps as a fresh run, and torch's own result at the end."""

from __future__ import annotations

import torch
from oracle import frozen_graph_signature as kinds_of
from torch import nn

from freezeview.engine.freeze.pipeline import Pipeline, Plan


class _Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))) * self.scale


def _rows(steps: list) -> list[tuple[object, ...]]:  # type: ignore[type-arg]
    return [
        (s.name, s.changed, s.node_count, s.nodes_added, s.nodes_removed, s.folded, s.kept)
        for s in steps
    ]


def test_offered_steps_are_shown_again_and_the_result_is_torchs() -> None:
    module = torch.jit.script(_Net().eval())
    first = Pipeline(module)
    steps = first.run_all()
    offered = first.picture_steps
    assert offered is not None and offered.inline is steps[0] and offered.fold is steps[1]
    rows = _rows(steps)
    first.release()
    second = Pipeline(module)
    second.offer_steps(offered)
    again = second.run_all()
    assert again[0] is steps[0] and again[1] is steps[1]
    assert _rows(again) == rows
    assert second.frozen_module is not None
    expected = torch.jit.freeze(torch.jit.script(_Net().eval()))
    assert kinds_of(second.frozen_module.graph) == kinds_of(expected.graph)
    second.release()
    assert second.offered_steps is None and second.picture_steps is None


def test_another_freeze_shows_the_inline_step_and_folds_anew() -> None:
    """Other preserved attributes: the same methods inline the same, the fold step is
    this freeze's (as a fresh pipeline's), and the result is torch's."""
    module = torch.jit.script(_Net().eval())
    first = Pipeline(module)
    steps = first.run_all()
    offered = first.picture_steps
    first.release()
    other = Pipeline(module, Plan.default(("scale",)))
    other.offer_steps(offered)
    again = other.run_all()
    assert again[0] is steps[0] and again[1] is not steps[1]
    assert "scale" in again[1].kept and "scale" not in steps[1].kept
    fresh = Pipeline(module, Plan.default(("scale",)))
    assert _rows(again) == _rows(fresh.run_all())
    assert other.frozen_module is not None
    expected = torch.jit.freeze(torch.jit.script(_Net().eval()), preserved_attrs=["scale"])
    assert kinds_of(other.frozen_module.graph) == kinds_of(expected.graph)
    for pipe in (other, fresh):
        pipe.release()


def test_a_preserved_method_is_inlined_anew() -> None:
    """Another method shown is another picture: the offered steps are not shown."""
    module = torch.jit.script(_WithMethod().eval())
    first = Pipeline(module)
    steps = first.run_all()
    offered = first.picture_steps
    first.release()
    other = Pipeline(module, Plan.default(("double",)))
    other.offer_steps(offered)
    again = other.run_all()
    assert again[0] is not steps[0] and again[1] is not steps[1]
    other.release()


class _WithMethod(_Net):
    @torch.jit.export
    def double(self, x: torch.Tensor) -> torch.Tensor:
        return self.forward(x) * 2
