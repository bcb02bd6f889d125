"""Export's work grows no faster than the graph (issue 23): the boxes a diff picture opens,
Graphviz running beside freezeview's own work, the page's source lines."""

from __future__ import annotations

import importlib
import itertools
import threading
import time
import weakref
from collections import Counter
from collections.abc import Iterable
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch
from render_models import KeepsBuffer, Stacked, scripted

from freezeview.engine.draw.dot import run as dot_run
from freezeview.engine.draw.folding import plan as folding_plan
from freezeview.engine.draw.folding.plan import RenderOptions, changed_splits
from freezeview.engine.draw.folding.scopes import box_prefix, count_at_level, opened_scopes
from freezeview.engine.output.export import export
from freezeview.engine.plumbing import forked as forked_module
from freezeview.engine.plumbing.forked import can_fork

# The module, not the function the package exports under the same name.
export_module = importlib.import_module("freezeview.engine.output.export")


def _stack(blocks: int) -> tuple[Counter[str], list[str]]:
    """Scopes of a flat stack of Conv-BN-ReLU blocks (ops per scope), and the changed ones."""
    counts: Counter[str] = Counter()
    changed: list[str] = []
    for i in range(blocks):
        for part, ops in (("conv", 3), ("bn", 9), ("relu", 1)):
            counts[f"blocks.{i}.{part}"] = ops
        changed += [f"blocks.{i}.bn"] * 9 + [f"blocks.{i}.conv"]
    return counts, changed


def _splits(
    monkeypatch: pytest.MonkeyPatch, blocks: int, budget: int
) -> tuple[tuple[str, ...], float]:
    counts, changed = _stack(blocks)

    def drawn(_snapshot: Any, _constants: str, ids: Iterable[int], _modules: Any) -> list[str]:
        return changed if ids else []

    monkeypatch.setattr(folding_plan, "drawn_scopes", drawn)
    diff: Any = SimpleNamespace(added={1}, changed={}, removed=set(), after=None, before=None)
    best = float("inf")
    for _ in range(3):
        start = time.process_time()
        opened = changed_splits(diff, counts, 2, RenderOptions(budget=budget))
        best = min(best, time.process_time() - start)
    return opened, best


def _reference(counts: Counter[str], changed: list[str], budget: int) -> tuple[str, ...]:
    """changed_splits as first written: every candidate counted with count_at_level."""
    opened: list[str] = []
    tried: set[str] = set()
    while True:
        split = tuple(opened)
        now_open = opened_scopes((), split)
        boxes: Counter[str] = Counter()
        for scope in changed:
            box = box_prefix(scope, 2, (), now_open)
            if box is not None and box not in tried:
                boxes[box] += 1
        if not boxes:
            return split
        box = min(boxes, key=lambda b: (-boxes[b], b))
        tried.add(box)
        if count_at_level(counts, 2, (), (*split, box)) <= budget:
            opened.append(box)


@pytest.mark.parametrize("budget", [5, 110, 241])
def test_changed_splits_on_a_long_stack_opens_what_counting_opens(
    monkeypatch: pytest.MonkeyPatch, budget: int
) -> None:
    counts, changed = _stack(80)
    opened, _ = _splits(monkeypatch, 80, budget)
    assert opened == _reference(counts, changed, budget)


def test_changed_splits_grows_linearly_with_the_boxes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Every block is a changed box and none fits the budget: each is a candidate that
    # is counted. Counting the whole picture per candidate grew as blocks^2 (6 s on a
    # 2,048-block stack); eight times the blocks must cost about eight times the time.
    _, small = _splits(monkeypatch, 400, 300)
    opened, big = _splits(monkeypatch, 3200, 300)
    assert opened == ()
    assert big < 0.5, big
    assert big / max(small, 1e-3) < 24, (small, big)


# -- Graphviz beside the rest, and no fork for one diff ----------------------------------


@pytest.fixture
def recorded_dot(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, threading.Event]]:
    """Stands in for Graphviz: an empty SVG per run, each run recorded as it starts."""
    from freezeview.engine.draw.pictures import render as render_module

    runs: list[tuple[str, threading.Event]] = []

    def dot(source: str, fmt: str, options: Any) -> bytes:
        started = threading.Event()
        runs.append((source, started))
        started.set()
        return b'<svg xmlns="http://www.w3.org/2000/svg"></svg>'

    monkeypatch.setattr(render_module, "run_dot", dot)
    monkeypatch.setattr(dot_run, "find_dot", lambda options: "dot")
    return runs


