"""Tests for engine/draw/terminal/ (layout.py, fit.py: a drawing laid out in terminal cells)
and the character canvas the app draws it with (session/canvas.py): dot's positions and
routes turned into cells.

What must hold on every picture: every box of the drawing is placed, no two boxes (so no
two labels) overlap, each edge starts on its tail box's frame and ends on its head
box's frame with every cell between outside both, and a graph dot cannot lay out in
time falls back to a coarser level, then to a sentence.
"""

from __future__ import annotations

import shutil
import stat
from itertools import combinations, pairwise
from pathlib import Path

import pytest
import torch
from render_models import ConvBnRelu, Stacked, scripted

from freezeview.engine.diff.diff import diff_snapshots
from freezeview.engine.draw.dot.ceiling import Overruns
from freezeview.engine.draw.folding.build import build_drawing
from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.draw.terminal.layout import layout_dot, layout_graph
from freezeview.engine.draw.terminal.values import GraphLayout
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph
from freezeview.session.canvas import Canvas

pytestmark = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")


def inlined(module: torch.jit.ScriptModule) -> GraphSnapshot:
    graph = module.forward.graph.copy()  # type: ignore[attr-defined]
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph)


def frozen(module: torch.jit.ScriptModule) -> GraphSnapshot:
    return snapshot_graph(torch.jit.freeze(module).graph)


def check_readable(layout: GraphLayout) -> None:
    """No two boxes overlap; every edge runs from its tail's frame to its head's frame."""
    boxes = list(layout.boxes.values())
    for a, b in combinations(boxes, 2):
        apart = a.x + a.w <= b.x or b.x + b.w <= a.x or a.y + a.h <= b.y or b.y + b.h <= a.y
        assert apart, f"{a.key} {a.lines[0]!r} overlaps {b.key} {b.lines[0]!r}"
    for box in boxes:
        assert box.x >= 0 and box.x + box.w <= layout.width
        assert box.y >= 0 and box.y + box.h <= layout.height
        for line in box.lines:
            assert len(line) <= box.w - 4  # each label line fits inside its frame
    for edge in layout.edges:
        tail, head = layout.boxes[edge.tail], layout.boxes[edge.head]
        cells = edge.cells
        assert tail.on_border(*cells[0]), f"{edge.tail}->{edge.head} starts off its tail"
        assert head.on_border(*cells[-1]), f"{edge.tail}->{edge.head} ends off its head"
        for (x0, y0), (x1, y1) in pairwise(cells):
            assert abs(x1 - x0) + abs(y1 - y0) == 1, "an edge's cells are 4-connected"
        for cell in cells[1:-1]:
            assert not tail.contains(*cell) and not head.contains(*cell)


def test_small_graph_every_box_placed_and_drawn() -> None:
    snap = inlined(scripted(ConvBnRelu()))
    layout = layout_graph(snap, level=None)
    view = build_drawing(snap, level=None, edge_labels=False)
    assert set(layout.boxes) == set(view.nodes)
    check_readable(layout)
    text = Canvas(layout).text()
    for box in layout.boxes.values():
        assert box.lines[0] in text  # every box's title is on the canvas
    # The arrow tips sit on the head boxes' frames.
    assert "▼" in text or "▶" in text or "◀" in text or "▲" in text


def test_diff_colours_and_ghosts() -> None:
    module = scripted(ConvBnRelu())
    before = inlined(module)
    after = frozen(module)
    layout = layout_graph(after, diff=diff_snapshots(before, after), level=None)
    statuses = {b.status for b in layout.boxes.values()}
    assert "removed" in statuses  # batch_norm and the attribute reads, as ghosts
    assert any(b.role == "ghost" for b in layout.boxes.values())
    assert layout.diff
    check_readable(layout)
    canvas = Canvas(layout)
    # Ghosts are drawn with dashed frames.
    assert "┄" in canvas.text() or "┆" in canvas.text()


def test_levels_module_boxes_and_expand() -> None:
    module = scripted(Stacked())
    snap = inlined(module)
    coarse = layout_graph(snap, level=1)
    assert coarse.level == 1 and coarse.levels[-1] is None
    scopes = [b for b in coarse.boxes.values() if b.role == "scope"]
    assert scopes, "level 1 folds the submodules into boxes"
    check_readable(coarse)
    opened = layout_graph(snap, level=1, options=RenderOptions(expand=(scopes[0].scope,)))
    assert scopes[0].key not in opened.boxes or opened.boxes[scopes[0].key].role != "scope"
    assert len(opened.boxes) > len(coarse.boxes)
    check_readable(opened)


def test_box_of_finds_the_box_of_a_node() -> None:
    snap = inlined(scripted(ConvBnRelu()))
    layout = layout_graph(snap, level=None)
    box = next(b for b in layout.boxes.values() if b.node_ids)
    assert layout.box_of(box.node_ids[0]) == box
    assert layout.box_at(*box.centre) == box


