"""Tests for engine/draw/pictures/ (the SVG, PNG and DOT files of snapshots and diffs) and
the drawing they draw (engine/draw/folding/build.py, plan.py).

Diffs come from graphs torch rewrites in this run; every SVG written is parsed.
"""

from __future__ import annotations

import functools
import os
import shutil
import stat
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from pathlib import Path

import pytest
import torch
from render_models import ConvBnRelu, KeepsBuffer, Stacked, TwoLists, resnet50_scripted, scripted

from freezeview.engine.diff.diff import diff_snapshots
from freezeview.engine.diff.diff_values import GraphDiff
from freezeview.engine.draw.dot.ceiling import (
    CEILING_BOXES,
    CEILING_EXPONENT,
    CEILING_TIMEOUT,
    Overruns,
    box_ceiling,
)
from freezeview.engine.draw.dot.run import DotTimeoutError, GraphvizMissingError
from freezeview.engine.draw.folding.build import build_drawing
from freezeview.engine.draw.folding.plan import RenderOptions, auto_level, changed_splits
from freezeview.engine.draw.folding.prepared import drawn_scopes, levels, prepare_snapshot
from freezeview.engine.draw.folding.scopes import (
    box_prefix,
    count_at_level,
    module_paths,
    opened_scopes,
    resolve_scope,
)
from freezeview.engine.draw.pictures import render as render_module
from freezeview.engine.draw.pictures.dot_source import COLOURS
from freezeview.engine.draw.pictures.render import (
    render_diff,
    render_side_by_side,
    render_snapshot,
)
from freezeview.engine.freeze.pipeline import Pipeline
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph
from freezeview.engine.load.loading import LoadedModel

SVG = "{http://www.w3.org/2000/svg}"
XLINK = "{http://www.w3.org/1999/xlink}"
needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")


def inlined(module: torch.jit.ScriptModule) -> GraphSnapshot:
    graph = module.forward.graph.copy()  # type: ignore[attr-defined]
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph)


def optimize_diff(make: Callable[[], torch.nn.Module]) -> GraphDiff:
    """Diff of torch's optimization passes: _freeze_module's graph vs torch.jit.freeze's."""
    module = scripted(make())
    mid = snapshot_graph(torch._C._freeze_module(module._c)._get_method("forward").graph)
    return diff_snapshots(mid, snapshot_graph(torch.jit.freeze(module).forward.graph))


@functools.cache
def resnet_inlined() -> GraphSnapshot:
    """ResNet-50's inlined graph, built once per process: snapshots are immutable values."""
    return inlined(resnet50_scripted())


@functools.cache
def resnet_optimize_diff() -> GraphDiff:
    """:func:`optimize_diff` of ResNet-50, built once per process (diffs are values too)."""
    return optimize_diff(resnet50_scripted)


def parse_svg(path: Path) -> ET.Element:
    root = ET.parse(path).getroot()
    assert root.tag == f"{SVG}svg"
    return root


def svg_nodes(root: ET.Element) -> dict[str, tuple[set[str], str]]:
    """Node id -> (classes, fill colour of its shape)."""
    out = {}
    for g in root.iter(f"{SVG}g"):
        classes = set((g.get("class") or "").split())
        if "node" not in classes:
            continue
        fill = ""
        for shape in g.iter():
            if shape.tag in (f"{SVG}polygon", f"{SVG}path", f"{SVG}ellipse") and shape.get("fill"):
                fill = shape.get("fill", "")
                if fill != "none":
                    break
        out[g.get("id", "")] = (classes, fill)
    return out


