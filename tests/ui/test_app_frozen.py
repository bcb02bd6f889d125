"""The app on an already-frozen model (torch.jit.freeze's output, saved and loaded back).

Such a module has no ``training`` flag: the app used to stop with an AttributeError. It
opens, says the model is already frozen, explains it and runs the steps that still
change it, ending on what torch gives when it freezes the module again.
"""

from __future__ import annotations

from pathlib import Path

import oracle
import pytest
from corpus import case_by_name

from freezeview.engine.load.loading import LoadedModel
from freezeview.ui.app import FreezeviewApp

from .conftest import step_graph, wait_ready

pytestmark = pytest.mark.asyncio
SIZE = (160, 48)


async def test_an_already_frozen_model_opens_and_freezes_again(tmp_path: Path) -> None:
    case = case_by_name("frozen_no_optimize")
    loaded = LoadedModel.from_module(case.build(), name="frozen.pt")
    app = FreezeviewApp(loaded=loaded, output_dir=tmp_path / "out")
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert not screen.has_class("-failed")
        assert any("already frozen" in w for w in app.captured_warnings)
        steps = list(screen.steps)
        final = step_graph(screen, -1) if steps else None
    assert steps and all(not s.error for s in steps)
    # The last step is torch's own freeze of the frozen module: the same node kinds.
    theirs = oracle.frozen_graph_signature(oracle.torch_freeze(case.build()).graph)
    assert final is not None and final.kinds() == theirs
    assert not theirs["aten::batch_norm"]  # what the first freeze had left is folded now