def test_the_model_and_torchs_graphs_are_let_go_before_the_pictures(
    monkeypatch: pytest.MonkeyPatch,
    recorded_dot: list[tuple[str, threading.Event]],
    tmp_path: Path,
) -> None:
    # An export that loads its model owns it: once the freeze is read, the weights, the
    # frozen clone and the pipeline's graphs go, before the snapshots are drawn and the
    # diff and the page built (on a 48-layer transformer they were most of the export's
    # peak memory).
    from freezeview.engine.freeze import pipeline as pipeline_module
    from freezeview.engine.load import load_model
    from freezeview.engine.output import export_run

    path = tmp_path / "m.pt"
    torch.jit.save(scripted(KeepsBuffer()), str(path))
    held: dict[str, Any] = {}
    pipes: list[Any] = []

    def loading(source: Any) -> Any:
        loaded = load_model(source)
        held["model"] = weakref.ref(loaded)
        held["weight"] = weakref.ref(loaded.module.lin.weight)
        return loaded

    real_init = pipeline_module.Pipeline.__init__

    def recording(self: Any, *args: Any, **kwargs: Any) -> None:
        real_init(self, *args, **kwargs)
        pipes.append(weakref.ref(self))

    alive: list[tuple[bool, bool, bool]] = []
    real_start = export_module.start_snapshot

    def starting(*args: Any, **kwargs: Any) -> Any:
        alive.append(
            (held["model"]() is not None, held["weight"]() is not None, pipes[0]() is not None)
        )
        return real_start(*args, **kwargs)

    # The steps hold their graphs' printouts: the page reads summaries of them instead.
    steps: list[Any] = []
    real_row = export_run._read_row

    def reading(step: Any) -> None:
        steps.append(weakref.ref(step))
        real_row(step)

    snapshotted: list[tuple[bool, bool, bool]] = []
    real_snapshot = export_run.snapshot_graph

    def snapshotting(*args: Any, **kwargs: Any) -> Any:
        snapshotted.append(
            (held["model"]() is not None, held["weight"]() is not None, pipes[0]() is not None)
        )
        return real_snapshot(*args, **kwargs)

    monkeypatch.setattr(export_module, "load_model", loading)
    monkeypatch.setattr(pipeline_module.Pipeline, "__init__", recording)
    monkeypatch.setattr(export_module, "start_snapshot", starting)
    monkeypatch.setattr(export_run, "_read_row", reading)
    monkeypatch.setattr(export_run, "snapshot_graph", snapshotting)
    at_page: list[int] = []
    real_page = export_module.index_html

    def paging(*args: Any, **kwargs: Any) -> Any:
        at_page.append(sum(step() is not None for step in steps))
        return real_page(*args, **kwargs)

    monkeypatch.setattr(export_module, "index_html", paging)
    result = export(path, tmp_path / "o", parallel=False)
    assert snapshotted == [(False, False, False)]  # the before snapshot
    assert alive == [(False, False, False)] * 2  # before, after
    assert steps and at_page == [0]  # no step object is alive when the page is written
    assert [p.name for p in result.pictures] == ["before", "after", "diff", "side-by-side"]
    assert len(recorded_dot) == 4 and result.index is not None and result.index.exists()


def test_the_diff_pictures_go_to_graphviz_before_the_ir_diff_is_written(
    monkeypatch: pytest.MonkeyPatch,
    recorded_dot: list[tuple[str, threading.Event]],
    tmp_path: Path,
) -> None:
    # Graphviz is the export's last wait: the diff and side-by-side pictures are handed
    # to it as soon as the diff is made, and the IR diff (a second on a 48-layer
    # transformer) is written while Graphviz lays them out.
    started: list[str] = []
    seen: list[list[str]] = []
    real_diff, real_sbs, real_text = (
        export_module.start_diff,
        export_module.start_side_by_side,
        export_module.unified_ir_diff,
    )

    def diff(*args: Any, **kwargs: Any) -> Any:
        started.append("diff")
        return real_diff(*args, **kwargs)

    def side_by_side(*args: Any, **kwargs: Any) -> Any:
        started.append("side-by-side")
        return real_sbs(*args, **kwargs)

    def text(*args: Any, **kwargs: Any) -> str:
        seen.append(list(started))
        return real_text(*args, **kwargs)

    monkeypatch.setattr(export_module, "start_diff", diff)
    monkeypatch.setattr(export_module, "start_side_by_side", side_by_side)
    monkeypatch.setattr(export_module, "unified_ir_diff", text)
    result = export(scripted(KeepsBuffer()), tmp_path / "o", parallel=False)
    assert seen == [["diff", "side-by-side"]]
    assert (tmp_path / "o" / "ir.diff").read_text() and result.index is not None


