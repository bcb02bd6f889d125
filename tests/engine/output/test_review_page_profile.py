"""The review page's heat overlay and "where the numbers move" (``export --profile``;
freezeview/engine/output/export_profile.py, profile_section.py, draw/pictures/overlay.py).

The times are node_time's (tested against Static Runtime in tests/engine/measure); these
tests hold the pictures to them: every heat-filled box's band is its nodes' share of the
forward, a module box adds up its ops, the profile drawn is the graph drawn (torch's own
frozen graph's kinds), the page shows the legend and the tooltips in Chromium, and
nothing but the pictures and the page changes. The fast tests hold the DOT text: no
overlay, no change; the bands; the refusal without inputs.
"""

from __future__ import annotations

import json
import re
import shutil
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.draw import HEAT_SCALE, Overlay, RenderOptions, heat_band
from freezeview.engine.draw.folding.drawing import Box, Drawing
from freezeview.engine.draw.pictures.dot_source import dot_source
from freezeview.engine.output.export import export

SCHEMAS = ROOT / "docs" / "schemas"


# --- fast: the DOT text -------------------------------------------------------------------


def _drawing() -> Drawing:
    boxes = {
        "a": Box("a", "op", "aten::conv2d", node_ids=[3]),
        "b": Box("b", "scope", "layer1", node_ids=[4, 5, 6]),
        "c": Box("c", "op", "aten::relu", node_ids=[7], status="added"),
        "d": Box("d", "input", "x"),
    }
    return Drawing(nodes=boxes, edges=[], clusters={}, level=1)


def _attrs(source: str, key: str) -> dict[str, str]:
    line = next(x for x in source.splitlines() if x.strip().startswith(f"{key} ["))
    return dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', line))


def test_no_overlay_writes_the_same_dot_text() -> None:
    drawing = _drawing()
    plain = dot_source([("", drawing)], title="t", legend=True)
    assert dot_source([("", drawing)], title="t", legend=True, overlays=(None,)) == plain
    assert "heat" not in plain and "fv-moved" not in plain


def test_fills_follow_the_share_and_module_boxes_add_up_their_ops() -> None:
    times = {3: 6.0, 4: 0.5, 5: 0.25, 6: 0.1, 7: 0.02}
    total = sum(times.values())
    overlay = Overlay(times, total, "Static Runtime", outlined=frozenset({7}))
    source = dot_source([("", _drawing())], legend=True, overlays=(overlay,))
    expected = {"a": times[3], "b": times[4] + times[5] + times[6], "c": times[7]}
    for key, ms in expected.items():
        attrs = _attrs(source, key)
        band = heat_band(ms / total)
        assert attrs["fillcolor"] == HEAT_SCALE[band][1], key
        assert f"fv-heat-{band}" in attrs["class"], key
        assert f"{100 * ms / total:.1f} % of the forward (Static Runtime)" in source
    # An untimed box keeps its own fill; the outlined node's box is marked.
    assert "fv-heat" not in _attrs(source, "d")["class"]
    assert "fv-moved" in _attrs(source, "c")["class"]
    assert 'id="heat-legend"' in source and "numbers move here" in source
    # Bands are fixed (pictures of two steps compare): their bounds rise.
    bounds = [upper for upper, _, _ in HEAT_SCALE]
    assert bounds == sorted(bounds) and heat_band(0.0) == 0 and heat_band(1.0) == len(bounds) - 1


def test_export_profile_refuses_without_inputs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    model = tmp_path / "m.pt"
    torch.jit.save(torch.jit.script(nn.ReLU()), str(model))
    out = tmp_path / "out"
    assert main(["export", str(model), "-o", str(out), "--profile", "--format", "dot"]) == 2
    err = capsys.readouterr().err.strip()
    assert "--profile needs sample inputs" in err and len(err.splitlines()) == 1
    assert not out.exists()


# --- slow: the models run ------------------------------------------------------------------


