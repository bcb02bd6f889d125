"""The app marks a folded attribute the frozen graph still writes (``written-constant``):
its model tree row carries a red mark, and the inspector says so first.

torch is the oracle for which attributes those are: the constants torch's own frozen
module writes when run (``test_written_constants.torch_written_paths``).
"""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from corpus import case_by_name
from engine.reasons.test_written_constants import torch_written_paths
from rich.text import Text

from freezeview.ui.widgets.model_tree import WRITTEN_MARK, WRITTEN_STYLE

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


async def test_the_tree_and_the_inspector_mark_written_constants(tmp_path: Path) -> None:
    case = case_by_name("written_dict_value")  # `stats` is written, `scale` folded plainly
    written, _ = torch_written_paths(case)
    assert written == {"stats"}
    model = tmp_path / "dict.pt"
    torch.jit.save(case.build(), str(model))
    app = app_for(model, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        tree = screen.model_tree
        tree.focus()
        for path in ("stats", "scale"):
            assert tree.select_path(path)
            await pilot.pause()
            await pilot.pause()
            node = tree.cursor_node
            assert node is not None
            label = node.label if isinstance(node.label, Text) else Text(str(node.label))
            marked = [label.plain[s.start : s.end] for s in label.spans if s.style == WRITTEN_STYLE]
            body = screen.inspector.plain_text(width=400)
            if path in written:
                assert WRITTEN_MARK in label.plain and marked == [WRITTEN_MARK]
                # First in the inspector, before the attribute's own facts.
                assert body.lstrip().startswith("⚠ warning")
                assert body.index("mutates its own constant") < body.index("\nattribute ")
                assert 'self.stats["seen"].add_(1.0)' in body
                assert "troubleshooting.md#the-frozen-model-mutates-its-own-constants" in body
            else:
                assert WRITTEN_MARK not in label.plain and not marked
                assert "⚠ warning" not in body