@needs_dot
def test_every_picture_is_valid_svg(tmp_path: Path) -> None:
    module = scripted(KeepsBuffer())
    before = inlined(module)
    after = snapshot_graph(torch.jit.freeze(module).forward.graph)
    d = diff_snapshots(before, after)
    for level in ("auto", None):
        opts = RenderOptions(level=level)
        results = [
            render_snapshot(before, tmp_path / f"b{level}.svg", options=opts),
            render_snapshot(after, tmp_path / f"a{level}.svg", options=opts),
            render_diff(d, tmp_path / f"d{level}.svg", options=opts),
            render_side_by_side(d, tmp_path / f"s{level}.svg", options=opts),
        ]
        for r in results:
            root = parse_svg(r.path)
            assert r.size == r.path.stat().st_size
            assert len(svg_nodes(root)) >= r.nodes - 4  # legend aside, every box is a node
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")]  # no temp files left


@needs_dot
@pytest.mark.parametrize(
    "make", [ConvBnRelu, pytest.param(resnet50_scripted, marks=pytest.mark.slow)]
)
def test_diff_picture_colours_exactly_the_diff(tmp_path: Path, make: type[torch.nn.Module]) -> None:
    d = optimize_diff(make)
    assert d.removed and d.changed  # conv-bn folding fired
    r = render_diff(d, tmp_path / "diff.svg", options=RenderOptions(level=None))
    nodes = svg_nodes(parse_svg(r.path))
    after_folded = build_drawing(d.after, level=None).folded
    before_folded = build_drawing(d.before, level=None).folded
    drawn_after = {int(k[1:]) for k in nodes if k.startswith("n")}
    assert drawn_after == {i for i in d.after_info if i not in after_folded}
    for key, (classes, fill) in nodes.items():
        if key.startswith("n"):
            node_id = int(key[1:])
            status = d.status(node_id)
            assert f"fv-{status}" in classes, (key, classes)
            if status != "same":
                assert fill == COLOURS[status][0]
        elif key.startswith("g"):
            assert "fv-removed" in classes and fill == COLOURS["removed"][0]
    ghosts = {int(k[1:]) for k in nodes if k.startswith("g")}
    assert ghosts == {i for i in d.removed if i not in before_folded}
    # Nothing else is coloured: only status nodes carry a status colour.
    coloured = {k for k, (c, _f) in nodes.items() if c & {"fv-added", "fv-changed", "fv-removed"}}
    expected = {f"n{i}" for i in (set(d.added) | set(d.changed)) if i not in after_folded}
    expected |= {f"g{i}" for i in ghosts}
    assert coloured == expected


@pytest.mark.xdist_group("render-resnet50")
def test_collapsing_keeps_every_change_reachable() -> None:
    d = resnet_optimize_diff()
    assert len(levels(d.after)) >= 3
    for level in levels(d.after):
        view = build_drawing(d.after, level=level, diff=d)
        targets = [(i, "n") for i in (set(d.added) | set(d.changed)) if i not in view.folded]
        targets += [(i, "g") for i in d.removed if i not in view.ghost_folded]
        assert targets
        for node_id, prefix in targets:
            ghost = prefix == "g"
            holders = [
                v
                for v in view.nodes.values()
                if (v.role == "scope" and node_id in (v.ghost_ids if ghost else v.node_ids))
                or v.key == f"{prefix}{node_id}"
            ]
            assert len(holders) == 1, (level, node_id)
            box = holders[0]
            assert view.holder(node_id, ghost=ghost) is box
            assert box.status != "same", (level, box.key)
            # Every cluster around it is marked changed too.
            for k in range(1, len(box.cluster) + 1):
                path = box.cluster[:k]
                if path in view.clusters:
                    assert view.clusters[path].status == "changed"
        scope_boxes = [v for v in view.nodes.values() if v.role == "scope"]
        for box in scope_boxes:
            assert box.counts["ops"] >= 0
            if box.status != "same":
                assert box.counts["added"] + box.counts["removed"] + box.counts["changed"] > 0


