"""Engine costs that grow with the model (issue 23): work per attribute, per module and
per pickle record that stays constant as the model grows."""

from __future__ import annotations

from typing import Any

import torch

from freezeview.engine.freeze import fold_picture


def _stack(n: int) -> torch.jit.ScriptModule:
    layers = [torch.nn.Linear(2, 2) for _ in range(n)]
    return torch.jit.script(torch.nn.Sequential(*layers).eval())


def _inlined(module: torch.jit.ScriptModule) -> torch._C.Graph:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def test_fold_picture_sets_its_insert_point_once(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Setting a graph's insert point resets torch's count of inserts there, and with it
    the spacing of their positions: once per constant, a 100k-node graph was renumbered
    every forty constants. The constants still come first, in the order they are read."""
    module = _stack(6)
    graph = _inlined(module)
    guards = 0
    real = torch._C.Graph.insert_point_guard

    def counting(self: torch._C.Graph, point: Any) -> Any:
        nonlocal guards
        guards += 1
        return real(self, point)

    monkeypatch.setattr(torch._C.Graph, "insert_point_guard", counting)
    assert fold_picture.fold_graph(graph, module._c, set()) == set()
    assert guards == 1
    names = [node.output().debugName() for node in graph.nodes()][:12]
    expect = [f"self.{i}.{w}" for i in range(6) for w in ("weight", "bias")]
    # torch may suffix a debug name with a number; the paths and their order are what count.
    assert [name.split("_")[0] if name.count(".") == 2 else name for name in names] == expect
    assert not graph.findAllNodes("prim::GetAttr")  # type: ignore[attr-defined]
