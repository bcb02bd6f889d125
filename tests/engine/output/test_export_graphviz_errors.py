"""Graphviz errors are survived, and an export directory is written whole or not at all.

``dot`` has layout bugs that hit some graphs and not others ("Error: trouble in
init_rank" on a traced T5). A stand-in ``dot`` (a script that fails on some pictures and
runs the real one on the others) stands for them: a failing level falls back to a
coarser one, a picture that fails at every level is left out with a sentence, and the
rest of the export (the other pictures, the diffs, ``index.html``) is written. Whatever
stops an export half-way leaves the directory as it was.
"""

from __future__ import annotations

import shutil
import stat
from pathlib import Path

import pytest
from render_models import ConvBnRelu, scripted

from freezeview.cli import main
from freezeview.engine.draw.dot.run import DotFailedError
from freezeview.engine.draw.folding.plan import RenderOptions
from freezeview.engine.draw.pictures.render import render_snapshot
from freezeview.engine.freeze.pipeline import Pipeline
from freezeview.engine.output.export import export

REAL_DOT = shutil.which("dot")
needs_dot = pytest.mark.skipif(REAL_DOT is None, reason="Graphviz is not installed")
ERROR = "Error: trouble in init_rank"


def _failing_dot(folder: Path, *, pattern: str = "", above: int = -1) -> Path:
    """A `dot` that fails as Graphviz does on pictures whose DOT text holds ``pattern``
    (or is longer than ``above`` bytes), and runs the real one on the others."""
    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "dot"
    tests = []
    if pattern:
        tests.append(f'grep -q -- "{pattern}" "$tmp"')
    if above >= 0:
        tests.append(f'[ "$(wc -c < "$tmp")" -gt {above} ]')
    script.write_text(
        "#!/bin/sh\n"
        'tmp="$(mktemp)"; cat > "$tmp"\n'
        f"if {' || '.join(tests)}; then\n"
        f'  echo "{ERROR}" >&2; echo "in label of graph %3" >&2; rm -f "$tmp"; exit 1\n'
        "fi\n"
        f'"{REAL_DOT}" "$@" < "$tmp"; status=$?; rm -f "$tmp"; exit $status\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)
    return script


def _inlined_snapshot() -> object:
    pipe = Pipeline(scripted(ConvBnRelu()))
    steps = pipe.run_all()
    return steps[0].snapshot


@needs_dot
def test_a_level_graphviz_fails_on_falls_back_to_a_coarser_one(tmp_path: Path) -> None:
    snap = _inlined_snapshot()
    fine = render_snapshot(snap, tmp_path / "fine.svg", options=RenderOptions(level=None))
    dot = _failing_dot(tmp_path / "bin", above=len(fine.path.read_bytes()) // 4)
    # The stand-in fails on the DOT text of every op; the module level is smaller.
    opts = RenderOptions(level=None, dot_command=str(dot))
    result = render_snapshot(snap, tmp_path / "x.svg", options=opts)
    assert result.requested_level is None and result.level is not None
    assert any("Graphviz failed" in n and ERROR in n for n in result.notes), result.notes
    assert result.path.read_bytes().lstrip().startswith((b"<?xml", b"<svg"))


@needs_dot
def test_failing_at_every_level_writes_nothing(tmp_path: Path) -> None:
    dot = _failing_dot(tmp_path / "bin", above=0)
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DotFailedError, match="nothing was written") as caught:
        render_snapshot(
            _inlined_snapshot(), out / "x.svg", options=RenderOptions(dot_command=str(dot))
        )
    assert ERROR in str(caught.value) and "\n" not in str(caught.value)
    assert caught.value.exit_code == 1
    assert list(out.iterdir()) == []


@needs_dot
def test_a_picture_graphviz_cannot_draw_is_left_out_and_the_export_finishes(tmp_path: Path) -> None:
    # Only the side-by-side picture's DOT holds its title: it fails at every level.
    dot = _failing_dot(tmp_path / "bin", pattern="before / after")
    out = tmp_path / "out"
    result = export(
        scripted(ConvBnRelu()), out, options=RenderOptions(dot_command=str(dot)), parallel=False
    )
    names = sorted(p.name for p in out.iterdir())
    assert names == ["after.svg", "before.svg", "diff.svg", "index.html", "ir.diff"]
    assert [p.name for p in result.pictures] == ["before", "after", "diff"]
    left_out = [n for n in result.notes if "side-by-side.svg was left out" in n]
    assert left_out and ERROR in left_out[0]
    page = (out / "index.html").read_text(encoding="utf-8")
    assert "side-by-side.svg was left out" in page
    assert all(path.parent == out and path.exists() for path in result.files)
    assert result.index == out / "index.html"
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.")]


@needs_dot
def test_the_cli_survives_a_failing_dot_on_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    model = tmp_path / "model.pt"
    torch.jit.save(scripted(ConvBnRelu()), str(model))
    bin_dir = tmp_path / "bin"
    _failing_dot(bin_dir, pattern="before / after")
    monkeypatch.setenv("PATH", f"{bin_dir}:{Path(str(REAL_DOT)).parent}")
    out = tmp_path / "out"
    assert main(["export", str(model), "-o", str(out), "--one-process"]) == 0
    printed = capsys.readouterr()
    assert "side-by-side.svg was left out" in printed.out + printed.err
    assert (out / "index.html").is_file() and (out / "diff.svg").is_file()


@needs_dot
def test_an_export_stopped_half_way_leaves_no_directory(tmp_path: Path) -> None:
    out = tmp_path / "out"

    def stop_at_the_diff(text: str) -> None:
        if text == "drawing diff":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export(scripted(ConvBnRelu()), out, progress=stop_at_the_diff, parallel=False)
    # before.svg and after.svg were drawn, but nothing is left of them.
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@needs_dot
def test_a_forced_export_stopped_half_way_leaves_the_old_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    export(scripted(ConvBnRelu()), out, parallel=False)
    (out / "notes.txt").write_text("mine")
    before = {p.name: p.read_bytes() for p in out.iterdir()}

    def stop_at_the_diff(text: str) -> None:
        if text == "drawing diff":
            raise KeyboardInterrupt

    with pytest.raises(KeyboardInterrupt):
        export(scripted(ConvBnRelu()), out, force=True, progress=stop_at_the_diff, parallel=False)
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
    # And a forced export that finishes replaces the outputs, leaving other files alone.
    export(scripted(ConvBnRelu()), out, force=True, parallel=False)
    assert (out / "notes.txt").read_text() == "mine"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["out"]