def test_the_before_picture_goes_to_graphviz_before_the_diff_is_made(
    monkeypatch: pytest.MonkeyPatch,
    recorded_dot: list[tuple[str, threading.Event]],
    tmp_path: Path,
) -> None:
    # Graphviz's worker is idle once the after picture is laid out (its placing capped):
    # the before picture is handed to it before the overall diff, so the export's last
    # wait is the diff picture's layout alone.
    order: list[str] = []
    real_snapshot, real_diff = export_module.start_snapshot, export_module.diff_snapshots

    def snapshot(*args: Any, **kwargs: Any) -> Any:
        order.append(str(kwargs.get("title", "")).split(": ", 1)[-1])
        return real_snapshot(*args, **kwargs)

    def diffed(*args: Any, **kwargs: Any) -> Any:
        order.append("diff")
        return real_diff(*args, **kwargs)

    monkeypatch.setattr(export_module, "start_snapshot", snapshot)
    monkeypatch.setattr(export_module, "diff_snapshots", diffed)
    result = export(scripted(KeepsBuffer()), tmp_path / "o", parallel=False)
    assert order == ["after freezing", "before freezing (inlined)", "diff"]
    assert [p.name for p in result.pictures][:3] == ["before", "after", "diff"]


def test_an_export_without_steps_makes_its_one_diff_without_a_fork(
    recorded_dot: list[tuple[str, threading.Event]], tmp_path: Path
) -> None:
    # A fork copies every page of the snapshots it reads (refcounts): for one diff that
    # cost more memory than it saved time. With steps to diff, the helper still forks.
    forks: list[bool | None] = []
    real = forked_module.Forked.__init__

    def counting(self: Any, work: Any, *, enabled: bool | None = None) -> None:
        real(self, work, enabled=enabled)
        forks.append(self.started)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(forked_module.Forked, "__init__", counting)
        result = export(scripted(KeepsBuffer()), tmp_path / "a", parallel=True)
        assert forks == [False] and result.helper_seconds == 0
        stepped = export(scripted(KeepsBuffer()), tmp_path / "b", parallel=True, per_step=True)
    assert forks[1] is can_fork()
    assert stepped.steps and result.diff_seconds > 0


# -- the page's source lines -------------------------------------------------------------


def test_the_page_reads_one_source_range_per_line_it_shows(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Every node's source range was read (70k on a 48-layer transformer, 3 s) for the
    # few hundred lines the boxes drawn show; the snapshot of the graph finds one node
    # per line, and the texts are the same.
    import torch

    from freezeview.engine.graph.snapshot import snapshot_graph
    from freezeview.engine.output import review_page

    module = scripted(Stacked())
    graph = module._c._get_method("forward").graph.copy()
    torch._C._jit_pass_inline(graph)
    snapshot = snapshot_graph(graph)
    every = review_page.source_texts(graph)
    nodes = snapshot.nodes_in_order()
    wanted = {str(n.source) for n in nodes if n.source is not None and not n.source.text}
    assert len(wanted) >= 5 and len(nodes) > 3 * len(wanted)
    reads = []
    parse = review_page.parse_source_range

    def counting(text: object) -> Any:
        reads.append(text)
        return parse(text)

    monkeypatch.setattr(review_page, "parse_source_range", counting)
    texts = review_page.source_texts(graph, wanted, snapshot)
    assert texts and texts == {k: v for k, v in every.items() if k in wanted}
    assert len(reads) == len(wanted)


def test_the_page_splits_only_the_ir_diff_lines_it_shows() -> None:
    # The page shows 400 lines of the IR diff and says how many more: the same lines
    # and count as splitting the whole text, which held 280k strings at 48 layers.
    import random

    from freezeview.engine.output.review_page import _first_lines

    rng = random.Random(1)
    pieces = ["a", "%x = aten::add", "\n", "\r", "\r\n", "\x0b", "\x85", "\u2028", " "]
    for _ in range(2000):
        text = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 40)))
        lines = text.splitlines()
        for count in (1, 2, 3, 7, 400):
            assert _first_lines(text, count) == (lines[:count], len(lines[count:])), text


