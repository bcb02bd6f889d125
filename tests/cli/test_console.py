"""Human output sent to a file, a pipe or a CI log is not cut to 80 columns.

Every subcommand's text output is read here as it reaches something that is not a
terminal (pytest's capture, a file): a path, a reason, a step's row or a pass's
description stays on one line, no line ends in padding, and ``COLUMNS`` still sets a
width when given. On a terminal, rich's layout at the terminal's width is unchanged.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from models.small import example_module

from freezeview.cli import main
from freezeview.cli.console import UNBOUNDED, is_unbounded, report_console


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    # A deep directory: every path the reports name is longer than a terminal line.
    folder = tmp_path_factory.mktemp("model") / "a-directory-whose-name-alone-fills-half-a-line"
    folder.mkdir()
    path = folder / "example.pt"
    torch.jit.save(example_module().build(), str(path))
    return path


@pytest.fixture(autouse=True)
def _no_columns(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)


def _run(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> str:
    assert main(list(argv)) == code, capsys.readouterr().err
    return capsys.readouterr().out


def _lines(text: str) -> list[str]:
    lines = text.splitlines()
    padded = [line for line in lines if line != line.rstrip()]
    assert not padded, f"lines end in spaces: {padded[:3]}"
    return lines


def _on_one_line(lines: list[str], *parts: str) -> None:
    assert any(all(part in line for part in parts) for line in lines), (
        f"no line holds all of {parts}; the output was:\n" + "\n".join(lines[:60])
    )


def test_explain_keeps_every_reason_and_source_line_whole(
    model: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads(_run(capsys, "explain", str(model), "--json"))
    lines = _lines(_run(capsys, "explain", str(model)))
    _on_one_line(lines, str(model))
    located = 0
    for attribute in doc["attributes"]:
        for reason in attribute["reasons"]:
            _on_one_line(lines, f"{reason['code']}: {reason['message']}")
            if reason["source"] and reason["code"] in ("set-attr", "in-place-write"):
                _on_one_line(lines, f"at {reason['source']}")
                located += 1
    assert located >= 2
    # A table row per attribute: its name, kind, status and first reason on one line.
    steps = next(a for a in doc["attributes"] if a["path"] == "steps")
    _on_one_line(lines, "steps", "buffer", "kept", steps["reasons"][0]["code"])


@pytest.mark.slow
def test_explain_into_a_file_through_the_console_script(model: Path, tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("freezeview")
    if not script.exists():
        pytest.skip("the console script is not installed")
    report = tmp_path / "report.txt"
    env = {k: v for k, v in os.environ.items() if k not in ("COLUMNS", "PYTHONWARNINGS")}
    with report.open("w") as out:
        proc = subprocess.run(
            [str(script), "explain", str(model)], stdout=out, stderr=subprocess.PIPE, env=env
        )
    assert proc.returncode == 0, proc.stderr
    assert not proc.stderr  # no warning of torch's or anyone's on a plain explain
    lines = _lines(report.read_text())
    assert "\x1b[" not in report.read_text()
    assert max(len(line) for line in lines) > 100
    _on_one_line(lines, f"{model} · torch {torch.__version__}")


@pytest.mark.parametrize("command", ["explain", "passes"])
@pytest.mark.slow
def test_a_reader_that_went_away_ends_the_command_quietly(model: Path, command: str) -> None:
    """``freezeview explain model.pt | head -2``: exit 0 and nothing said, as Unix tools do
    (rich's own answer to a broken pipe was exit 1)."""
    script = Path(sys.executable).with_name("freezeview")
    if not script.exists():
        pytest.skip("the console script is not installed")
    argv = [str(script), command] + ([str(model)] if command == "explain" else [])
    read_end, write_end = os.pipe()
    os.close(read_end)  # the reader is gone before the first line
    try:
        proc = subprocess.run(argv, stdout=write_end, stderr=subprocess.PIPE, text=True)
    finally:
        os.close(write_end)
    assert (proc.returncode, proc.stderr) == (0, "")


def test_freeze_prints_one_row_per_step(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "frozen.pt"
    steps = [
        json.loads(line)
        for line in _run(capsys, "freeze", str(model), "-o", str(out), "--json").splitlines()
    ][:-1]
    lines = _lines(_run(capsys, "freeze", str(model), "-o", str(out), "--force"))
    for step in steps:
        _on_one_line(lines, f" {step['title']} ", f" {step['nodes']} ")
        if step["changed"]:
            delta = f"+{step['nodes_added']}/-{step['nodes_removed']}/~{step['nodes_changed']}"
            _on_one_line(lines, f" {step['title']} ", delta, step["notes"][0][:100])
    _on_one_line(lines, f"wrote {out} (")


def test_passes_prints_each_description_whole(capsys: pytest.CaptureFixture[str]) -> None:
    passes = json.loads(_run(capsys, "passes", "--json"))
    lines = _lines(_run(capsys, "passes"))
    for info in passes:
        _on_one_line(lines, f" {info['id']} ", info["description"])
        _on_one_line(lines, f"fires on: {info['fires_when']}")


def test_export_names_its_directory_and_pictures_whole(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "an-export-directory-with-a-name-long-enough-to-be-cut-at-80"
    lines = _lines(_run(capsys, "export", str(model), "-o", str(out), "--format", "dot"))
    _on_one_line(lines, f"freezeview export → {out}")
    for name in ("before.dot", "after.dot", "diff.dot"):
        _on_one_line(lines, name, "every op")
    _on_one_line(lines, f"Open {out / 'index.html'} in a browser.")


def test_check_and_compare_lines_stay_whole(
    model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    expect = tmp_path / "a-long-expectations-file-name-for-this-model.freeze.toml"
    wrote = _lines(_run(capsys, "check", str(model), "--write-expect", str(expect)))
    _on_one_line(wrote, f"wrote {expect}: ", "firing.")
    checked = _lines(_run(capsys, "check", str(model), "--expect", str(expect)))
    _on_one_line(checked, "rules hold for", str(model))
    compared = _lines(_run(capsys, "compare", str(model), str(model)))
    _on_one_line(compared, f"freezeview compare: {model} -> {model}")


def test_columns_still_sets_the_width(
    model: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "72")
    lines = _lines(_run(capsys, "explain", str(model)))
    assert max(len(line) for line in lines) <= 72
    monkeypatch.setenv("COLUMNS", "300")
    lines = _lines(_run(capsys, "passes"))
    assert 100 < max(len(line) for line in lines) <= 300


class _Terminal:
    encoding = "utf-8"

    def isatty(self) -> bool:
        return True

    def write(self, text: str) -> int:
        return len(text)

    def flush(self) -> None:
        pass

    def fileno(self) -> int:
        raise OSError("no descriptor")


def test_a_terminal_keeps_its_width(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(sys, "stdout", _Terminal())
    monkeypatch.setenv("COLUMNS", "90")
    console = report_console()
    assert console.width == 90 and console.is_terminal and not is_unbounded(console)


def test_a_file_has_no_width_unless_columns_says(monkeypatch: pytest.MonkeyPatch) -> None:
    console = report_console()
    assert console.width == UNBOUNDED and is_unbounded(console) and not console.is_terminal
    monkeypatch.setenv("COLUMNS", "120")
    assert report_console().width == 120
    assert report_console(stderr=True).width == 120
