"""Every bad model file, given to ``check`` and ``compare``: one sentence, exit 2, nothing
written, the file untouched, and nothing a hostile pickle names ever runs.

The files are the bad-input catalogue's (``tests/bad_inputs/catalogue.py``), the same
the other subcommands are held to.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from bad_inputs.catalogue import CATALOGUE, BadInput, save_tiny

from freezeview.cli import main

LOAD_CASES = [c for c in CATALOGUE if c.stage == "load"]


def _digest(path: Path) -> str | None:
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else None


def _one_sentence(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("case", LOAD_CASES, ids=lambda c: c.name)
@pytest.mark.parametrize("command", ["check", "compare"])
def test_a_bad_model_is_one_sentence_and_nothing_is_written(
    case: BadInput, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    built = case.build(tmp_path)
    before = {p: _digest(p) for p in (built.model, *built.guarded)}
    written = tmp_path / "expect.toml"
    if command == "check":
        argv = ["check", str(built.model), "--write-expect", str(written)]
    else:
        valid = save_tiny(tmp_path / "valid.pt")
        argv = ["compare", str(valid), str(built.model)]
    code = main([*argv, *built.args_for("explain")])
    err = capsys.readouterr().err
    assert code == case.exit_code, err
    sentence = _one_sentence(err)
    assert case.matches(sentence), sentence
    assert not written.exists()
    assert {p: _digest(p) for p in before} == before
    if built.marker is not None:
        assert not built.marker.exists(), "a hostile pickle ran"
