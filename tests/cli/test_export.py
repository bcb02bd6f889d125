"""Tests for ``freezeview export`` (exit codes, files, messages)."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from render_models import ConvBnRelu, Stacked, resnet50_scripted, scripted

from freezeview.cli import main

needs_dot = pytest.mark.skipif(shutil.which("dot") is None, reason="Graphviz is not installed")


@pytest.fixture(scope="module")
def model_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("models") / "convbn.pt"
    torch.jit.save(scripted(ConvBnRelu()), str(path))
    return path


@needs_dot
def test_export_per_step(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    data = model_path.read_bytes()
    assert main(["export", str(model_path), "-o", str(out), "--per-step", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["index"] == str(out / "index.html")
    names = {Path(p).name for p in report["files"]}
    assert {"before.svg", "after.svg", "diff.svg", "ir.diff", "index.html"} <= names
    assert any(n.endswith("-fold_conv_bn.svg") for n in names)
    assert any(n.endswith("-fold_conv_bn.diff") for n in names)
    for svg in out.glob("*.svg"):
        assert ET.parse(svg).getroot().tag.endswith("svg")
    assert model_path.read_bytes() == data  # the input model is never modified
    # The timings the benchmarks split an export by: every part lies inside the total
    # (Graphviz runs beside the rest: the wait for it is a part, its own time is not).
    parts = ("freeze", "snapshot", "diff", "ir_diff", "build", "dot_wait", "write")
    parts += ("reasons", "notes", "index", "gc", "helper_wait")
    apart = ("load", "total", "helper", "dot")
    seconds = {name: report[f"{name}_seconds"] for name in (*parts, *apart)}
    assert all(value >= 0 for value in seconds.values())
    assert seconds["load"] > 0 and seconds["dot"] > 0
    assert sum(seconds[name] for name in parts) <= seconds["total"] + 0.01


@pytest.mark.parametrize("flag", [[], ["--one-process"]])
def test_export_diffs_in_a_helper_unless_told_one_process(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str], flag: list[str]
) -> None:
    from freezeview.engine.plumbing.forked import can_fork

    out = tmp_path / "out"
    argv = ["export", str(model_path), "-o", str(out), "--per-step", "--format", "dot", "--json"]
    assert main([*argv, *flag]) == 0
    report = json.loads(capsys.readouterr().out)
    helped = bool(report["helper_seconds"])
    assert helped is (can_fork() and not flag)
    if flag:
        assert report["diff_seconds"] > 0 and report["helper_wait_seconds"] == 0


@needs_dot
def test_existing_output_needs_force(
    model_path: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "out"
    assert main(["export", str(model_path), "-o", str(out)]) == 0
    capsys.readouterr()
    assert main(["export", str(model_path), "-o", str(out)]) == 2
    err = capsys.readouterr().err
    assert "--force" in err and "Traceback" not in err
    assert main(["export", str(model_path), "-o", str(out), "--force"]) == 0


def test_missing_graphviz_exit_1(
    model_path: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    empty = tmp_path / "bin"
    empty.mkdir()
    monkeypatch.setenv("PATH", str(empty))
    out = tmp_path / "out"
    assert main(["export", str(model_path), "-o", str(out)]) == 1
    err = capsys.readouterr().err
    assert "apt-get install graphviz" in err and "Traceback" not in err
    assert (out / "diff.dot").is_file() and (out / "ir.diff").is_file()
    # --format dot is what to use without Graphviz: exit 0.
    assert main(["export", str(model_path), "-o", str(tmp_path / "d"), "--format", "dot"]) == 0


@pytest.mark.parametrize(
    ("extra", "needle"),
    [
        (["--level", "deep"], "--level"),
        (["--budget", "0"], "--budget"),
        (["--timeout", "-1"], "--timeout"),
        (["--max-boxes", "0"], "--max-boxes"),
        (["--passes", "no_such_pass"], "no_such_pass"),
        (["--preserve", "nope"], "nope"),
    ],
)
def test_bad_options_are_one_sentence(
    model_path: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    extra: list[str],
    needle: str,
) -> None:
    rc = main(["export", str(model_path), "-o", str(tmp_path / "o"), "--format", "dot", *extra])
    assert rc in (1, 2)
    err = capsys.readouterr().err
    assert needle in err and "Traceback" not in err


def test_unreadable_model_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"not a model")
    assert main(["export", str(bad), "-o", str(tmp_path / "o")]) == 2
    assert "Traceback" not in capsys.readouterr().err


@needs_dot
def test_expand_and_level_reach_the_pictures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """--level 1 draws the top-level modules as boxes; --expand opens one down to its ops."""
    path = tmp_path / "stacked.pt"
    torch.jit.save(scripted(Stacked(4)), str(path))
    out = tmp_path / "o"
    rc = main(
        ["export", str(path), "-o", str(out), "--level", "1", "--expand", "layers.1", "--json"]
    )
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    after = next(p for p in report["pictures"] if p["name"] == "after.svg")
    assert after["level"] == 1
    text = "".join(ET.parse(out / "after.svg").getroot().itertext())
    assert "layers.0" in text and "head" in text  # boxes
    assert "layers.1.lin" in text  # expanded down to ops


@pytest.mark.slow
@needs_dot
def test_expand_and_level(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The same on ResNet-50 (a real-size export: the slow set)."""
    path = tmp_path / "resnet.pt"
    torch.jit.save(resnet50_scripted(), str(path))
    out = tmp_path / "o"
    rc = main(
        ["export", str(path), "-o", str(out), "--level", "1", "--expand", "layer3.1", "--json"]
    )
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    after = next(p for p in report["pictures"] if p["name"] == "after.svg")
    assert after["level"] == 1
    root = ET.parse(out / "after.svg").getroot()
    text = "".join(root.itertext())
    assert "layer3.0" in text and "layer1" in text  # boxes
    assert "in layer3.1.conv1" in text or "layer3.1.conv1" in text  # expanded down to ops