def test_expanding_one_scope_shows_its_ops() -> None:
    module = resnet50_scripted()
    snap = snapshot_graph(torch.jit.freeze(module).forward.graph)
    coarse = build_drawing(snap, level=1)
    assert "s_layer3" in coarse.nodes and not any(
        v.role == "op" and coarse.scopes[v.node_ids[0]].startswith("layer3.")
        for v in coarse.nodes.values()
    )
    view = build_drawing(snap, level=1, expand=("layer3.1",))
    inside = [
        i
        for i, scope in view.scopes.items()
        if (scope == "layer3.1" or scope.startswith("layer3.1.")) and i not in view.folded
    ]
    assert inside
    drawn = {v.node_ids[0] for v in view.nodes.values() if v.role in ("op", "attribute")}
    assert set(inside) <= drawn
    # Its siblings stay boxes, and the other stages too.
    assert "s_layer3.0" in view.nodes and "s_layer3.2" in view.nodes
    assert "s_layer1" in view.nodes and "s_layer3" not in view.nodes
    assert box_prefix("layer3.1.conv1", 1, ("layer3.1",)) is None
    assert box_prefix("layer3.0.conv1", 1, ("layer3.1",)) == "layer3.0"


@needs_dot
def test_auto_level_fits_the_budget(tmp_path: Path) -> None:
    module = resnet50_scripted()
    snap = inlined(module)
    opts = RenderOptions(budget=60)
    r = render_snapshot(snap, tmp_path / "b.svg", options=opts)
    assert r.level is not None
    assert count_at_level(drawn_scopes(snap), r.level) <= 60
    finer = [lv for lv in levels(snap) if lv is None or lv > r.level]
    assert count_at_level(drawn_scopes(snap), finer[0]) > 60
    parse_svg(r.path)


def test_constants_are_folded_into_their_users() -> None:
    snap = snapshot_graph(torch.jit.freeze(resnet50_scripted()).forward.graph)
    n_constants = sum(1 for n in snap.walk() if n.kind == "prim::Constant")
    folded = build_drawing(snap, level=None)
    assert not [v for v in folded.nodes.values() if v.role == "constant"]
    assert n_constants and len(folded.nodes) < snap.node_count - n_constants + 3
    conv = next(v for v in folded.nodes.values() if v.title == "conv2d")
    assert any(row.startswith("weight = Float(") and "<" in row for row in conv.rows)
    as_nodes = build_drawing(snap, level=None, constants="nodes")
    assert len([v for v in as_nodes.nodes.values() if v.role == "constant"]) == n_constants
    quiet = build_drawing(snap, level=None, constants="hide-trivial")
    conv_q = next(v for v in quiet.nodes.values() if v.title == "conv2d")
    assert len(conv_q.rows) < len(conv.rows)


@needs_dot
def test_kept_attribute_stands_out_with_its_reason(tmp_path: Path) -> None:
    snap = snapshot_graph(torch.jit.freeze(scripted(KeepsBuffer())).forward.graph)
    reason = "in-place-write: aten::add_ writes it"
    r = render_snapshot(snap, tmp_path / "k.svg", options=RenderOptions(reasons={"count": reason}))
    root = parse_svg(r.path)
    kept = [g for g in root.iter(f"{SVG}g") if "fv-kept" in (g.get("class") or "")]
    assert kept
    titles = [a.get(f"{XLINK}title", "") for g in kept for a in g.iter(f"{SVG}a")]
    assert any(reason in t for t in titles)


