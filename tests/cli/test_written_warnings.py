"""``explain`` and ``freeze`` warn about folded attributes the frozen graph still writes.

torch is the oracle: the attributes whose folded constants torch's own frozen module
writes when it runs (``test_written_constants.torch_written_paths``: its graphs'
constants copied, the module run twice, the constants that moved mapped back to their
attributes by storage) are exactly those the warning names (a tensor written through a
list, a dict, a tuple, inside a fork body, behind an interface); a model whose frozen
module writes none (a fork whose writes freezing drops, state torch keeps) gets none.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from corpus import case_by_name
from docs_support import DOCS
from engine.reasons.test_written_constants import torch_written_paths
from torch import nn

from freezeview.cli import main

WARNED = ["written_list_element", "written_fork_read"]
QUIET = ["written_fork_counters", "inplace_add"]
MORE_WARNED = ["written_dict_value", "written_tuple_element", "written_interface_list"]


def _torch_written(name: str) -> set[str]:
    """The attributes whose folded constants torch's frozen module writes."""
    return torch_written_paths(case_by_name(name))[0]


@pytest.fixture(scope="module")
def saved(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[Path, Path]]:
    folder = tmp_path_factory.mktemp("written")
    out: dict[str, tuple[Path, Path]] = {}
    for name in WARNED + QUIET + MORE_WARNED:
        case = case_by_name(name)
        model, inputs = folder / f"{name}.pt", folder / f"{name}-in.pt"
        torch.jit.save(case.build(), str(model))
        torch.save(case.inputs(), str(inputs))
        out[name] = (model, inputs)
    return out


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    assert main(argv) == 0, argv
    return capsys.readouterr().out


def _schema(name: str) -> jsonschema.Draft202012Validator:
    schema = json.loads((DOCS / "schemas" / f"{name}.schema.json").read_text())
    return jsonschema.Draft202012Validator(schema)


def _valid(name: str, doc: Any) -> None:
    errors = [f"{list(e.absolute_path)}: {e.message}" for e in _schema(name).iter_errors(doc)]
    assert not errors, errors


def _written_paths(model: Path, capsys: pytest.CaptureFixture[str]) -> list[str]:
    """explain --json's written-constant attributes (validated against its schema)."""
    doc = json.loads(_run(["explain", str(model), "--json"], capsys))
    _valid("explain", doc)
    by_reason = [
        a["path"]
        for a in doc["attributes"]
        if any(r["code"] == "written-constant" for r in a["reasons"])
    ]
    listed = list(dict.fromkeys(w["path"] for w in doc["written_constants"]))
    assert listed == by_reason
    return listed


def _check_explain(
    name: str,
    saved: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, _ = saved[name]
    paths = _written_paths(model, capsys)
    assert set(paths) == _torch_written(name)
    moves = bool(paths)
    monkeypatch.setenv("COLUMNS", "200")
    out = _run(["explain", str(model)], capsys)
    assert ("warning:" in out) == moves
    if moves:
        block = out[out.index("warning:") :]
        assert block.startswith(f"warning: {len(paths)} folded attribute")
        assert "mutates its own constant" in block and "from call to call" in block
        assert "troubleshooting.md#the-frozen-model-mutates-its-own-constants" in block
        for path in paths:
            assert f"  {path}  " in block and "written by aten::" in block
        # After every table: nothing but the block follows it.
        assert "┃" not in block


@pytest.mark.parametrize("name", WARNED + QUIET)
def test_explain_warns_exactly_when_torch_s_frozen_outputs_move(
    name: str,
    saved: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _check_explain(name, saved, capsys, monkeypatch)


@pytest.mark.slow
@pytest.mark.parametrize("name", MORE_WARNED)
def test_explain_warns_on_every_written_shape(
    name: str,
    saved: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _check_explain(name, saved, capsys, monkeypatch)


def test_the_warning_survives_status_filters(
    saved: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    model, _ = saved["written_list_element"]
    out = _run(["explain", str(model), "--status", "kept"], capsys)
    assert "warning: 1 folded attribute is still written" in out


@pytest.mark.parametrize("name", ["written_list_element", "written_fork_counters"])
def test_freeze_json_lists_what_explain_lists(
    name: str, saved: dict[str, tuple[Path, Path]], capsys: pytest.CaptureFixture[str]
) -> None:
    model, _ = saved[name]
    expected = _written_paths(model, capsys)
    out = model.with_name(f"{name}-frozen.pt")
    lines = _run(["freeze", str(model), "-o", str(out), "--force", "--json"], capsys)
    result = json.loads(lines.strip().splitlines()[-1])
    _valid("freeze-result", result)
    assert [w["path"] for w in result["written_constants"]] == expected
    for write in result["written_constants"]:
        assert write["source"] and write["source_text"] and write["node"]
    assert set(expected) == _torch_written(name)


def test_freeze_warns_next_to_the_run_twice_line(
    saved: dict[str, tuple[Path, Path]],
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model, inputs = saved["written_list_element"]
    monkeypatch.setenv("COLUMNS", "200")
    argv = ["freeze", str(model), "-o", str(model.with_name("out.pt")), "--force"]
    out = _run([*argv, "--inputs", str(inputs), "--time-budget", "0"], capsys)
    lines = out.splitlines()
    warning = next(i for i, line in enumerate(lines) if line.startswith("warning:"))
    assert "1 folded attribute is still written by the frozen graph" in lines[warning]
    row = next(i for i in range(warning, len(lines)) if lines[i].startswith("  a "))
    assert lines[row].split()[:6] == ["a", "written", "by", "aten::add_", "in", "forward"]
    assert "self.a[0][1] += 10" in lines[row + 1]
    twice = [i for i, line in enumerate(lines) if line.startswith("run twice")]
    if twice:  # the second-call line, when freeze reports it, comes just before
        assert twice[0] < warning


class _ListStep(nn.Module):
    def __init__(self, writes: bool) -> None:
        super().__init__()
        self.totals = [torch.zeros(4)]
        self.writes = writes

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.writes:
            self.totals[0].add_(x.sum(0))
        return x + self.totals[0]


class _Blocks(nn.Module):
    def __init__(self, writes: bool) -> None:
        super().__init__()
        self.blocks = nn.ModuleList([_ListStep(writes) for _ in range(3)])

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for block in self.blocks:
            x = block(x)
        return x


@pytest.mark.parametrize("writes", [True, False])
def test_alike_modules_are_never_merged_over_a_written_constant(
    writes: bool,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    model = tmp_path / "blocks.pt"
    torch.jit.save(torch.jit.script(_Blocks(writes).eval()), str(model))
    monkeypatch.setenv("COLUMNS", "200")
    out = _run(["explain", str(model)], capsys)
    titles = [line for line in out.splitlines() if line.startswith("blocks.")]
    if writes:
        assert [t.split()[0] for t in titles] == ["blocks.0", "blocks.1", "blocks.2"]
        assert not any("alike" in t for t in titles)  # no table of alike modules
        block = out[out.index("warning:") :]
        assert block.startswith("warning: 3 folded attributes are still written")
        for i in range(3):
            assert f"blocks.{i}.totals" in block
    else:  # the same modules without the write print once: the grouping is on
        assert [t.split()[0] for t in titles] == ["blocks.0-2"] and "(3 alike)" in out
        assert "warning:" not in out
