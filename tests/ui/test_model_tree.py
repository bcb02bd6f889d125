"""The Model pane's tree (``ui/widgets/model_tree.py``): its header at real sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.ui.views import AttrView

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


def _views(inlined: int, kept: int, dropped: int) -> list[AttrView]:
    counts = {"inlined": inlined, "kept": kept, "dropped": dropped}
    return [
        AttrView(f"layers.{i}.{status}", "parameter", "Tensor", status)
        for status, n in counts.items()
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("inlined", "kept", "dropped", "status_filter"),
    [(374, 49, 258, "all"), (12288, 2048, 10240, "all"), (374, 49, 258, "dropped")],
)
@pytest.mark.slow
async def test_the_header_fits_at_160_columns(
    small_pt: Path,
    tmp_path: Path,
    inlined: int,
    kept: int,
    dropped: int,
    status_filter: str,
) -> None:
    """An L48 encoder's counts (and a 2,048-block stack's) show whole in the header."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.main_screen.model_tree
        tree.show("transformer_encoder_L48.pt", _views(inlined, kept, dropped))
        tree.status_filter = status_filter
        await pilot.pause()
        label = tree.root.label.plain
        for n, status in ((inlined, "inlined"), (kept, "kept"), (dropped, "dropped")):
            assert f"{n} {status}" in label
        # The root's line is "▼ " and the label: all of it within the tree's width.
        assert 2 + len(label) <= tree.scrollable_content_region.width, label
