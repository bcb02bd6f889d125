"""The review page's timeline with sample inputs: each changed step's latency, and the
verdict in the page's summary (freezeview/engine/output/export.py, review_page.py).

Structure only: which timeline items carry a latency is what torch's steps changed.
"""

from __future__ import annotations

import re
from pathlib import Path

import torch
from measure_models import SMALL_INPUT_SHAPE, small_conv_net

from freezeview.engine.output.export import export


def _items(page: str) -> dict[int, str]:
    found = re.findall(r'<li class="([^"]*)" data-step="(\d+)"[^>]*>(.*?)</li>', page, re.S)
    return {int(index): body for _, index, body in found}


def test_timeline_carries_latency_of_changed_steps(tmp_path: Path) -> None:
    x = torch.randn(SMALL_INPUT_SHAPE)
    result = export(small_conv_net(), tmp_path / "out", fmt="dot", inputs=(x,), measure=(1, 0.01))
    assert result.index is not None and result.measurement is not None
    page = result.index.read_text(encoding="utf-8")
    items = _items(page)
    timed = set(result.measurement.steps)
    assert timed and set(items) >= timed
    for index, body in items.items():
        assert ("latency " in body) == (index in timed), index
    assert "frozen forward" in page and "1 thread" in page


def test_no_latency_without_inputs(tmp_path: Path) -> None:
    result = export(small_conv_net(), tmp_path / "out", fmt="dot")
    assert result.measurement is None and result.index is not None
    page = result.index.read_text(encoding="utf-8")
    assert all("latency " not in body for body in _items(page).values())