class Block(nn.Module):
    """conv -> batchnorm -> relu: one module box at depth 1 holding several timed ops."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = Block()
        self.fc = nn.Linear(8 * 16 * 16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(self.block(x).flatten(1))


@pytest.fixture(scope="module")
def profiled(tmp_path_factory: pytest.TempPathFactory) -> tuple[Any, Path, bytes]:
    """A saved small model exported with --per-step at module depth 1, profiled."""
    root = tmp_path_factory.mktemp("profiled")
    model = root / "small.pt"
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(Net().eval()), str(model))
    given = model.read_bytes()
    x = torch.randn(1, 3, 16, 16, generator=torch.Generator().manual_seed(0))
    result = export(
        model,
        root / "out",
        per_step=True,
        inputs=(x,),
        measure=(1, 0.02),
        profile=True,
        options=RenderOptions(level=1),
    )
    return result, model, given


def _svg_classes(path: Path) -> dict[str, str]:
    text = path.read_text(encoding="utf-8").replace("&#45;", "-")
    return dict(re.findall(r'<g id="([^"]+)" class="node ([^"]*)"', text))


@pytest.mark.slow
def test_svg_fills_are_the_profiles_shares(profiled: tuple[Any, Path, bytes]) -> None:
    result, model, given = profiled
    facts = result.facts
    unfrozen, last = facts.profile_of(None), facts.last()
    assert unfrozen is not None and last is not None
    drawn = {p.name: p.result for p in result.pictures}
    drawn.update({f"step-{e.step.index}": e.picture.result for e in result.steps if e.picture})
    profile_of = {"before": unfrozen, "after": last, "diff": last}
    profile_of.update({f"step-{p.step}": p for p in facts.profiles if p.step is not None})
    profile_of["step-0"] = unfrozen
    summed = 0
    for name, profile in profile_of.items():
        render = drawn[name]
        times = {n.id: n.ms for n in profile.nodes}
        classes = _svg_classes(render.path)
        filled = 0
        for key, box in render.drawings[0].nodes.items():
            ms = [times[i] for i in box.node_ids if i in times]
            if box.role == "ghost" or not ms:
                assert "fv-heat" not in classes[key], (name, key)
                continue
            band = heat_band(sum(ms) / profile.total_ms)
            assert f"fv-heat fv-heat-{band}" in classes[key], (name, key, box.title)
            filled += 1
            summed += box.role == "scope" and len(ms) > 1
        assert filled, name
    # At depth 1 the block's box holds several timed ops: their sum fills it.
    assert summed
    # The frozen graph's timed kinds are torch's own frozen graph's computing nodes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        theirs = torch.jit.freeze(torch.jit.load(str(model)))
    kinds = sorted(n.kind() for n in theirs.graph.nodes() if n.kind() != "prim::Constant")
    assert sorted(n.kind for n in last.nodes) == kinds
    assert model.read_bytes() == given


@pytest.mark.slow
def test_profile_changes_only_pictures_and_page(
    profiled: tuple[Any, Path, bytes], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    result, model, given = profiled
    out = tmp_path / "plain"
    args = ["--per-step", "--level", "1", "--input-shape", "1,3,16,16", "--time-budget", "0.02"]
    assert main(["export", str(model), "-o", str(out), *args, "--json"]) == 0
    plain = json.loads(capsys.readouterr().out)
    assert "profile" not in plain
    ours = {p.name for p in result.files}
    assert ours == {Path(f).name for f in plain["files"]}
    for name in ours:
        if name.endswith(".diff"):
            assert (out / name).read_bytes() == (result.directory / name).read_bytes(), name
    assert "fv&#45;heat" not in (out / "after.svg").read_text()
    assert 'id="profile"' not in (out / "index.html").read_text()
    # --json carries the profile as freeze's node_time lines, in the export's schema.
    again = tmp_path / "again"
    assert main(["export", str(model), "-o", str(again), *args, "--profile", "--json"]) == 0
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, json.loads((SCHEMAS / "export.schema.json").read_text()))
    line_schema = json.loads((SCHEMAS / "node-time.schema.json").read_text())
    lines = document["profile"]["profiles"]
    assert lines and lines[0]["step"] is None
    for line in lines:
        jsonschema.validate(line, line_schema)
    assert model.read_bytes() == given


class ConvBn(nn.Module):
    """conv -> batchnorm -> relu -> sum in half precision, tiny running variance: folding
    the batchnorm into the conv moves the outputs past tolerance."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)
        self.bn = nn.BatchNorm2d(8)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x))).sum(1)


