"""What migrate says, line by line (``Migration.report_lines``), and ``write_program``.

The command line prints these lines and the app's ``m`` shows them: the tests hold the
CLI's output to them, each finding to a line of its kind, and the ``.pt2`` to being put
in place only when the program behaves the same (or when forced). The migrations are
built by hand (torch-free values); what torch's converter really does is held against
them in test_migration.py.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.cli import migrate as migrate_cli
from freezeview.engine.measure import Latency
from freezeview.engine.migrate import (
    BEHAVES_THE_SAME,
    DIFFERS,
    LINE_KINDS,
    Aoti,
    Conversion,
    FailedNode,
    Migration,
    Speed,
    SpeedPair,
    StateWrite,
    write_program,
)
from freezeview.engine.plumbing import OutputError


def _latency(ms: float) -> Latency:
    return Latency(median=ms, min=ms, max=ms, spread=ms / 100, runs=100, threads=1, blocks=20)


WRITES = (
    StateWrite("steps", "in-place-write", "", "m.py:70", "self.steps.add_(1)", True, False),
    StateWrite("history", "in-place-write", "", "m.py:72", "", carried=True, declared=True),
    StateWrite("last_scale", "set-attr", "", "m.py:73", "self.last_scale = scale"),
)
DIFFERING = Migration(
    "d.pt",
    "2.13",
    Conversion(True, seconds=0.34),
    calls=3,
    outputs_same=(True, True, False),
    output_notes=("", "", "max diff 1"),
    writes=WRITES,
    parameters_as_buffers=("a", "b"),
    specialised=("x[0] = 1",),
    second_shape="2,3: the program rejects it",
    second_shape_same=False,
    speed=Speed(1, 0.25, SpeedPair("ExportedProgram", _latency(0.02), _latency(0.1))),
    aoti=Aoti(True, 3.2, True),
    not_written="not written: the program does not behave the same.",
)
FAILED = Migration(
    "b [x].pt",
    "2.13",
    Conversion(
        False,
        stage="converting a node",
        cause="boom [bold]",
        failed_node=FailedNode("aten::foo", "layers.0", "m.py:3", "x = foo(x)"),
        hint="known thing",
        unhandled_kinds=("aten::foo",),
    ),
    writes=WRITES,
    notes=("a note",),
)
NO_CONVERTER = Migration("a.pt", "2.13", Conversion(False, available=False, cause="none here."))
SAME = Migration("e.pt", "2.13", Conversion(True, seconds=0.1), calls=3, outputs_same=(True,) * 3)


@pytest.mark.parametrize("migration", [DIFFERING, FAILED, NO_CONVERTER, SAME])
def test_the_command_line_prints_the_report_lines(
    migration: Migration, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    # Unwrapped: not on a terminal and without COLUMNS (make sets it), lines go whole.
    monkeypatch.delenv("COLUMNS", raising=False)
    migrate_cli._print(migration)
    printed = capsys.readouterr().out.splitlines()
    lines = migration.report_lines()
    assert printed == [("  " if line.indented else "") + line.text for line in lines]
    assert (lines[0].kind, lines[0].text) == ("verdict", f"{migration.verdict} ({migration.model})")
    assert {line.kind for line in lines} <= set(LINE_KINDS)


def test_each_finding_has_a_line_of_its_kind() -> None:
    kinds = {line.kind: line.text for line in DIFFERING.report_lines()}
    assert kinds["outputs-differ"] == "outputs: the same on 2 of 3 successive calls"
    assert kinds["write-lost"] == (
        "state write LOST: last_scale (set-attr, m.py:73: self.last_scale = scale)"
    )
    assert kinds["write-undeclared"].endswith("steps (in-place-write, m.py:70: self.steps.add_(1))")
    assert kinds["write-kept"] == "state write kept: history (in-place-write, m.py:72)"
    assert kinds["buffers"].endswith(": 2") and kinds["fixed"].endswith("x[0] = 1")
    assert "5x slower" in kinds["speed"] and kinds["aoti"].startswith("AOTInductor: compiled")
    assert kinds["not-written"] == DIFFERING.not_written
    # Without a converter: the verdict and the one sentence, nothing else.
    assert [(x.kind, x.text) for x in NO_CONVERTER.report_lines()][1:] == [
        ("unavailable", "none here.")
    ]
    # A model that does not convert lists no state write as kept or lost.
    failed = {line.kind for line in FAILED.report_lines()}
    assert not failed & {"write-lost", "write-kept", "write-undeclared"}
    assert "known cause: known thing" in [x.text for x in FAILED.report_lines()]


def test_the_program_is_put_in_place_only_when_it_behaves_the_same(tmp_path: Path) -> None:
    saved = tmp_path / "kept.pt2"
    saved.write_bytes(b"program")
    out = tmp_path / "out" / "model.pt2"
    assert DIFFERING.verdict == DIFFERS and SAME.verdict == BEHAVES_THE_SAME

    refused = write_program(DIFFERING, saved, out, how_to_force="F")
    assert not out.exists() and not refused.written
    assert refused.not_written == (
        "not written: the program does not behave the same (F writes it with the "
        "differences listed)."
    )
    forced = write_program(DIFFERING, saved, out, force=True)
    assert forced.written == str(out) and not forced.not_written
    assert out.read_bytes() == b"program"
    out.unlink()
    assert write_program(SAME, saved, out).written == str(out) and out.exists()
    nothing = write_program(FAILED, saved, tmp_path / "never.pt2", force=True)
    assert nothing.not_written == "nothing to write: the model does not convert."
    assert not (tmp_path / "never.pt2").exists()
    with pytest.raises(OutputError):
        write_program(SAME, saved, tmp_path)  # a directory
