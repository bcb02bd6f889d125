"""Tests for freezeview.engine.output.export (fast set) and real-size exports (slow set)."""

from __future__ import annotations

import html.parser
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from render_models import (
    ConvBnRelu,
    KeepsBuffer,
    Stacked,
    resnet50_scripted,
    scripted,
    transformer_encoder,
)

from freezeview.engine.draw.dot.run import GraphvizMissingError
from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.freeze.pipeline import Pipeline, Plan
from freezeview.engine.load.loading import LoadedModel
from freezeview.engine.output.export import export, step_stem
from freezeview.engine.plumbing.errors import OutputError
from freezeview.engine.plumbing.forked import can_fork

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")


def check_svg(path: Path) -> None:
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg", path


class _Html(html.parser.HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.tags: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)


def parse_html(path: Path) -> list[str]:
    parser = _Html()
    parser.feed(path.read_text(encoding="utf-8"))
    return parser.tags


@needs_dot
def test_export_writes_pictures_diffs_and_index(tmp_path: Path) -> None:
    module = scripted(ConvBnRelu())
    out = tmp_path / "out"
    result = export(module, out, per_step=True)
    for name in (
        "before.svg",
        "after.svg",
        "diff.svg",
        "side-by-side.svg",
        "ir.diff",
        "index.html",
    ):
        assert (out / name).is_file(), name
    for svg in out.glob("*.svg"):
        check_svg(svg)
    # A .diff for each step that changed the graph, nothing for the others; a picture
    # for each step that changed the graph.
    steps = Pipeline(LoadedModel.from_module(module)).run_all()
    for step in steps:
        assert (out / f"{step_stem(step)}.diff").is_file() == step.changed, step.name
    pictured = {p.stem for p in out.glob("[0-9][0-9]-*.svg")}
    assert any("fold_conv_bn" in stem for stem in pictured)
    assert pictured <= {step_stem(s) for s in steps if s.changed}
    tags = parse_html(result.index)  # type: ignore[arg-type]
    assert tags.count("svg") >= 4 + len(pictured)
    page = (out / "index.html").read_text()
    # Self-contained: its script and styles are inline, nothing is fetched.
    assert "<script src" not in page and 'src="http' not in page and "<link" not in page
    for step in steps:
        assert html_escape(step.title) in page
    assert "batch_norm" in (out / "ir.diff").read_text()
    # The model itself is not modified by exporting it.
    assert not module.training and hasattr(module, "bn")
    assert result.dot_seconds > 0 and result.build_seconds > 0


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


@needs_dot
def test_existing_outputs_need_force(tmp_path: Path) -> None:
    module = scripted(KeepsBuffer())
    export(module, tmp_path / "o", side_by_side=False)
    before = (tmp_path / "o" / "after.svg").stat().st_mtime_ns
    with pytest.raises(OutputError, match="--force"):
        export(module, tmp_path / "o")
    assert (tmp_path / "o" / "after.svg").stat().st_mtime_ns == before
    export(module, tmp_path / "o", force=True)
    # Missing parent directories are made, as mkdir -p.
    export(module, tmp_path / "missing" / "deeper", side_by_side=False)
    assert (tmp_path / "missing" / "deeper" / "after.svg").is_file()
    (tmp_path / "file").write_text("x")
    with pytest.raises(OutputError, match="is a file"):
        export(module, tmp_path / "file")


def test_missing_graphviz_still_writes_text_outputs(tmp_path: Path) -> None:
    module = scripted(ConvBnRelu())
    out = tmp_path / "out"
    opts = RenderOptions(dot_command=str(tmp_path / "no-dot-here"))
    with pytest.raises(GraphvizMissingError, match="apt-get install graphviz"):
        export(module, out, per_step=True, options=opts)
    for name in ("before.dot", "after.dot", "diff.dot", "ir.diff", "index.html"):
        assert (out / name).is_file(), name
    assert not list(out.glob("*.svg"))
    assert (out / "diff.dot").read_text().startswith("digraph")


