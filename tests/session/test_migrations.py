"""The session's ``migrate`` (session/migrations.py): run once, kept, written on request.

torch's converter itself runs in tests/engine/migrate/test_migration.py and, through the
app, in tests/ui/test_migrate_screen.py; here the engine's ``migrate`` is replaced by one
that counts its calls, to hold the session to converting once per model, writing the
kept program without converting again, and refusing (in one sentence) what the command
line refuses.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path
from typing import Any

import pytest

from freezeview.engine.migrate import Conversion, Migration, StateWrite
from freezeview.engine.plumbing import BadInputError
from freezeview.session import MigrationSummary, SessionOptions
from freezeview.session.local import Session
from freezeview.session.migrations import NO_INPUTS

DIFFERING = Migration(
    "m.pt",
    "2.13",
    Conversion(True, seconds=0.5),
    calls=3,
    outputs_same=(True, True, True),
    writes=(StateWrite("last_scale", "set-attr", "", "m.py:73", "self.last_scale = s"),),
)


@pytest.fixture
def converter(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """The engine's migrate, replaced: each call's arguments are recorded, and the
    program it "saves" is a file of known bytes."""
    calls: list[dict[str, Any]] = []

    def migrate(model: Any, inputs: Any, **options: Any) -> Migration:
        calls.append({"model": model, "inputs": inputs, **options})
        Path(options["output"]).write_bytes(b"program")
        return dataclasses.replace(DIFFERING, written=str(options["output"]))

    monkeypatch.setattr("freezeview.engine.migrate.migrate", migrate)
    return calls


def test_without_sample_inputs_it_is_one_sentence_before_anything_loads(tmp_path: Path) -> None:
    session = Session(path=tmp_path / "missing.pt")
    with pytest.raises(BadInputError) as caught:
        session.migrate()
    assert str(caught.value) == NO_INPUTS
    assert session.loaded is None


def test_one_migration_a_session_written_without_converting_again(
    tmp_path: Path, converter: list[dict[str, Any]]
) -> None:
    options = SessionOptions(input_shapes=("2,3",), threads=2, time_budget=0.5, eval_mode=True)
    session = Session(path=tmp_path / "m.pt", options=options)
    found = session.migrate()
    assert len(converter) == 1
    call = converter[0]
    assert call["model"] == tmp_path / "m.pt" and call["inputs"][0].shape == (2, 3)
    assert (call["threads"], call["budget"], call["eval_mode"]) == (2, 0.5, True)
    # What the command line says, and nothing written where the user did not ask.
    assert found.lines == tuple((x.kind, x.text) for x in DIFFERING.report_lines())
    assert found.verdict == DIFFERING.verdict and not found.same and found.converted
    assert found.lost_writes == (("last_scale", "m.py:73", "self.last_scale = s"),)
    assert not found.written and not found.not_written

    out = tmp_path / "out" / "m.pt2"
    refused = session.migrate(out)
    assert not out.exists() and "does not behave the same" in refused.not_written
    forced = session.migrate(out, force=True)
    assert forced.written == str(out) and out.read_bytes() == b"program"
    assert forced.differences == DIFFERING.differences
    assert len(converter) == 1  # written from the kept program
    session.migrate(again=True)
    assert len(converter) == 2
    # The summary crosses from the engine process as it is.
    assert pickle.loads(pickle.dumps(forced)) == forced
    assert isinstance(forced, MigrationSummary)


def test_the_engine_process_answers_migrate_with_the_summary(
    small_pt: Path, tmp_path: Path, converter: list[dict[str, Any]]
) -> None:
    """``RemoteSession.migrate``'s request as the engine process's dispatch takes it (the
    arguments in the protocol's order), answered with the summary the session made."""
    from freezeview.session import engine_process

    sent: list[tuple[Any, ...]] = []
    options = SessionOptions(input_shapes=("1,3,8,8",))
    engine = engine_process._Engine(small_pt, options, sent.append)
    engine.handle(1, "open", ())
    out = tmp_path / "small.pt2"
    engine.handle(2, "migrate", (out, True, False))
    kind, rid, found = sent[-1]
    assert (kind, rid) == ("done", 2) and isinstance(found, MigrationSummary)
    assert found.written == str(out) and out.read_bytes() == b"program"
    assert len(converter) == 1 and converter[0]["model"] == small_pt
    assert pickle.loads(pickle.dumps(found)) == found