@pytest.mark.slow
def test_page_names_the_node_where_the_numbers_move(tmp_path: Path) -> None:
    torch.manual_seed(0)
    eager = ConvBn().half().eval()
    assert eager.bn.running_var is not None
    with torch.no_grad():
        eager.bn.running_var.uniform_(1e-3, 1e-2)
        eager.bn.weight.uniform_(5, 10)
    x = torch.randn(1, 3, 8, 8, generator=torch.Generator().manual_seed(0)).half()
    result = export(torch.jit.script(eager), tmp_path / "out", per_step=True, inputs=(x,))
    (found,) = result.facts.bisections
    assert found.status == "named" and found.node is not None
    # torch's own fold: the first computing node of the frozen graph is the conv, whose
    # folded weights give the value that differs from the unfolded conv's.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        frozen = torch.jit.freeze(torch.jit.script(eager))
    conv = next(n for n in frozen.graph.nodes() if n.kind() == "aten::conv2d")
    weight, bias = (conv.inputsAt(i).toIValue() for i in (1, 2))
    with torch.no_grad():
        folded = torch.nn.functional.conv2d(x.float(), weight.float(), bias.float())
        plain = eager.conv.float()(x.float())
    assert (found.node.kind, found.node.scope) == ("aten::conv2d", "conv")
    worst = (folded.half().float() - plain.half().float()).abs().max().item()
    assert found.node.diff is not None and found.node.diff.max_abs == pytest.approx(worst, rel=0.01)
    page = (tmp_path / "out" / "index.html").read_text()
    head = page.partition("</header>")[0]
    assert 'id="numbers-move"' in head and "aten::conv2d" in head
    link = re.search(r'data-picture="step-(\d+)" data-box="([^"]+)"', head)
    assert link is not None and int(link.group(1)) == found.step
    svg = next(e for e in result.steps if e.step.index == found.step).picture
    assert svg is not None
    classes = _svg_classes(svg.result.path)
    assert "fv-moved" in classes[link.group(2)]
    assert sum("fv-moved" in c.split() for c in classes.values()) == 1


# --- slow: the page in Chromium -----------------------------------------------------------

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    playwright = pytest.importorskip("playwright.sync_api")
    if CHROMIUM is None:
        pytest.skip("Debian's chromium is not installed")
    with playwright.sync_playwright() as p:
        launched = p.chromium.launch(
            executable_path=CHROMIUM, args=["--no-sandbox", "--disable-gpu"], headless=True
        )
        yield launched
        launched.close()


@pytest.mark.slow
def test_page_shows_the_heat_legend_and_tooltips(
    profiled: tuple[Any, Path, bytes], browser: Any
) -> None:
    result, _, _ = profiled
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    tab = context.new_page()
    errors: list[str] = []
    tab.on("pageerror", lambda e: errors.append(str(e)))
    tab.goto(result.index.as_uri())
    tab.wait_for_selector("body[data-ready=true]")
    tab.evaluate("window.freezeview.show('after', false)")
    legend = tab.locator("#canvas g#heat-legend")
    assert legend.count() == 1 and legend.bounding_box() is not None
    assert tab.locator("#canvas g.node.fv-heat-legend").count() == len(HEAT_SCALE)
    heat = tab.locator("#canvas g.node.fv-heat").first
    title = heat.locator("a").first.get_attribute("xlink:title") or ""
    assert "% of the forward" in title
    box = heat.get_attribute("id")
    tab.evaluate(f"window.freezeview.showBox('{box}')")
    assert "% of the forward" in tab.locator("#details").inner_text()
    tab.locator("#profile summary").click()
    assert tab.locator("#page-heat-legend").is_visible()
    assert "Static Runtime" in tab.locator("#profile").inner_text()
    assert errors == []
    context.close()
