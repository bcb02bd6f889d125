"""The facts check and compare read off one run: node kinds, kept bytes."""

from __future__ import annotations

from collections import Counter

import pytest
import torch
from corpus import case_by_name
from oracle import frozen_graph_signature

from freezeview.engine.ci.model_facts import _node_kinds, gather_facts
from freezeview.engine.freeze.pipeline import Plan
from freezeview.engine.load.loading import LoadedModel


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


def test_a_kept_sparse_buffer_counts_its_indices_and_values(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """A sparse tensor has no storage (torch keeps it as an attribute): its bytes are
    those of its index and value tensors, and check and compare report them."""
    from freezeview.engine.ci.check import check, expectations_text
    from freezeview.engine.ci.compare import compare

    module = case_by_name("sparse_buffer").build()
    facts = gather_facts(LoadedModel.from_module(module), Plan.default())
    frozen = torch.jit.freeze(case_by_name("sparse_buffer").build())
    sparse = frozen._c.getattr("adjacency")
    assert sparse.layout == torch.sparse_coo  # torch kept it
    expected = sparse._indices().nbytes + sparse._values().nbytes
    assert dict(facts.kept_tensors)["adjacency"] == expected
    assert facts.kept_bytes == expected

    path = tmp_path / "sparse.pt"
    torch.jit.save(module, str(path))
    rules = tmp_path / "sparse.toml"
    rules.write_text(expectations_text(facts))
    assert check(path, rules).ok
    assert compare(path, path).to_json()["kept_tensor_bytes"] == {"old": expected, "new": expected}


@pytest.mark.parametrize(
    "make",
    [
        lambda: torch.eye(5).to_sparse_csr(),
        lambda: torch.eye(5).to_sparse_csc(),
        lambda: torch.ones(3, 4).to_mkldnn(),
    ],
    ids=["csr", "csc", "mkldnn"],
)
def test_tensors_without_their_own_storage_count_what_they_hold(make) -> None:  # type: ignore[no-untyped-def]
    from freezeview.engine.ci.model_facts import _storages

    tensor = make()
    size = sum(n for _key, n in _storages(tensor))
    if tensor.layout == torch.sparse_csr:
        parts = (tensor.crow_indices(), tensor.col_indices(), tensor.values())
    elif tensor.layout == torch.sparse_csc:
        parts = (tensor.ccol_indices(), tensor.row_indices(), tensor.values())
    else:  # no storage at all: the bytes of its elements
        assert size == tensor.numel() * tensor.element_size()
        return
    assert size == sum(p.untyped_storage().nbytes() for p in parts)
