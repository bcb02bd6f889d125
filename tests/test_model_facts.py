"""The facts check and compare read off one run: node kinds, kept bytes."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from corpus import case_by_name
from oracle import frozen_graph_signature

from freezeview.engine.loading import LoadedModel
from freezeview.engine.model_facts import _node_kinds, gather_facts
from freezeview.engine.pipeline import Plan


@pytest.mark.parametrize(
    "name", ["control_flow", "training_branch", "conv_bn_relu", "fork", "quant_dynamic_lstm"]
)
def test_node_kinds_from_the_printout_equal_a_walk_of_the_nodes(name: str) -> None:
    frozen = torch.jit.freeze(case_by_name(name).build())
    walked: Counter[str] = Counter()
    for method in frozen._c._method_names():
        walked += frozen_graph_signature(frozen._c._get_method(method).graph)
    assert _node_kinds(frozen) == walked


def test_kept_bytes_count_a_shared_storage_once() -> None:
    class Tied(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.register_buffer("whole", torch.zeros(8))
            self.register_buffer("part", self.whole[:4])

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            self.part.add_(1)
            return x + self.whole

    facts = gather_facts(LoadedModel.from_module(torch.jit.script(Tied().eval())), Plan.default())
    kept = {p for p, _ in facts.kept_tensors}
    frozen = torch.jit.freeze(torch.jit.script(Tied().eval()))
    assert kept == {p for p in ("whole", "part") if frozen._c.hasattr(p)} == {"whole", "part"}
    assert facts.kept_bytes == 8 * 4  # one float32 storage of 8 elements
