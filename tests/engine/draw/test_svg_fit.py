"""Tests for engine/draw/pictures/svg_fit.py. Pictures a browser shows whole: the root of
every SVG freezeview writes (``g`` in the app, ``export``) is sized to the window,
scaled by its viewBox, capped at its own size.
"""

from __future__ import annotations

import re
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from render_models import ConvBnRelu, scripted

from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.draw.pictures.render import render_snapshot
from freezeview.engine.draw.pictures.svg_fit import fit_to_window
from freezeview.engine.freeze.pipeline import Pipeline

SVG = "{http://www.w3.org/2000/svg}svg"


def _root(path: Path) -> ET.Element:
    root = ET.fromstring(path.read_bytes())
    assert root.tag == SVG
    return root


def test_a_graphviz_root_fits_the_window_and_keeps_its_size_as_a_cap() -> None:
    natural = (
        b'<?xml version="1.0"?>\n<svg width="9160pt" height="6525pt"\n'
        b' viewBox="0.00 0.00 9160.00 6525.00" xmlns="http://www.w3.org/2000/svg">'
        b"<g/></svg>"
    )
    root = ET.fromstring(fit_to_window(natural))
    assert (root.get("width"), root.get("height")) == ("100%", "100%")
    assert root.get("viewBox") == "0.00 0.00 9160.00 6525.00"
    assert root.get("preserveAspectRatio") == "xMidYMin meet"
    assert root.get("style") == "max-width:9160pt;max-height:6525pt"
    other = b'<svg xmlns="http://www.w3.org/2000/svg" width="100%"><g/></svg>'
    assert fit_to_window(other) == other  # not Graphviz's: left alone


@pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")
def test_the_pictures_g_and_export_write_fit_a_browser_window(tmp_path: Path) -> None:
    steps = Pipeline(scripted(ConvBnRelu())).run_all()
    # The app's g draws each step with render_snapshot / render_diff, as export does.
    first = steps[0].snapshot
    assert first is not None
    result = render_snapshot(first, tmp_path / "00-inline.svg", options=RenderOptions(level=None))
    root = _root(Path(result.path))
    assert (root.get("width"), root.get("height")) == ("100%", "100%")
    box = [float(x) for x in (root.get("viewBox") or "").split()]
    assert len(box) == 4 and box[2] > 0 and box[3] > 0
    cap = re.fullmatch(r"max-width:([\d.]+)pt;max-height:([\d.]+)pt", root.get("style") or "")
    assert cap is not None
    # The cap is the drawing's own size: Graphviz's points, as its viewBox says.
    assert abs(float(cap[1]) - box[2]) <= 1 and abs(float(cap[2]) - box[3]) <= 1