def test_dot_format_needs_no_graphviz(tmp_path: Path) -> None:
    module = scripted(ConvBnRelu())
    result = export(
        module, tmp_path / "o", fmt="dot", options=RenderOptions(dot_command="/nonexistent")
    )
    assert {p.name for p in result.files} >= {"before.dot", "diff.dot", "ir.diff", "index.html"}


@needs_dot
def test_preserved_attribute_plan(tmp_path: Path) -> None:
    module = scripted(ConvBnRelu())
    plan = Plan.default(["conv.weight"])
    export(module, tmp_path / "o", plan=plan, side_by_side=False)
    root = ET.parse(tmp_path / "o" / "after.svg").getroot()
    kept = [
        g for g in root.iter("{http://www.w3.org/2000/svg}g") if "fv-kept" in g.get("class", "")
    ]
    assert len(kept) == 1
    assert "self.conv.weight" in "".join(kept[0].itertext())


# -- slow: real-size models, a real browser ----------------------------------------------


def _export_timed(module: torch.jit.ScriptModule, out: Path) -> float:
    start = time.perf_counter()
    # As the command exports: with the forked helper where the machine has one.
    result = export(module, out, per_step=True, parallel=True)
    elapsed = time.perf_counter() - start
    for svg in out.glob("*.svg"):
        check_svg(svg)
    assert result.index is not None and parse_html(result.index)
    return elapsed


@pytest.mark.slow
@needs_dot
def test_per_step_export_of_a_resnet50_sized_model(tmp_path: Path) -> None:
    module = resnet50_scripted()
    _export_timed(module, tmp_path / "resnet")
    assert (tmp_path / "resnet" / "diff.svg").stat().st_size > 10_000
    if can_fork():
        # The same files from one process as with the forked helper.
        export(module, tmp_path / "alone", per_step=True, parallel=False)
        assert _files(tmp_path / "alone") == _files(tmp_path / "resnet")


@pytest.mark.slow
@needs_dot
def test_per_step_export_of_a_12_layer_transformer(tmp_path: Path) -> None:
    module = transformer_encoder(12)
    _export_timed(module, tmp_path / "tfm")


def _chromium() -> str | None:
    return shutil.which("chromium") or shutil.which("chromium-browser")