@needs_dot
def test_no_open_changed(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "stacked.pt"
    torch.jit.save(scripted(Stacked(6)), str(path))
    reports = []
    for extra in ([], ["--no-open-changed"]):
        out = tmp_path / f"o{len(extra)}"
        rc = main(["export", str(path), "-o", str(out), "--budget", "12", "--json", *extra])
        assert rc == 0
        reports.append(json.loads(capsys.readouterr().out))
    opened = {p["name"]: p["opened"] for p in reports[0]["pictures"]}
    assert any(opened.values())
    assert all(
        set(names) <= {"layers", *(f"layers.{i}" for i in range(6))} for names in opened.values()
    )
    assert not any(p["opened"] for p in reports[1]["pictures"])


def test_max_boxes_reaches_the_render_options(
    model_path: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import importlib

    from freezeview.engine.draw.dot.ceiling import box_ceiling
    from freezeview.engine.draw.folding.plan import RenderOptions

    seen: list[RenderOptions] = []

    def recording(*args: object, options: RenderOptions, **kw: object) -> object:
        seen.append(options)
        raise KeyboardInterrupt  # stop before any freezing or drawing

    # `export` imports the function from its stage when it runs: patched there, it is what
    # it gets.
    output_stage = importlib.import_module("freezeview.engine.output")
    monkeypatch.setattr(output_stage, "export_model", recording)
    base = ["export", str(model_path), "-o", str(tmp_path / "o"), "--format", "dot"]
    for extra in (["--max-boxes", "123"], ["--timeout", "120"]):
        main([*base, *extra])
    assert [o.max_boxes for o in seen] == [123, None]
    assert [o.ceiling for o in seen] == [123, box_ceiling(120)]


@needs_dot
def test_max_boxes_draws_big_pictures_coarser(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stacked.pt"
    torch.jit.save(scripted(Stacked(6)), str(path))
    out = tmp_path / "o"
    rc = main(
        ["export", str(path), "-o", str(out), "--level", "ops", "--max-boxes", "60", "--json"]
    )
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    before = next(p for p in report["pictures"] if p["name"] == "before.svg")
    assert before["level"] != "ops" and before["nodes"] <= 60
    assert any("--max-boxes" in note and "before.svg" in note for note in report["notes"])
