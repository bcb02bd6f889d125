"""explain --migrate: what freezing keeps beside what the move to torch.export loses.

The slow set runs the command once on the bundled example (its converter in migrate's
child process) and holds its facts against the program torch's converter makes here, in
the test: the writes marked ``lost in torch.export`` are the state the program does not
follow over successive calls, the declared ones are its graph signature's mutated
buffers, and each marker sits on the source line of explain's own write reason. Fast:
bad usage, and a converter that crashes (nothing converts: no marker, the failing stage
said, explain's exit code).
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from engine.migrate.test_migration import _attribute, _program_attribute, _same, _torchs_program
from repo_paths import ROOT
from torch import nn

import freezeview.engine.migrate as migrate_package
from freezeview.cli import main
from freezeview.engine.migrate import DOES_NOT_CONVERT, Migration
from freezeview.engine.migrate import migration as migration_module

EXAMPLE = ROOT / "examples" / "example.pt"
SCHEMAS = ROOT / "docs" / "schemas"
EXPLAIN_SCHEMA = json.loads((SCHEMAS / "explain.schema.json").read_text())
MIGRATE_SCHEMA = json.loads((SCHEMAS / "migrate.schema.json").read_text())
SHAPE = (1, 3, 16, 16)
WRITES = ("set-attr", "in-place-write")


@contextlib.contextmanager
def _captured(migrations: list[Migration], *, reuse: Migration | None = None) -> Iterator[None]:
    """Record the Migration explain's ``migrate`` call returns (or return ``reuse``
    instead of converting again), with human output laid out as in a file."""
    real = migrate_package.migrate

    def recorded(*args: Any, **kwargs: Any) -> Migration:
        found = reuse if reuse is not None else real(*args, **kwargs)
        migrations.append(found)
        return found

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(migrate_package, "migrate", recorded)
        patch.delenv("COLUMNS", raising=False)
        yield


def _explain(argv: list[str]) -> tuple[int, str]:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["explain", *argv])
    return code, out.getvalue()


def _write_reason(attribute: dict[str, Any]) -> dict[str, Any] | None:
    return next((r for r in attribute["reasons"] if r["code"] in WRITES and r["source"]), None)


def _value(value: Any) -> Any:
    """A copy of an attribute's value that later calls cannot change."""
    if isinstance(value, torch.Tensor):
        return value.detach().clone()
    return copy.deepcopy(value)


