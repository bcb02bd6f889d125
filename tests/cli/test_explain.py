"""``freezeview explain`` through the real console entry point."""

from __future__ import annotations

import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from models.small import example_module
from rich.console import Console

from freezeview.cli import main
from freezeview.cli.explain import render_explanation
from freezeview.engine import explain


@pytest.fixture(scope="module")
def example_pt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("model") / "example.pt"
    torch.jit.save(example_module().build(), str(path))
    return path


def test_json_output_is_the_contract(example_pt: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(example_pt), "--preserve", "temperature", "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["model"] == str(example_pt)
    assert doc["torch_version"] == torch.__version__
    paths = {a["path"]: a for a in doc["attributes"]}
    assert paths["temperature"]["status"] == "kept"
    assert paths["steps"]["reasons"][0]["code"] == "in-place-write"


def test_preserve_takes_commas_and_repeats(
    example_pt: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["explain", str(example_pt), "--preserve", "temperature,calibrate", "--json"]
    assert main(argv) == 0
    doc = json.loads(capsys.readouterr().out)
    assert doc["plan"] == {"preserved_attrs": ["temperature"], "methods": ["forward", "calibrate"]}


def test_unknown_preserve_exits_1_with_suggestion(
    example_pt: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(example_pt), "--preserve", "temprature"]) == 1
    err = capsys.readouterr().err
    assert "closest: temperature" in err
    assert "Traceback" not in err and len(err.strip().splitlines()) <= 2


def test_missing_file_exits_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["explain", str(tmp_path / "nope.pt")]) == 2
    assert "does not exist" in capsys.readouterr().err


def test_human_table_groups_kept_first_with_summary() -> None:
    result = explain(example_module().build(), ["temperature"])
    out = io.StringIO()
    render_explanation(Console(file=out, width=160, color_system=None), result)
    text = out.getvalue()
    assert text.index("(root module)") < text.index("conv  Conv2d")
    lines = text.splitlines()
    assert lines[-2].startswith(result.summary()) or any(
        line.startswith(result.summary()) for line in lines
    )
    assert "in-place-write" in text and "aten::add_" in text
    assert "build_example.py:" in text
    # Narrow terminals get one attribute per line instead of a squeezed table.
    narrow = io.StringIO()
    render_explanation(Console(file=narrow, width=80, color_system=None), result)
    assert "┃" not in narrow.getvalue() and "kept    steps" in narrow.getvalue()


@pytest.mark.slow  # a fresh process: tests/cli/test_console.py runs the console script
def test_console_script_runs_in_a_fresh_process(example_pt: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "freezeview", "explain", str(example_pt), "--status", "kept"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    assert "inlined ·" in proc.stdout and "kept" in proc.stdout
    assert "Warning" not in proc.stderr


def test_no_arguments_prints_usage_and_exits_2(capsys: pytest.CaptureFixture[str]) -> None:
    assert main([]) == 2
    assert "usage" in capsys.readouterr().err


def test_reasons_show_the_source_lines_text(
    example_pt: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["explain", str(example_pt), "--json"]) == 0
    doc = json.loads(capsys.readouterr().out)
    reason = next(a for a in doc["attributes"] if a["path"] == "steps")["reasons"][0]
    line = int(reason["source"].rsplit(":", 1)[1])
    source_file = Path(reason["source"].rsplit(":", 1)[0])
    assert reason["source_text"] == source_file.read_text().splitlines()[line - 1].strip()
    assert main(["explain", str(example_pt)]) == 0
    assert f"| {reason['source_text']}" in capsys.readouterr().out


def test_debug_prints_what_a_disagreement_report_needs(
    example_pt: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    from freezeview.engine.reasons.replay import FreezeReplay

    monkeypatch.setattr(FreezeReplay, "slot_survives", lambda self, mod, name: True)
    assert main(["explain", str(example_pt), "--json", "--debug"]) == 0
    captured = capsys.readouterr()
    doc = json.loads(captured.out)
    assert doc["disagreements"], "a replay that keeps everything must disagree with torch"
    first = doc["disagreements"][0]
    assert f"{first['path']}: torch {first['torch_status']}, replay kept" in captured.err
    assert "please report" in captured.err.lower()
    codes = {r["code"] for a in doc["attributes"] for r in a["reasons"]}
    assert "undetermined" in codes


def test_the_command_leaves_torchs_clone_to_the_process_end(
    example_pt: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Emptying the frozen clone's graphs frees memory for a caller that goes on (the
    app, the API); the command exits next, so it skips that work (a second at 96 layers)."""
    from freezeview.engine.reasons import verdicts

    released: list[object] = []
    monkeypatch.setattr(verdicts, "release_clone", lambda clone, original: released.append(clone))
    assert main(["explain", str(example_pt), "--json"]) == 0
    capsys.readouterr()
    assert released == []
    explain(example_module().build())
    assert len(released) == 1