@pytest.mark.slow
@needs_dot
@pytest.mark.skipif(_chromium() is None, reason="chromium is not installed")
def test_index_renders_in_headless_chromium(tmp_path: Path) -> None:
    module = resnet50_scripted()
    out = tmp_path / "export"
    export(module, out, per_step=True)
    shot = tmp_path / "shot.png"
    with tempfile.TemporaryDirectory() as profile:
        done = subprocess.run(
            [
                _chromium() or "chromium",
                "--headless",
                "--no-sandbox",
                "--disable-gpu",
                "--disable-quic",
                "--no-first-run",
                "--disable-background-networking",
                "--disable-component-update",
                "--disable-sync",
                f"--user-data-dir={profile}",
                "--hide-scrollbars",
                "--window-size=1400,1000",
                "--enable-logging=stderr",
                "--v=0",
                f"--screenshot={shot}",
                (out / "index.html").as_uri(),
            ],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode == 0, done.stderr[-2000:]
    assert shot.is_file() and shot.read_bytes()[:4] == b"\x89PNG"
    page_errors = [
        line
        for line in done.stderr.splitlines()
        if "CONSOLE" in line or "Uncaught" in line or "ERR_FILE_NOT_FOUND" in line
    ]
    assert not page_errors, page_errors


@needs_dot
def test_module_list_items_keep_their_path_and_times_add_up(tmp_path: Path) -> None:
    module = scripted(Stacked())
    start = time.perf_counter()
    result = export(module, tmp_path / "o", per_step=True)
    wall = time.perf_counter() - start
    for name in ("before.svg", "after.svg", "diff.svg"):
        texts = {t.strip() for t in ET.parse(tmp_path / "o" / name).getroot().itertext()}
        assert any(t.startswith("layers.0") or t == "in layers.0" for t in texts), name
        assert not texts & {"0", "0.lin", "0.bn", "in 0.lin"}, name
    parts = (
        result.freeze_seconds,
        result.snapshot_seconds,
        result.notes_seconds,
        result.reasons_seconds,
        result.diff_seconds,
        result.ir_diff_seconds,
        result.index_seconds,
        result.helper_wait_seconds,
        # Graphviz runs beside the rest: only the wait for it at the end adds up.
        result.build_seconds + result.dot_wait_seconds + result.write_seconds,
    )
    assert all(p >= 0 for p in parts) and sum(parts) <= wall


# -- what an export does not redo ---------------------------------------------------------


def test_export_runs_explain_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept-attribute tooltips and the fold step's notes share one explain."""
    # The pipeline reaches explain through the reasons stage's package.
    import freezeview.engine.reasons as verdicts

    calls: list[tuple[str, ...]] = []
    real = verdicts.explain

    def counting(model: object, preserved_attrs: tuple[str, ...] = (), **kw: object) -> object:
        calls.append(tuple(preserved_attrs))
        return real(model, preserved_attrs, **kw)  # type: ignore[arg-type]

    monkeypatch.setattr(verdicts, "explain", counting)
    module = scripted(KeepsBuffer())
    result = export(module, tmp_path / "o", per_step=True, fmt="dot")
    assert len(calls) == 1
    fold = next(e.step for e in result.steps if e.step.name == "fold_attributes")
    assert "count" in fold.kept
    # The notes were read for index.html; they carry explain's reason, not a bare name.
    assert any(n.startswith("kept count: ") for n in fold.notes), fold.notes
    page = (tmp_path / "o" / "index.html").read_text()
    assert "kept count: " in page
    # The same explanation gives the picture's tooltip, with explain's reason code.
    assert "in-place-write" in (tmp_path / "o" / "after.dot").read_text()
    assert len(calls) == 1


def test_unchanged_steps_are_not_diffed(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A step that left the graph alone costs an empty .diff and no picture, no diff."""
    from freezeview.engine.diff.diff import diff_snapshots
    from freezeview.engine.output import export as export_module

    pairs: list[tuple[object, object]] = []

    def recording(before: object, after: object) -> object:
        pairs.append((before, after))
        return diff_snapshots(before, after)  # type: ignore[arg-type]

    monkeypatch.setattr(export_module, "diff_snapshots", recording)
    # In this process, where the recording can see every diff (a forked helper's would
    # be lost with it).
    result = export(
        scripted(ConvBnRelu()), tmp_path / "o", per_step=True, fmt="dot", parallel=False
    )
    assert pairs, "the recording saw no diff"
    assert not any(before is after for before, after in pairs)
    unchanged = [e for e in result.steps if not e.step.changed]
    assert unchanged, "ConvBnRelu has passes that do not fire"
    previous = {e.step.index: e for e in result.steps}
    for entry in unchanged:
        assert entry.summary == "no change" and entry.picture is None
        assert entry.diff_file is None
        assert not (tmp_path / "o" / f"{step_stem(entry.step)}.diff").exists()
        assert not (tmp_path / "o" / f"{step_stem(entry.step)}.dot").exists()
        # What diffing the step would have said: nothing.
        before = previous[entry.step.index - 1].step.snapshot
        assert before is entry.step.snapshot
        assert diff_snapshots(before, entry.step.snapshot).is_empty  # type: ignore[arg-type]
    # Every step that changed the graph has its numbered .diff file.
    for entry in result.steps:
        if entry.step.changed:
            assert entry.diff_file is not None
            assert entry.diff_file.name == f"{step_stem(entry.step)}.diff"


@pytest.mark.parametrize("enabled", [True, False])
def test_export_leaves_the_garbage_collector_as_it_found_it(tmp_path: Path, enabled: bool) -> None:
    import gc

    was = gc.isenabled()
    try:
        gc.enable() if enabled else gc.disable()
        result = export(scripted(KeepsBuffer()), tmp_path / "o", fmt="dot")
        assert gc.isenabled() is enabled
        assert (result.gc_seconds > 0) is enabled
        with pytest.raises(OutputError):
            export(scripted(KeepsBuffer()), tmp_path / "o", fmt="dot")  # exists: no --force
        assert gc.isenabled() is enabled
    finally:
        gc.enable() if was else gc.disable()


def test_what_an_export_keeps_joins_the_oldest_generation(tmp_path: Path) -> None:
    """No young collection is left pending; a caller's frozen objects stay frozen."""
    import gc

    was = gc.isenabled()
    gc.enable()
    try:
        gc.unfreeze()  # as in a process nothing froze (the app's tests may have)
        gc.collect()
        result = export(scripted(KeepsBuffer()), tmp_path / "a", fmt="dot", per_step=True)
        young = gc.get_count()[0]
        assert young < 700 and gc.get_freeze_count() == 0
        kept = result.steps[-1].step.snapshot
        assert gc.is_tracked(kept) and any(o is kept for o in gc.get_objects(2))
        # A caller that froze objects itself keeps them frozen: the export falls back
        # to one young collection.
        mine = {"held": ["by the caller"]}
        gc.freeze()
        result = export(scripted(KeepsBuffer()), tmp_path / "b", fmt="dot", per_step=True)
        assert result.gc_seconds > 0
        assert not any(o is mine for o in gc.get_objects())  # still frozen
    finally:
        gc.unfreeze()
        gc.enable() if was else gc.disable()


# -- the forked helper ------------------------------------------------------------------

_MANGLE = re.compile(rb"___torch_mangle_\d+")


def _files(directory: Path) -> dict[str, bytes]:
    # Each export clones the module, and torch numbers every clone's types anew; the
    # page's timeline shows how long each step took.
    files = {p.name: _MANGLE.sub(b"___torch_mangle_N", p.read_bytes()) for p in directory.iterdir()}
    if "index.html" in files:
        files["index.html"] = re.sub(rb" \d+ ms", b" N ms", files["index.html"])
    return files


@needs_dot
@pytest.mark.skipif(not can_fork(), reason="needs Linux and a second CPU")
def test_a_forked_helper_writes_the_same_files(tmp_path: Path) -> None:
    module = scripted(ConvBnRelu())
    alone = export(module, tmp_path / "alone", per_step=True, parallel=False)
    helped = export(module, tmp_path / "helped", per_step=True, parallel=True)
    assert alone.helper_seconds == 0 and alone.diff_seconds > 0
    assert helped.helper_seconds > 0
    assert sum(1 for e in helped.steps if e.picture is not None) >= 2
    assert _files(tmp_path / "alone") == _files(tmp_path / "helped")


@pytest.mark.skipif(not can_fork(), reason="needs Linux and a second CPU")
def test_a_helper_that_fails_leaves_the_export_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import os

    from freezeview.engine.output import export as export_module

    parent = os.getpid()
    real = export_module.diff_facts

    def fails_in_the_helper(diff: object) -> object:
        if os.getpid() != parent:
            raise MemoryError("the helper ran out of memory")
        return real(diff)  # type: ignore[arg-type]

    module = scripted(ConvBnRelu())
    alone = export(module, tmp_path / "alone", per_step=True, fmt="dot", parallel=False)
    monkeypatch.setattr(export_module, "diff_facts", fails_in_the_helper)
    helped = export(module, tmp_path / "helped", per_step=True, fmt="dot", parallel=True)
    assert helped.helper_seconds == 0 and helped.diff_seconds > 0
    assert [e.summary for e in helped.steps] == [e.summary for e in alone.steps]
    assert _files(tmp_path / "alone") == _files(tmp_path / "helped")