def _fake_dot(tmp_path: Path, slow_above: int) -> str:
    """A `dot` that hangs on inputs longer than ``slow_above`` bytes (a layout blow-up)."""
    real = shutil.which("dot")
    script = tmp_path / "slow-dot"
    script.write_text(
        "#!/bin/sh\n"
        f'tmp="$(mktemp)"; cat > "$tmp"\n'
        f'if [ "$(wc -c < "$tmp")" -gt {slow_above} ]; then sleep 30; fi\n'
        f'exec "{real}" "$@" < "$tmp"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return str(script)


# slow: a real ResNet-50 picture and a real 2 s Graphviz timeout waited out.
@pytest.mark.slow
@pytest.mark.xdist_group("render-resnet50")
@needs_dot
def test_timeout_falls_back_to_a_coarser_level(tmp_path: Path) -> None:
    snap = resnet_inlined()
    full = len(build_drawing(snap, level=None).nodes)
    assert full > 300
    opts = RenderOptions(level=None, timeout=2.0, dot_command=_fake_dot(tmp_path, 60_000))
    r = render_snapshot(snap, tmp_path / "out.svg", options=opts)
    assert r.requested_level is None and r.level is not None
    assert r.notes and "did not finish within 2 s" in r.notes[0]
    assert r.nodes < full
    parse_svg(r.path)


@needs_dot
def test_timeout_everywhere_leaves_no_file(tmp_path: Path) -> None:
    snap = inlined(scripted(ConvBnRelu()))
    opts = RenderOptions(level=None, timeout=0.5, dot_command=_fake_dot(tmp_path, 0))
    out = tmp_path / "out" / "x.svg"
    out.parent.mkdir()
    start = time.monotonic()
    with pytest.raises(DotTimeoutError, match="nothing was written"):
        render_snapshot(snap, out, options=opts)
    assert list(out.parent.iterdir()) == []
    # Each overrun is killed and over at its timeout: the wrapper's `sleep 30` holding
    # the pipes open is not waited for (reading them to the end took 30 s a level).
    assert time.monotonic() - start < 15


def test_missing_dot_says_how_to_install(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    snap = inlined(scripted(ConvBnRelu()))
    opts = RenderOptions(dot_command=str(tmp_path / "no-such-dot"))
    with pytest.raises(GraphvizMissingError, match="apt-get install graphviz"):
        render_snapshot(snap, tmp_path / "x.svg", options=opts)
    assert not (tmp_path / "x.svg").exists()
    monkeypatch.setenv("PATH", str(tmp_path))
    with pytest.raises(GraphvizMissingError):
        render_snapshot(snap, tmp_path / "x.svg")
    # DOT text needs no Graphviz.
    r = render_snapshot(snap, tmp_path / "x.dot", fmt="dot")
    text = r.path.read_text()
    assert text.startswith("digraph freezeview {") and "conv2d" in text
    assert os.access(r.path, os.R_OK)


@needs_dot
def test_png_output(tmp_path: Path) -> None:
    snap = snapshot_graph(torch.jit.freeze(scripted(ConvBnRelu())).forward.graph)
    r = render_snapshot(snap, tmp_path / "a.png", fmt="png")
    assert r.path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_module_list_items_are_drawn_under_their_path() -> None:
    module = scripted(Stacked())
    snap = inlined(module)
    raw = {n.scope for n in snap.walk() if n.scope}
    paths = module_paths(module)
    assert "layers.0" in paths and "layers.0.lin" in paths
    # torch names an iterated ModuleList item by its index alone.
    assert raw & {"0", "0.lin", "0.bn"}
    view = build_drawing(snap, level=1, modules=paths)
    assert set(view.scopes.values()) <= paths | {""}
    boxes = {v.title for v in view.nodes.values() if v.role == "scope"}
    assert "layers" in boxes and not boxes & {"0", "1", "2"}
    finer = build_drawing(snap, level=2, modules=paths)
    assert {"layers.0", "layers.1", "layers.2"} <= {
        v.title for v in finer.nodes.values() if v.role == "scope"
    }
    assert levels(snap, modules=paths) == [1, 2, 3, None]
    # --expand takes the real path.
    opened = build_drawing(snap, level=2, expand=("layers.1",), modules=paths)
    ops = [v for v in opened.nodes.values() if v.role == "op"]
    assert any(opened.scopes[v.node_ids[0]] == "layers.1.lin" for v in ops)
    assert "s_layers.0" in opened.nodes and "s_layers.1" not in opened.nodes
    # The frozen graph keeps torch's hierarchy names: they resolve the same way.
    frozen = snapshot_graph(torch.jit.freeze(module).forward.graph)
    assert {s for s in build_drawing(frozen, level=2, modules=paths).scopes.values() if s} <= paths


def test_scope_resolution_keeps_what_it_cannot_tell_apart() -> None:
    paths = module_paths(scripted(TwoLists()))
    assert resolve_scope("0.lin", paths) == "0.lin"  # enc.0 or dec.0: torch cannot say
    stacked = module_paths(scripted(Stacked()))
    assert resolve_scope("0.lin", stacked) == "layers.0.lin"
    assert resolve_scope("head", stacked) == "head"
    assert resolve_scope("", stacked) == ""
    assert resolve_scope("nothing.here", stacked) == "nothing.here"


@pytest.mark.xdist_group("render-resnet50")
def test_diff_picture_opens_changed_boxes_within_the_budget() -> None:
    d = resnet_optimize_diff()
    opts = RenderOptions(budget=40)
    scopes = drawn_scopes(d.after) + drawn_scopes(d.before, ids=d.removed)
    level = auto_level(scopes, levels(d.after), opts)
    assert level is not None
    split = changed_splits(d, scopes, level, opts)
    assert split
    assert count_at_level(scopes, level, (), split) <= opts.budget
    changed = drawn_scopes(d.after, ids=set(d.added) | set(d.changed))
    changed += drawn_scopes(d.before, ids=d.removed)
    for box in split:
        assert any(s == box or s.startswith(box + ".") for s in changed), box
    # Greedy and maximal: opening any other changed box would break the budget.
    now_open = opened_scopes((), split)
    left = {box_prefix(s, level, (), now_open) for s in changed} - {None, *split}
    for other in left:
        assert other is not None
        assert count_at_level(scopes, level, (), (*split, other)) > opts.budget
    view = build_drawing(d.after, level=level, diff=d, split=split)
    titles = {v.title for v in view.nodes.values() if v.role == "scope"}
    assert not titles & set(split)  # opened boxes are drawn as their parts
    assert len(view.nodes) <= count_at_level(scopes, level, (), split) + 2  # + input, return


@pytest.mark.xdist_group("render-resnet50")
@needs_dot
def test_render_diff_reports_the_opened_boxes(tmp_path: Path) -> None:
    d = resnet_optimize_diff()
    opened = render_diff(d, tmp_path / "a.svg", options=RenderOptions(budget=40))
    plain = render_diff(d, tmp_path / "b.svg", options=RenderOptions(budget=40, open_changed=False))
    assert opened.split and not plain.split
    assert opened.level == plain.level and opened.nodes > plain.nodes
    parse_svg(opened.path)


def test_checks_freezing_decided_stay_in_their_module() -> None:
    module = resnet50_scripted()
    steps = Pipeline(LoadedModel.from_module(module)).run_all()
    folded = next(s for s in steps if s.name == "fold_attributes").snapshot
    assert folded is not None
    paths = module_paths(module)
    # torch leaves the scope of these If nodes (and what is nested in them) empty.
    assert [n for n in folded.walk() if n.kind == "prim::If" and not n.scope]
    # The root module's own ops, from the inlined graph: top-level, scoped "".
    side = prepare_snapshot(inlined(module), "fold", paths)
    own = [i for i, s in side.scopes.items() if not s and i not in side.folder.folded]
    drawn_root = drawn_scopes(folded, modules=paths).count("")
    assert drawn_root <= len(own)


# slow: a real ResNet-50 picture and a real 2 s Graphviz timeout waited out.
@pytest.mark.slow
@pytest.mark.xdist_group("render-resnet50")
@needs_dot
def test_a_known_overrun_is_not_waited_out_twice(tmp_path: Path) -> None:
    snap = resnet_inlined()
    memo = Overruns()
    opts = RenderOptions(
        level=None, timeout=2.0, dot_command=_fake_dot(tmp_path, 60_000), overruns=memo
    )
    first = render_snapshot(snap, tmp_path / "a.svg", options=opts)
    assert first.level is not None and first.dot_seconds >= 2.0
    assert memo.smallest is not None and memo.smallest > first.nodes
    second = render_snapshot(snap, tmp_path / "b.svg", options=opts)
    # The same fallback, without waiting out the 2 s timeout a second time.
    assert second.level == first.level
    assert second.dot_seconds < first.dot_seconds - 1.0
    assert "already overrun" in second.notes[0]
    parse_svg(second.path)


# -- the box ceiling: pictures Graphviz could not finish are not started ---------------


class RecordingDot:
    """Stands in for :func:`run_dot`: records the DOT text length of every run, draws nothing."""

    def __init__(self) -> None:
        self.runs: list[int] = []

    def __call__(self, source: str, fmt: str, options: RenderOptions) -> bytes:
        self.runs.append(len(source))
        return b"<svg xmlns='http://www.w3.org/2000/svg'/>"


@pytest.fixture
def recording_dot(monkeypatch: pytest.MonkeyPatch) -> RecordingDot:
    dot = RecordingDot()
    monkeypatch.setattr(render_module, "run_dot", dot)
    return dot


def _stacked() -> tuple[GraphSnapshot, int, int]:
    """A small graph with its every-op box count and its coarsest level's count."""
    snap = inlined(scripted(Stacked(6)))
    scopes = drawn_scopes(snap)
    every_op = count_at_level(scopes, None)
    coarsest = count_at_level(scopes, levels(snap)[0])
    assert coarsest < every_op
    return snap, every_op, coarsest


def test_a_picture_above_the_ceiling_never_starts_dot(
    tmp_path: Path, recording_dot: RecordingDot
) -> None:
    snap, every_op, _coarsest = _stacked()
    ceiling = every_op - 1
    opts = RenderOptions(level=None, max_boxes=ceiling)
    r = render_snapshot(snap, tmp_path / "a.svg", options=opts)
    assert r.requested_level is None and r.level is not None
    assert len(recording_dot.runs) == 1  # only the coarser picture went to Graphviz
    assert r.nodes <= ceiling
    (note,) = r.notes
    assert f"every op would be {every_op:,} boxes" in note
    assert f"above the {ceiling:,}-box ceiling" in note
    assert "--max-boxes" in note and "--timeout" in note
    assert note.count(". ") == 0 and note.endswith(".")  # one sentence


def test_the_coarsest_level_is_tried_even_above_the_ceiling(
    tmp_path: Path, recording_dot: RecordingDot
) -> None:
    snap, _every_op, coarsest = _stacked()
    r = render_snapshot(snap, tmp_path / "a.svg", options=RenderOptions(level=None, max_boxes=1))
    assert r.level == levels(snap)[0] and r.nodes >= coarsest
    assert len(recording_dot.runs) == 1 and r.notes


def test_below_the_ceiling_nothing_changes(tmp_path: Path, recording_dot: RecordingDot) -> None:
    snap, every_op, _coarsest = _stacked()
    results = [
        render_snapshot(snap, tmp_path / f"{name}.svg", options=opts)
        for name, opts in [
            ("default", RenderOptions(level=None)),
            ("at", RenderOptions(level=None, max_boxes=every_op)),
        ]
    ]
    assert [r.level for r in results] == [None, None]
    assert [r.notes for r in results] == [[], []]
    assert results[0].nodes == results[1].nodes >= every_op
    assert len(recording_dot.runs) == 2 and recording_dot.runs[0] == recording_dot.runs[1]


def test_dot_text_is_never_capped(tmp_path: Path, recording_dot: RecordingDot) -> None:
    snap, _every_op, _coarsest = _stacked()
    r = render_snapshot(
        snap, tmp_path / "a.dot", fmt="dot", options=RenderOptions(level=None, max_boxes=1)
    )
    assert r.level is None and not r.notes and not recording_dot.runs


def test_raising_the_timeout_draws_every_op(tmp_path: Path, recording_dot: RecordingDot) -> None:
    snap, every_op, _coarsest = _stacked()
    # The timeout whose ceiling is just under the every-op picture, then eight times it.
    short = CEILING_TIMEOUT * ((every_op - 1) / CEILING_BOXES) ** (1 / CEILING_EXPONENT)
    assert box_ceiling(short) < every_op <= box_ceiling(8 * short)
    capped = render_snapshot(
        snap, tmp_path / "a.svg", options=RenderOptions(level=None, timeout=short)
    )
    assert capped.level is not None and "--timeout" in capped.notes[0]
    full = render_snapshot(
        snap, tmp_path / "b.svg", options=RenderOptions(level=None, timeout=8 * short)
    )
    assert full.level is None and not full.notes


def test_an_overrun_level_is_not_tried_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    snap, every_op, _coarsest = _stacked()
    tries: list[int] = []

    def overrunning(source: str, fmt: str, options: RenderOptions) -> bytes:
        tries.append(len(source))
        if len(tries) == 1:  # the first picture tried, every op: Graphviz gives up
            raise DotTimeoutError("Graphviz did not finish within 30 s.")
        return b"<svg xmlns='http://www.w3.org/2000/svg'/>"

    monkeypatch.setattr(render_module, "run_dot", overrunning)
    memo = Overruns()
    opts = RenderOptions(level=None, overruns=memo)
    first = render_snapshot(snap, tmp_path / "a.svg", options=opts)
    assert memo.smallest == every_op and len(tries) == 2
    # The same picture again: its count is the one remembered, so Graphviz is not retried.
    second = render_snapshot(snap, tmp_path / "b.svg", options=opts)
    assert len(tries) == 3 and second.level == first.level
    assert "already overrun" in second.notes[0]


def test_the_coarsest_level_is_tried_even_after_bigger_overruns(
    tmp_path: Path, recording_dot: RecordingDot
) -> None:
    """Once a picture overran, pictures at least that big go coarser without Graphviz,
    but never past the coarsest level: it is always drawn (issue 23: at 140k nodes an
    export's side-by-side picture was given up with "Graphviz did not finish drawing
    side-by-side.svg within 30 s" though Graphviz never ran on it)."""
    snap, _every_op, coarsest = _stacked()
    memo = Overruns()
    memo.overran(1)  # every picture of this run is "at least as big as one that overran"
    r = render_snapshot(snap, tmp_path / "a.svg", options=RenderOptions(level=None, overruns=memo))
    assert len(recording_dot.runs) == 1  # Graphviz ran once: on the coarsest level
    assert r.level == levels(snap)[0] and r.nodes >= coarsest
    parse_svg(r.path)
    # Every note is about a level that was skipped, none says the coarsest overran.
    assert r.notes and all("already overrun" in n for n in r.notes)


# -- The greedy box opening, against its reference ------------------------------------------


def _changed_splits_reference(
    d: GraphDiff, scopes: list[str], level: int, budget: int
) -> tuple[str, ...]:
    """changed_splits as first written: every candidate counted with count_at_level."""
    changed = drawn_scopes(d.after, ids=set(d.added) | set(d.changed))
    changed += drawn_scopes(d.before, ids=d.removed)
    opened: list[str] = []
    tried: set[str] = set()
    while True:
        split = tuple(opened)
        now_open = opened_scopes((), split)
        boxes: dict[str, int] = {}
        for scope in changed:
            box = box_prefix(scope, level, (), now_open)
            if box is not None and box not in tried:
                boxes[box] = boxes.get(box, 0) + 1
        if not boxes:
            return split
        box = min(boxes, key=lambda b: (-boxes[b], b))
        tried.add(box)
        if count_at_level(scopes, level, (), (*split, box)) <= budget:
            opened.append(box)


@pytest.mark.xdist_group("render-resnet50")
@pytest.mark.parametrize("budget", [12, 40, 90, 300])
def test_changed_splits_opens_what_counting_every_candidate_opens(budget: int) -> None:
    d = resnet_optimize_diff()
    scopes = drawn_scopes(d.after) + drawn_scopes(d.before, ids=d.removed)
    opts = RenderOptions(budget=budget)
    opened = 0
    for level in (1, 2, 3):
        expected = _changed_splits_reference(d, scopes, level, budget)
        assert changed_splits(d, scopes, level, opts) == expected, (budget, level)
        opened += len(expected)
    assert opened  # every budget here opens some boxes (2 to 360 of them)
