"""The app on a quantized model: the tree's statuses are what the frozen IR shows.

A static-quantized network's packed weights are TorchScript objects that freezing folds
into ``prim::Constant[value=object(...)]``; the tree must call them inlined, and every
attribute it calls kept must still be read by a ``prim::GetAttr`` at the last step.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch
from corpus import case_by_name

from freezeview.engine.load.loading import LoadedModel
from freezeview.ui.app import FreezeviewApp

from .conftest import wait_ready

pytestmark = pytest.mark.asyncio
SIZE = (160, 48)
# `%self.fc._packed_params._packed_params : ... = prim::Constant[...]`: freezing names
# each folded attribute's constant "self." + its path (a `.N` suffix when names collide).
_CONSTANT = re.compile(r"%self\.(?P<path>[\w.]+?)(?:\.\d+)? : [^=]+= prim::Constant")
_GETATTR = re.compile(r'prim::GetAttr\[name="(?P<name>\w+)"\]')


@pytest.mark.slow
async def test_tree_statuses_match_the_final_ir_of_a_quantized_model(tmp_path: Path) -> None:
    module = case_by_name("quant_static_conv_bn_relu_fused").build()
    loaded = LoadedModel.from_module(module, name="quantized.pt")
    app = FreezeviewApp(loaded=loaded, output_dir=tmp_path / "out")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert not screen.has_class("-failed")
        while screen.current_step < len(screen.steps) - 1:
            await pilot.press("n")
        final = "\n".join(screen.ir.plain_lines())
        views = [v for v in screen.model_tree.summaries if v.kind != "submodule"]

    constants = {m["path"] for m in _CONSTANT.finditer(final)}
    read = {m["name"] for m in _GETATTR.finditer(final)}
    inlined = [v.path for v in views if v.status == "inlined"]
    kept = [v.path for v in views if v.status == "kept"]
    packed = [p for p in inlined if p.endswith("_packed_params")]
    assert packed, "the packed weights must be called inlined"
    assert "prim::Constant[value=object(" in final
    # Scalars read once may be folded further by later passes; objects and tensors stay.
    for path in packed:
        assert path in constants, f"{path} is called inlined but is no constant:\n{final}"
    for path in kept:
        assert path.rsplit(".", 1)[-1] in read, f"{path} is called kept but never read"
    # And the tree agrees with torch itself on this model.
    frozen = torch.jit.freeze(module)
    assert ("prim::GetAttr" in str(frozen.graph)) == bool(kept)