# -- pictures Graphviz cannot lay out in time, known before it runs ------------------------


def test_edge_bends_count_the_ranks_long_edges_cross() -> None:
    from freezeview.engine.draw.dot.ceiling import edge_bends

    chain = [f"l{i}" for i in range(10)]
    edges = list(itertools.pairwise(chain))
    assert edge_bends(["x", *chain], [("x", "l0"), *edges]) == 0
    # x feeds every layer: its edge to layer i crosses i ranks.
    fan = [("x", c) for c in chain]
    assert edge_bends(["x", *chain], [*fan, *edges]) == sum(range(10))
    # A cycle's back edge is reversed, not followed.
    assert edge_bends(chain, [*edges, ("l9", "l0")]) == 8


class _SharedReads(torch.nn.Module):
    """A deep stack whose every layer reads the same three inputs (attention's mask)."""

    def __init__(self, layers: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(_Layer() for _ in range(layers))

    def forward(
        self, h: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
        a, b, c = a * 2, b + 1, torch.relu(c)  # ops at the top: boxes every layer reads
        for layer in self.layers:
            h = layer(h, a, b, c)
        return h


class _Layer(torch.nn.Module):
    def forward(
        self, h: torch.Tensor, a: torch.Tensor, b: torch.Tensor, c: torch.Tensor
    ) -> torch.Tensor:
        return torch.relu(h * a + b) - c


def test_a_picture_of_long_edges_past_the_bend_ceiling_never_starts_dot(
    recorded_dot: list[tuple[str, threading.Event]], tmp_path: Path
) -> None:
    # One box per layer: few boxes, but three values every layer reads, whose edges
    # cross the whole picture. 96 transformer layers drawn so overran 30 s three times
    # in one export; now the coarser level is drawn at once, with a note.
    from freezeview.engine.draw.folding.plan import RenderOptions as Options
    from freezeview.engine.draw.pictures.render import render_snapshot
    from freezeview.engine.graph.snapshot import snapshot_graph

    module = torch.jit.script(_SharedReads(40))
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    snap = snapshot_graph(graph)
    modules = frozenset(n for n, _ in module.named_modules() if n)
    fits = render_snapshot(snap, tmp_path / "a.svg", options=Options(level=2, modules=modules))
    assert fits.level == 2 and not fits.notes and len(recorded_dot) == 1
    tight = Options(level=2, modules=modules, max_boxes=200)  # bend ceiling 150
    capped = render_snapshot(snap, tmp_path / "b.svg", options=tight)
    assert capped.level == 1 and capped.requested_level == 2
    assert len(recorded_dot) == 2  # the level-1 picture only
    assert "bends" in capped.notes[0] and "without running Graphviz" in capped.notes[0]


def test_a_picture_waiting_its_turn_is_not_laid_out_once_one_that_size_overran(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Pictures go to Graphviz in the background, built before the one ahead of them
    # finished: one that overran in the meantime still spares the later ones its wait.
    from freezeview.engine.draw.dot.ceiling import Overruns
    from freezeview.engine.draw.dot.queue import DotQueue
    from freezeview.engine.draw.folding.plan import RenderOptions as Options
    from freezeview.engine.draw.pictures import render as render_module
    from freezeview.engine.graph.snapshot import snapshot_graph

    module = torch.jit.script(_SharedReads(6))
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    snap = snapshot_graph(graph)
    runs: list[int] = []
    release = threading.Event()

    def dot(source: str, fmt: str, options: Any) -> bytes:
        runs.append(len(source))
        if len(runs) == 1:
            release.wait(10)
            raise render_module.DotTimeoutError("overran")
        return b'<svg xmlns="http://www.w3.org/2000/svg"></svg>'

    monkeypatch.setattr(render_module, "run_dot", dot)
    monkeypatch.setattr(dot_run, "find_dot", lambda options: "dot")
    options = Options(overruns=Overruns(), modules=frozenset(n for n, _ in module.named_modules()))
    with DotQueue() as dots:
        first = render_module.start_snapshot(snap, tmp_path / "a.svg", options=options, dots=dots)
        second = render_module.start_snapshot(snap, tmp_path / "b.svg", options=options, dots=dots)
        jobs = [first._job, second._job]
        release.set()
        # Both turns taken by the worker (had this thread waited sooner, it would have
        # laid out the second picture itself, beside the first: nothing to skip then).
        deadline = time.monotonic() + 10
        while not all(j is not None and j._done.is_set() for j in jobs):
            assert time.monotonic() < deadline
            time.sleep(0.01)
        one, two = first.result(), second.result()
    assert one.level == two.level != one.requested_level == two.requested_level
    assert "already overrun" in two.notes[0]
    assert len(runs) == 3  # the first level once (overran), the coarser one for each


def test_the_page_is_written_a_part_at_a_time_with_the_same_bytes(
    monkeypatch: pytest.MonkeyPatch,
    recorded_dot: list[tuple[str, threading.Event]],
    tmp_path: Path,
) -> None:
    # The page of a 2,048-block stack holds 13 MB of SVG: it is written part by part
    # instead of joined into one string and encoded whole (three copies at once).
    from freezeview.engine.output.review_page import review_page

    joined: list[str] = []
    from freezeview.engine.output import export_page

    write = export_page.write_review_page

    def recording(path: Path, **page: Any) -> Path:
        joined.append(review_page(**page))
        return write(path, **page)

    monkeypatch.setattr(export_page, "write_review_page", recording)
    result = export(scripted(KeepsBuffer()), tmp_path / "o", parallel=False)
    assert result.index is not None and joined
    assert result.index.read_bytes() == joined[0].encode("utf-8")


def test_the_pages_json_builds_each_pictures_box_facts_as_it_writes_them(
    monkeypatch: pytest.MonkeyPatch,
    recorded_dot: list[tuple[str, threading.Event]],
    tmp_path: Path,
) -> None:
    # A 2,048-block stack's page data is 13 MB: each picture's box facts are built and
    # encoded in turn, never those of every picture (and the whole document) at once.
    import json

    from freezeview.engine.output import review_page

    events: list[str] = []
    real_facts, real_json = review_page.box_facts, review_page._json_for_script

    def facts(picture: Any, texts: Any = None) -> Any:
        events.append(f"facts {picture.id}")
        return real_facts(picture, texts)

    def encoded(value: Any) -> str:
        events.append("json")
        return real_json(value)

    monkeypatch.setattr(review_page, "box_facts", facts)
    monkeypatch.setattr(review_page, "_json_for_script", encoded)
    result = export(scripted(KeepsBuffer()), tmp_path / "o", parallel=False)
    assert result.index is not None
    firsts = [i for i, e in enumerate(events) if e.startswith("facts")]
    assert len(firsts) == 4 and all(events[i + 1] == "json" for i in firsts)
    page = result.index.read_text()
    data = json.loads(page.split('id="fv-data">', 1)[1].split("</script>", 1)[0])
    assert list(data) == ["pictures", "start", "attributes", "boxes"]
    assert list(data["boxes"]) == ["diff", "after", "before", "side-by-side"]


def test_forgetting_a_snapshots_prepared_view_keeps_the_others() -> None:
    # An export lets go of its own snapshots' prepared views before the page, and
    # leaves what others (the app's pictures) prepared in the same process.
    from freezeview.engine.draw.folding.prepared import forget_prepared, prepare_snapshot
    from freezeview.engine.graph.snapshot import snapshot_graph

    module = torch.jit.script(_SharedReads(3))
    one = snapshot_graph(module.forward.graph)
    two = snapshot_graph(module.forward.graph)
    first, second = prepare_snapshot(one, "fold"), prepare_snapshot(two, "fold")
    forget_prepared(one)
    assert prepare_snapshot(two, "fold") is second
    assert prepare_snapshot(one, "fold") is not first
