"""``release_clone`` (``engine/reasons/torch_freeze.py``): a frozen clone's graphs freed,
the model it came from untouched.

torch registers a clone's class types and methods in the compilation unit of the module
it was cloned from; that unit lives as long as the loaded model, so a model frozen again
and again (the app's re-runs) would keep every frozen graph and its folded constants.
"""

from __future__ import annotations

import torch
from torch import nn

from freezeview.engine import explain
from freezeview.engine.reasons.torch_freeze import release_clone


class _Pair(nn.Module):
    """Two submodules of one type (a shared class type), and a conv + bn to fold."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.bn(self.conv(x)).mean(dim=(2, 3))
        return self.b(self.a(y))


def _storage_owners(module: torch.jit.ScriptModule) -> dict[str, int]:
    return {
        name: torch._C._storage_Use_Count(p.untyped_storage()._cdata)
        for name, p in module.named_parameters()
    }


def test_release_frees_the_clone_and_keeps_the_model() -> None:
    model = torch.jit.script(_Pair().eval())
    x = torch.randn(2, 3, 6, 6)
    with torch.no_grad():  # (an autograd graph would hold the weights too)
        expected = model(x)
    owners = _storage_owners(model)
    for preserved in ([], ["a"], ["b.weight"]):
        # Not run: a method that ran keeps its executor's copy of the graph, which
        # torch offers no way to drop (the app never runs a frozen module's methods).
        frozen = torch.jit.freeze(model, preserved_attrs=preserved)
        assert _storage_owners(model) != owners  # the frozen graph holds them
        assert release_clone(frozen, model) >= 1
        assert frozen.graph.findNode("aten::linear") is None  # emptied for good
        del frozen  # a kept submodule's own slots go with it
        assert _storage_owners(model) == owners
    # The model's own code is untouched: it runs and freezes as before.
    with torch.no_grad():
        torch.testing.assert_close(model(x), expected)
        torch.testing.assert_close(torch.jit.freeze(model)(x), expected)


def test_explain_keeps_nothing_of_torchs_freeze() -> None:
    """explain freezes a clone to read torch's statuses, then lets it go."""
    model = torch.jit.script(_Pair().eval())
    owners = _storage_owners(model)
    for _ in range(3):
        statuses = {v.path: str(v.status) for v in explain(model).attributes}
        assert statuses["a.weight"] == "inlined"
    assert _storage_owners(model) == owners
