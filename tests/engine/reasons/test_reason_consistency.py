"""A verdict's reasons agree with its status, and a write found through alias analysis's
one set for every tensor in a list says so.

torch is the oracle for every status: the frozen module's attributes.
"""

from __future__ import annotations

import oracle
import torch
from torch import nn

from freezeview.engine import REASON_CODES, Explanation, explain


def _torch_kept(module: torch.jit.ScriptModule) -> set[str]:
    return oracle.frozen_attribute_paths(torch.jit.freeze(module))


def _consistent(status: str, code: str) -> bool:
    """A code whose meaning names a status ("kept: ...") goes with that status only."""
    meaning = REASON_CODES[code]
    named = meaning.split(":", 1)[0]
    return named not in ("kept", "inlined", "dropped") or named == status


def _explained(module: torch.jit.ScriptModule) -> Explanation:
    result = explain(module)
    assert {v.path for v in result.with_status("kept")} == _torch_kept(module)
    for verdict in result.attributes:
        for reason in verdict.reasons:
            assert _consistent(verdict.status, reason.code), (verdict.path, reason)
    return result


def test_a_dropped_num_batches_tracked_has_no_kept_reason() -> None:
    module = torch.jit.script(nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)).eval())
    result = _explained(module)
    verdict = result.by_path("1.num_batches_tracked")
    assert verdict is not None
    assert "1.num_batches_tracked" not in _torch_kept(module)
    assert verdict.status == "dropped"
    assert set(verdict.codes) == {"dead-code"}
    # The write in the removed training branch is still named, as removed with it.
    written = [r for r in verdict.reasons if r.node and "add_" in r.node]
    assert written and "freezing removes the write" in written[0].message


class _ListThenFill(nn.Module):
    """A parameter put in a list; another element of the list is filled in place."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))
        self.v = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs: list[torch.Tensor] = [self.w]
        xs.append(x * 2)
        y = xs[1]
        y.masked_fill_(y > 0, 0.0)
        return xs[0] + y + self.v


class _ListOnly(nn.Module):
    """A parameter put in a list that is appended to: no tensor is written in place."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.randn(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        xs: list[torch.Tensor] = [self.w]
        xs.append(x * 2)
        return xs[0] + xs[1]


def test_a_write_through_the_list_set_is_named_as_such() -> None:
    module = torch.jit.script(_ListThenFill().eval())
    result = _explained(module)
    w, v = result.by_path("w"), result.by_path("v")
    assert w is not None and v is not None
    assert (w.status, v.status) == ("kept", "inlined")  # as torch: see _explained
    kinds = {r.node.split("=", 1)[1].split("(")[0].strip() for r in w.reasons if r.node}
    # The list's append writes the list, not the tensors in it: not a reason.
    assert kinds == {"aten::masked_fill_"}
    message = w.reasons[0].message
    assert "every tensor" in message and "list" in message and "so torch keeps" in message
    assert "folds once" in message


def test_an_append_alone_keeps_nothing() -> None:
    module = torch.jit.script(_ListOnly().eval())
    verdict = _explained(module).by_path("w")
    assert verdict is not None and verdict.status == "inlined"


def test_a_transformer_encoders_in_proj_weight_says_why() -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(64, 4, batch_first=True)
    module = torch.jit.script(nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval())
    result = _explained(module)
    verdict = result.by_path("layers.0.self_attn.in_proj_weight")
    assert verdict is not None and verdict.status == "kept"
    assert verdict.codes and set(verdict.codes) == {"in-place-write"}
    for reason in verdict.reasons:
        assert reason.node is not None and "aten::append" not in reason.node
        assert "one set it keeps for every tensor" in reason.message