def test_overrun_falls_back_then_says_so() -> None:
    snap = inlined(scripted(Stacked()))
    # A ceiling of one box: every level is "too big", the coarsest is still tried once
    # the finer ones are skipped; with a timeout no run can meet, nothing is drawn.
    options = RenderOptions(timeout=1e-4, overruns=Overruns())
    layout = layout_graph(snap, level=None, options=options)
    assert not layout.boxes
    assert layout.notes and "nothing to draw" in layout.notes[-1]
    options = RenderOptions(max_boxes=3)
    layout = layout_graph(snap, level=None, options=options)
    assert layout.boxes and layout.level is not None
    assert any("ceiling" in note for note in layout.notes)


def _failing_dot(folder: Path, above: int) -> Path:
    """A stand-in ``dot`` failing as Graphviz's layout bugs do ("trouble in init_rank")
    on DOT text longer than ``above`` bytes, and running the real one on the rest."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "dot"
    script.write_text(
        "#!/bin/sh\n"
        'tmp="$(mktemp)"; cat > "$tmp"\n'
        f'if [ "$(wc -c < "$tmp")" -gt {above} ]; then\n'
        '  echo "Error: trouble in init_rank" >&2; rm -f "$tmp"; exit 1\n'
        "fi\n"
        f'"{shutil.which("dot")}" "$@" < "$tmp"; status=$?; rm -f "$tmp"; exit $status\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def test_a_level_dot_fails_on_falls_back_then_says_so(tmp_path: Path) -> None:
    """dot failing on a picture (a layout bug, not a timeout) gives the next coarser
    level with a note; failing on every level, an empty layout and one sentence."""
    snap = inlined(scripted(Stacked()))
    every_op, _ = layout_dot(build_drawing(snap, level=None, edge_labels=False))
    dot = _failing_dot(tmp_path / "bin", above=len(every_op) - 1)
    layout = layout_graph(snap, level=None, options=RenderOptions(dot_command=str(dot)))
    assert layout.boxes and layout.level is not None
    assert [n for n in layout.notes if "Graphviz failed" in n and "init_rank" in n]
    check_readable(layout)
    always = _failing_dot(tmp_path / "always", above=0)
    layout = layout_graph(snap, level=None, options=RenderOptions(dot_command=str(always)))
    assert not layout.boxes
    assert len(layout.notes) >= 2 and "nothing to draw" in layout.notes[-1]
    assert "init_rank" in layout.notes[-1] and "timeout" not in layout.notes[-1]


@pytest.mark.slow
def test_resnet50_is_readable_at_every_level() -> None:
    """The frozen ResNet-50 and its conv -> batchnorm diff: no two boxes overlap and
    every edge runs from frame to frame, at every level the view offers."""
    from render_models import resnet50_scripted

    module = resnet50_scripted()
    before = inlined(module)
    after = frozen(module)
    for level in layout_graph(after, level=1).levels:
        check_readable(layout_graph(after, level=level))
    diff = diff_snapshots(before, after)
    for level in (1, 2):
        check_readable(layout_graph(after, diff=diff, level=level))
    # Fitted to the graph pane of a 160x48 terminal (72x31 cells), the module level is
    # one screen: one line a box, the chain folded into columns.
    fitted = layout_graph(after, level=1, rows=31)
    check_readable(fitted)
    assert fitted.width <= 72 and fitted.height <= 31, (fitted.width, fitted.height)
    assert all(len(box.lines) == 1 for box in fitted.boxes.values())


def test_a_layout_asked_for_since_supersedes_the_one_being_made(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The engine makes the layout asked for last: one still being made for a step the
    user has left (laid out ahead) gives way at its next stage and answers None."""
    import threading

    import freezeview.engine.diff as diff_stage
    from freezeview.session.layouts import StepLayouts

    module = scripted(ConvBnRelu())
    before, after = inlined(module), frozen(module)
    started, go = threading.Event(), threading.Event()
    real = diff_stage.index_nodes

    def held(snapshot):  # type: ignore[no-untyped-def]
        started.set()
        go.wait(30)
        return real(snapshot)

    monkeypatch.setattr(diff_stage, "index_nodes", held)
    layouts = StepLayouts(None)
    answers: list[object] = []
    ahead = threading.Thread(target=lambda: answers.append(layouts.canvas(before, after)))
    ahead.start()
    assert started.wait(30)
    wanted = layouts.canvas(None, before)  # the graph alone: no diff, not held
    assert isinstance(wanted, Canvas) and wanted.layout.boxes
    go.set()
    ahead.join(30)
    assert answers == [None]
    again = layouts.canvas(before, after)  # asked for again, it is made
    assert isinstance(again, Canvas) and again.layout.diff
