"""The app explains the same loaded model again at every toggle of a preserved
attribute: its module tree is listed once, and every explanation still agrees with torch."""

from __future__ import annotations

import torch
from torch import nn

from freezeview.engine.reasons import verdicts


def _recorded(monkeypatch, name: str) -> list[object]:  # type: ignore[no-untyped-def]
    """The first argument of every call of ``verdicts.<name>`` from now on (it still runs)."""
    real = getattr(verdicts, name)
    calls: list[object] = []

    def recording(*args, **kwargs):  # type: ignore[no-untyped-def]
        calls.append(args[0])
        return real(*args, **kwargs)

    monkeypatch.setattr(verdicts, name, recording)
    return calls


class _Counter(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.linear = nn.Linear(3, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.linear(x) * self.scale


def test_a_second_explanation_of_the_same_model_lists_its_tree_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    module = torch.jit.script(_Counter().eval())
    calls = _recorded(monkeypatch, "build_inventory")
    first = verdicts.explain(module)
    second = verdicts.explain(module, preserved_attrs=["scale"])
    assert len(calls) == 1
    assert second.inventory is first.inventory
    # torch decides each time: the status follows whether torch's frozen module kept it.
    for explanation, preserved in ((first, []), (second, ["scale"])):
        frozen = torch.jit.freeze(module, preserved_attrs=preserved)
        verdict = explanation.by_path("scale")
        assert verdict is not None
        assert (verdict.status == "kept") == hasattr(frozen, "scale")
    # Another model is listed on its own.
    verdicts.explain(torch.jit.script(_Counter().eval()))
    assert len(calls) == 2


class _Shared(nn.Module):
    """One linear under two names, and a scalar: torch's statuses name the shared slots
    one way (by the first name) whatever name the user preserves."""

    def __init__(self) -> None:
        super().__init__()
        self.first = nn.Linear(3, 3)
        self.second = self.first
        self.scale = 2.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.second(self.first(x)) * self.scale


def test_torch_statuses_at_every_toggle_name_the_tree_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from freezeview.engine.load import LoadedModel
    from freezeview.engine.reasons.torch_freeze import torch_outcome

    module = torch.jit.script(_Shared().eval())
    loaded = LoadedModel(module=module, path=None, name="shared")
    views = _recorded(monkeypatch, "ModuleView")
    plans = ([], ["scale"], ["second.weight"], ["first.bias", "scale"], [])
    for preserved in plans:
        quick = verdicts.torch_statuses_only(loaded, preserved, torch_outcome(module._c, preserved))
        assert quick is not None
        # torch decides: kept exactly when torch's own frozen module still has it.
        frozen = torch.jit.freeze(module, preserved_attrs=preserved)
        for path in ("scale", "first.weight", "second.weight", "first.bias"):
            held: object = frozen
            for part in path.split("."):
                held = getattr(held, part, None)
            verdict = quick.by_path(path)
            assert verdict is not None
            assert (verdict.status == "kept") == (held is not None), (preserved, path)
        # The same statuses as the full explanation's (which makes its own objects).
        full = verdicts.explain(module, preserved_attrs=preserved)
        assert {v.path: v.status for v in quick.attributes} == {
            v.path: v.status for v in full.attributes
        }
    # One for torch's statuses of every plan, one for each full explanation's replay.
    assert len(views) == 1 + len(plans)