class _Double(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.calls = torch.zeros(1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return x * 2


def test_migrate_without_inputs_is_one_sentence_and_exit_2(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", str(EXAMPLE), "--migrate"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.count("\n") == 1 and "--input-shape" in captured.err


def test_a_crashing_converter_keeps_explain_s_exit_code_and_marks_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    model = tmp_path / "double.pt"
    torch.jit.save(torch.jit.script(_Double().eval()), str(model))
    monkeypatch.setattr(
        migration_module,
        "child_command",
        lambda request, result: [sys.executable, "-c", "import os; os.abort()"],
    )
    migrations: list[Migration] = []
    argv = [str(model), "--migrate", "--input-shape", "4", "--time-budget", "0"]
    with _captured(migrations):
        code, out = _explain([*argv, "--json"])
    document = json.loads(out)
    assert code == 0 and len(migrations) == 1
    jsonschema.validate(document, EXPLAIN_SCHEMA)
    jsonschema.validate(document["migration"], MIGRATE_SCHEMA)
    assert document["migration"]["verdict"] == DOES_NOT_CONVERT
    assert all(a["export"] is None for a in document["attributes"])
    # explain still says why freezing keeps the buffer the forward writes.
    calls = next(a for a in document["attributes"] if a["path"] == "calls")
    assert _write_reason(calls) is not None
    with _captured(migrations, reuse=migrations[0]):
        code, text = _explain(argv)
    tables, section = text.split("\ntorch.export ", 1)
    assert code == 0 and "by torch.export" not in tables and "in torch.export" not in tables
    assert DOES_NOT_CONVERT in section
    assert f"failed in forward, {migrations[0].conversion.stage}" in section
    assert "SIGABRT" in section


@pytest.fixture(scope="module")
def example() -> dict[str, Any]:
    """One explain --migrate of the example (one conversion): its JSON, its text and the
    Migration it showed."""
    migrations: list[Migration] = []
    argv = [str(EXAMPLE), "--migrate", "--input-shape", ",".join(map(str, SHAPE))]
    argv += ["--time-budget", "0"]
    with _captured(migrations):
        json_code, out = _explain([*argv, "--json"])
    assert len(migrations) == 1
    with _captured(migrations, reuse=migrations[0]):
        text_code, text = _explain(argv)
    return {
        "codes": (json_code, text_code),
        "document": json.loads(out),
        "text": text,
        "migration": migrations[0],
    }


@pytest.fixture(scope="module")
def torchs(example: dict[str, Any]) -> dict[str, Any]:
    """What torch's converter, run here, does with the example's state over three calls:
    the attributes the TorchScript forward changes, those the program does not follow,
    the writes its graph signature declares, its parameters held as buffers, its fixed
    input dimensions."""
    torch.manual_seed(0)
    x = torch.randn(*SHAPE)
    script = torch.jit.load(str(EXAMPLE))
    program = _torchs_program(script, (x,), example["migration"].verdict)
    ours, theirs = copy.deepcopy(script), program.module()
    paths = [a["path"] for a in example["document"]["attributes"] if a["kind"] != "submodule"]
    before = {p: _value(_attribute(ours, p)) for p in paths}
    written: set[str] = set()
    lost: set[str] = set()
    with torch.no_grad():
        for _ in range(3):
            assert torch.allclose(ours(x.clone()), theirs(x.clone()))
            for path in paths:
                value = _attribute(ours, path)
                unchanged = (
                    _same(before[path], value)
                    if isinstance(value, torch.Tensor)
                    else before[path] == value
                )
                if not unchanged:
                    written.add(path)
                    if not _same(value, _program_attribute(theirs, path)):
                        lost.add(path)
    signature = program.graph_signature
    user = signature.user_inputs[0]
    shape = next(n for n in program.graph.nodes if n.name == user).meta["val"].shape
    return {
        "written": written,
        "lost": lost,
        "declared": set(signature.buffers_to_mutate.values()),
        "as_buffers": [n for n, _ in script.named_parameters() if n in set(signature.buffers)],
        "fixed": [d for d, size in enumerate(shape) if isinstance(size, int)],
    }


@pytest.mark.slow
def test_the_json_marks_the_writes_torch_s_program_loses(
    example: dict[str, Any], torchs: dict[str, Any]
) -> None:
    document = example["document"]
    assert example["codes"] == (0, 0), "the migration's verdict never changes explain's exit"
    jsonschema.validate(document, EXPLAIN_SCHEMA)
    jsonschema.validate(document["migration"], MIGRATE_SCHEMA)
    exports = {a["path"]: a["export"] for a in document["attributes"]}
    writes = {p: e["state_write"] for p, e in exports.items() if e and e["state_write"]}
    assert torchs["lost"], "the example's forward writes state the converter does not keep"
    assert set(writes) == torchs["written"]
    assert {p for p, w in writes.items() if not w["carried"]} == torchs["lost"]
    assert {p for p, w in writes.items() if w["declared"]} == torchs["declared"] & set(writes)
    held = [p for p, e in exports.items() if e and e["parameter_as_buffer"]]
    assert sorted(held) == sorted(torchs["as_buffers"])
    for attribute in document["attributes"]:
        write = writes.get(attribute["path"])
        if write is not None:
            reason = _write_reason(attribute)
            assert reason is not None and write["source"] == reason["source"]
            assert write["how"] == reason["code"] and write["source_text"]


@pytest.mark.slow
def test_each_marker_sits_on_the_line_of_explain_s_own_write(
    example: dict[str, Any], torchs: dict[str, Any]
) -> None:
    text = example["text"]
    tables, section = text.split("\ntorch.export ", 1)
    marked = [line for line in tables.splitlines() if "lost in torch.export" in line]
    assert len(marked) == len(torchs["lost"])
    for attribute in example["document"]["attributes"]:
        if attribute["path"] not in torchs["written"]:
            continue
        reason = _write_reason(attribute)
        assert reason is not None
        at = [line for line in tables.splitlines() if f"at {reason['source']}" in line]
        assert len(at) == 1, (attribute["path"], at)
        lost = attribute["path"] in torchs["lost"]
        assert ("lost in torch.export" in at[0]) == lost
        assert ("kept by torch.export" in at[0]) == (not lost)
        if lost:
            assert f"{attribute['path']} ({reason['source']})" in section
    migration: Migration = example["migration"]
    assert section.startswith(f"(freezeview migrate on the sample inputs): {migration.verdict}")
    assert f"{len(torchs['as_buffers'])} parameters held as buffers" in section
    for dimension in torchs["fixed"]:
        assert f"x[{dimension}] = {SHAPE[dimension]}" in section
