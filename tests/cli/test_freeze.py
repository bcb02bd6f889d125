"""``freezeview freeze`` and ``freezeview passes`` end to end (in-process, plus one fresh
Python process that loads the written model without freezeview)."""

from __future__ import annotations

import gc
import json
import os
import subprocess
import sys
import warnings
from dataclasses import dataclass
from pathlib import Path

import pytest
import torch
from torch import nn

import freezeview.cli as cli_package
from freezeview.cli import main
from freezeview.engine.freeze.passes import REGISTRY


class Net(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.1)
        with torch.no_grad():
            self.bn.running_var.uniform_(0.5, 1.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.drop(self.bn(self.conv(x))).relu()


@pytest.fixture()
def model(tmp_path: Path) -> Path:
    torch.manual_seed(0)
    path = tmp_path / "net.pt"
    torch.jit.save(torch.jit.script(Net().eval()), str(path))
    return path


def _torch_frozen(path: Path, **kw: bool) -> torch.jit.ScriptModule:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return torch.jit.freeze(torch.jit.load(str(path)), **kw)


def test_freeze_writes_torch_equivalent_model(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """The table is printed, OUT.pt is written, the input file is untouched."""
    before = model.read_bytes()
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out)]) == 0
    text = capsys.readouterr().out
    assert "conv -> batchnorm" in text and "wrote" in text
    assert model.read_bytes() == before
    ours = torch.jit.load(str(out))
    theirs = _torch_frozen(model)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(ours(x), theirs(x))
    assert "aten::batch_norm" not in str(ours.graph)


@pytest.mark.slow
def test_saved_model_loads_in_a_fresh_process(freeze_as_a_process: FreezeProcess) -> None:
    """Plain torch.jit.load in a process that never imports freezeview gives the same
    output (the fixture's torch-only interpreter loads and runs OUT.pt)."""
    folder = freeze_as_a_process.ours.parent.parent
    x, y = torch.load(folder / "x.pt"), torch.load(folder / "y.pt")
    model = torch.jit.load(str(folder / "net.pt")).eval()
    torch.testing.assert_close(y, torch.jit.freeze(model)(x))


def test_refuses_to_overwrite_without_force(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """An existing OUT.pt is kept unless --force; with --force it is replaced."""
    out = tmp_path / "out.pt"
    out.write_bytes(b"old")
    assert main(["freeze", str(model), "-o", str(out)]) == 2
    assert "--force" in capsys.readouterr().err
    assert out.read_bytes() == b"old"
    assert main(["freeze", str(model), "-o", str(out), "--force"]) == 0
    assert out.read_bytes() != b"old"


def test_never_overwrites_the_input(model: Path) -> None:
    """Writing onto the input model is refused even with --force."""
    before = model.read_bytes()
    assert main(["freeze", str(model), "-o", str(model), "--force"]) == 2
    assert model.read_bytes() == before


@pytest.mark.slow
def test_json_lines_and_numerics(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--json: one object per step, then the result; --input-shape adds numerics."""
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out), "--json", "--input-shape", "2,3,8,8"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    steps = [obj for obj in lines if obj["type"] == "step"]
    assert [s["name"] for s in steps[:3]] == ["inline", "fold_attributes", "cleanup"]
    assert all(s["numerics"] is not None for s in steps)
    assert lines[-1]["type"] == "result" and lines[-1]["ok"] and lines[-1]["output"] == str(out)


@pytest.mark.slow
def test_inputs_file(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--inputs FILE.pt is read with weights_only and used for numerics."""
    inputs = tmp_path / "in.pt"
    torch.save((torch.randn(1, 3, 8, 8),), inputs)
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out), "--json", "--inputs", str(inputs)]) == 0
    steps = [json.loads(x) for x in capsys.readouterr().out.splitlines()][:-1]
    assert steps[0]["numerics"]["max_abs"] == 0.0


def test_no_optimize_matches_torch(model: Path, tmp_path: Path) -> None:
    """--no-optimize equals torch.jit.freeze(optimize_numerics=False)."""
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out), "--no-optimize"]) == 0
    ours = torch.jit.load(str(out))
    assert "aten::batch_norm" in str(ours.graph)
    assert "aten::dropout" not in str(ours.graph)
    theirs = _torch_frozen(model, optimize_numerics=False)
    x = torch.randn(2, 3, 8, 8)
    torch.testing.assert_close(ours(x), theirs(x))


def test_bad_plans_exit_1_and_write_nothing(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """Unknown pass, unknown preserved name, MKLDNN result: exit 1, no file."""
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out), "--passes", "nope"]) == 1
    assert "valid passes are" in capsys.readouterr().err
    assert main(["freeze", str(model), "-o", str(out), "--preserve", "nope"]) == 1
    if torch.backends.mkldnn.is_available():
        assert main(["freeze", str(model), "-o", str(out), "--optimize-for-inference"]) == 1
        assert "MKLDNN" in capsys.readouterr().err
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.pt")]


def test_passes_option_runs_only_those(model: Path, tmp_path: Path, capsys) -> None:  # type: ignore[no-untyped-def]
    """--passes remove_dropout leaves the batch norm alone."""
    out = tmp_path / "out.pt"
    assert main(["freeze", str(model), "-o", str(out), "--passes", "remove_dropout", "--json"]) == 0
    names = [json.loads(x)["name"] for x in capsys.readouterr().out.splitlines()[:-1]]
    assert names == ["inline", "fold_attributes", "cleanup", "remove_dropout"]
    assert "aten::batch_norm" in str(torch.jit.load(str(out)).graph)


def test_training_mode_needs_eval(tmp_path: Path) -> None:
    """A model saved in training mode is refused unless --eval."""
    path = tmp_path / "train.pt"
    torch.jit.save(torch.jit.script(Net()), str(path))
    out = tmp_path / "out.pt"
    assert main(["freeze", str(path), "-o", str(out)]) == 1
    assert main(["freeze", str(path), "-o", str(out), "--eval"]) == 0


def test_passes_command(capsys) -> None:  # type: ignore[no-untyped-def]
    """`freezeview passes --json` lists the whole registry with its defaults."""
    assert main(["passes", "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert [p["id"] for p in data] == list(REGISTRY)
    by_id = {p["id"]: p for p in data}
    assert by_id["fold_conv_bn"]["default"] and not by_id["fold_conv_bn"]["exact"]
    assert by_id["convert_to_mkldnn"]["default_with_optimize_for_inference"]
    assert main(["passes"]) == 0
    assert "remove_dropout" in capsys.readouterr().out


class Counter(nn.Module):
    """forward writes ``count``: freezing keeps it, and explain says why."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.count.add_(1)
        return x + self.count


def test_table_runs_no_explain_json_does(tmp_path: Path, monkeypatch, capsys) -> None:  # type: ignore[no-untyped-def]
    """The table shows the fold step's counts and first note, which need no explain;
    ``--json`` prints every note (the kept attribute's reason), so it runs explain."""
    import freezeview.engine.freeze.pipeline as pipeline_mod

    calls: list[object] = []
    real = pipeline_mod._explain_or_none
    monkeypatch.setattr(pipeline_mod, "_explain_or_none", lambda *a: calls.append(a) or real(*a))
    # Uncut, as in a file or a log: a COLUMNS width (pytest-xdist sets 80) would wrap the
    # notes cell wherever the other columns' widths put its edge.
    monkeypatch.delenv("COLUMNS", raising=False)
    path = tmp_path / "counter.pt"
    torch.jit.save(torch.jit.script(Counter().eval()), str(path))
    assert main(["freeze", str(path), "-o", str(tmp_path / "a.pt")]) == 0
    assert "1 kept" in capsys.readouterr().out and calls == []
    assert main(["freeze", str(path), "-o", str(tmp_path / "b.pt"), "--json"]) == 0
    lines = [json.loads(line) for line in capsys.readouterr().out.splitlines()]
    fold = next(d for d in lines if d.get("name") == "fold_attributes")
    assert any(note.startswith("kept count") for note in fold["notes"]) and len(calls) == 1


def test_table_rows_taken_as_steps_arrive(model: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The table's rows are read as each step arrives, then the step before lets its
    graphs go; the rows are those of the same steps read at the end."""
    import importlib

    from freezeview.engine.freeze.pipeline import Pipeline
    from freezeview.engine.output.report import step_row

    # `freeze` imports these from their stages when it runs: patched there, they are what
    # it gets.
    freeze_stage = importlib.import_module("freezeview.engine.freeze")
    output_stage = importlib.import_module("freezeview.engine.output")
    released: list[object] = []
    tables: list[object] = []
    real_release, real_table = freeze_stage.release_graphs, output_stage.steps_table

    def release(done, following, *, settled=False):  # type: ignore[no-untyped-def]
        if not settled:
            released.append(done)
        return real_release(done, following, settled=settled)

    def table(steps, **kw):  # type: ignore[no-untyped-def]
        tables.append(kw["rows"])
        return real_table(steps, **kw)

    monkeypatch.setattr(freeze_stage, "release_graphs", release)
    monkeypatch.setattr(output_stage, "steps_table", table)
    assert main(["freeze", str(model), "-o", str(tmp_path / "out.pt")]) == 0
    (rows,) = tables
    steps = Pipeline(torch.jit.load(str(model))).run_all()
    assert len(released) == len(steps) - 1 == len(rows) - 1

    def plain(row: list[object]) -> list[str]:  # the ms column aside
        return [str(cell) for i, cell in enumerate(row) if i != 4]

    assert [plain(r) for r in rows] == [plain(step_row(s, show_numerics=False)) for s in steps]


@pytest.mark.slow
def test_freeze_imports_only_what_it_needs(model: Path, tmp_path: Path) -> None:
    """``freeze`` loads no other subcommand's machinery, never textual, and rich (with
    the console helper that sizes it) only to draw its table."""
    # One fresh interpreter: `--json` first (what it imports is all it needs), then the
    # table, whose imports are what is new after it.
    probe = (
        "import sys; from freezeview.cli import main\n"
        "def seen(): return sorted(m for m in sys.modules if m.split('.')[0] in "
        "('textual', 'rich') or m.startswith(('freezeview.cli.', 'freezeview.ui', "
        "'freezeview.engine.output.export', 'freezeview.engine.draw.pictures', "
        "'freezeview.engine.draw.folding.plan', 'freezeview.engine.draw.dot.run', "
        "'freezeview.engine.draw.dot.text', "
        "'freezeview.engine.ci.check', "
        "'freezeview.engine.ci.compare')))\n"
        "args = sys.argv[1:]\n"
        "print('probe:', main([*args, '--json']), seen())\n"
        "print('probe:', main(args), seen())\n"
    )
    base = ["freeze", str(model), "-o", str(tmp_path / "out.pt"), "--force"]
    lines = subprocess.run(
        [sys.executable, "-c", probe, *base],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONWARNINGS": "ignore"},
    ).stdout.splitlines()
    probed = [line.removeprefix("probe: ") for line in lines if line.startswith("probe: ")]
    assert len(probed) == 2, lines
    found = {}
    for table, line in zip((False, True), probed, strict=True):
        code, _, modules = line.partition(" ")
        assert code == "0", lines
        found[table] = eval(modules)  # a printed list of module names
    assert found[False] == ["freezeview.cli.freeze", "freezeview.cli.options"]
    table_only = sorted(set(found[True]) - set(found[False]))
    # The table's console, and the written-constant warning printed under it.
    for printer in ("freezeview.cli.console", "freezeview.cli.written"):
        assert printer in table_only
        table_only.remove(printer)
    assert table_only and all(m.split(".")[0] == "rich" for m in table_only)


class _FreezeRecorder:
    """Stands in for the ``gc`` module freezeview's CLI sees: counts ``gc.freeze()`` calls.

    The process-wide freeze count cannot tell who froze: an app test that ran earlier on
    the same worker can leave a thread (the IR prefetch) that freezes at any moment.
    """

    def __init__(self) -> None:
        self.freezes = 0

    def freeze(self) -> None:
        self.freezes += 1

    def __getattr__(self, name: str) -> object:
        return getattr(gc, name)


@dataclass(frozen=True)
class FreezeProcess:
    """What ``freeze_as_a_process`` saw."""

    code: int
    frozen: int
    ours: Path
    theirs: Path


@pytest.fixture(scope="module")
def freeze_as_a_process(tmp_path_factory: pytest.TempPathFactory) -> FreezeProcess:
    """``freezeview freeze`` as the console script runs it, in a fresh interpreter, and
    ``torch.jit.save(torch.jit.freeze(m), OUT.pt)`` in another: the exit code, how many
    objects the CLI's ``gc.freeze()`` moved out of the collector's way, and both folders."""
    folder = tmp_path_factory.mktemp("freeze-process")
    torch.manual_seed(0)
    model = folder / "net.pt"
    torch.jit.save(torch.jit.script(Net().eval()), str(model))
    ours = folder / "ours" / "out.pt"
    theirs = folder / "theirs" / "out.pt"
    ours.parent.mkdir()
    theirs.parent.mkdir()
    env = {**os.environ, "PYTHONWARNINGS": "ignore"}
    # main() with argv from sys.argv, as the `freezeview` script and `python -m
    # freezeview` call it; os._exit (its way out) reports the freeze count first.
    probe = (
        "import gc, os, sys; from freezeview.cli import main; real = os._exit; "
        "os._exit = lambda code: (print(code, gc.get_freeze_count()), sys.stdout.flush(), "
        "real(code)); sys.argv = ['freezeview', *sys.argv[1:]]; main()"
    )
    out = subprocess.run(
        [sys.executable, "-c", probe, "freeze", str(model), "-o", str(ours)],
        capture_output=True,
        text=True,
        check=True,
        env=env,
    ).stdout.splitlines()[-1]
    code, frozen = out.split()
    # torch alone, never freezeview: freeze and save as a user would, and load and run
    # freezeview's OUT.pt (one interpreter for both: each start imports torch, 1.5 s).
    torch.save(torch.randn(1, 3, 8, 8), folder / "x.pt")
    plain = (
        "import sys, torch; "
        "torch.jit.save(torch.jit.freeze(torch.jit.load(sys.argv[1])), sys.argv[2]); "
        "m = torch.jit.load(sys.argv[3]); x = torch.load(sys.argv[4]); "
        "torch.save(m(x), sys.argv[5]); assert 'freezeview' not in sys.modules"
    )
    plain_env = {k: v for k, v in env.items() if k != "PYTHONPATH"}
    subprocess.run(
        [
            sys.executable,
            "-c",
            plain,
            *map(str, (model, theirs, ours, folder / "x.pt", folder / "y.pt")),
        ],
        check=True,
        env=plain_env,
        cwd=folder,
        timeout=120,
    )
    return FreezeProcess(int(code), int(frozen), ours, theirs)


@pytest.mark.slow
def test_freeze_as_a_process_spares_the_collector_the_imports(
    model: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    freeze_as_a_process: FreezeProcess,
) -> None:
    """Run as the console script, ``freeze`` moves what is imported by then out of the
    collector's way (gc.freeze); called in-process (tests, the API) it leaves gc alone."""
    recorder = _FreezeRecorder()
    monkeypatch.setattr(cli_package, "gc", recorder)
    assert main(["freeze", str(model), "-o", str(tmp_path / "a.pt")]) == 0
    assert recorder.freezes == 0
    assert freeze_as_a_process.code == 0
    assert freeze_as_a_process.frozen > 100_000  # torch's objects, among others


def test_version_is_read_when_asked(capsys) -> None:  # type: ignore[no-untyped-def]
    """``--version`` prints freezeview's version (looked up only then) and exits 0."""
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.startswith("freezeview ")


@pytest.mark.slow
def test_output_bytes_are_torchs_own(freeze_as_a_process: FreezeProcess) -> None:
    """OUT.pt holds the bytes ``torch.jit.save(torch.jit.freeze(m), OUT.pt)`` writes in a
    fresh process (records named after OUT.pt, not after a temporary file)."""
    ours, theirs = freeze_as_a_process.ours, freeze_as_a_process.theirs
    assert ours.read_bytes() == theirs.read_bytes()
    assert sorted(p.name for p in ours.parent.iterdir()) == ["out.pt"]


def test_table_without_inputs_counts_no_constant_bytes(  # type: ignore[no-untyped-def]
    model: Path, tmp_path: Path, monkeypatch
) -> None:
    """The table shows constant bytes only with sample inputs: without them no step's
    constants are counted; every ``--json`` line carries them, so each changed step's
    are counted once."""
    import freezeview.engine.measure.measured_run as measured_mod
    from freezeview.engine.freeze.pipeline import Pipeline

    calls: list[object] = []
    real = measured_mod.constant_bytes
    monkeypatch.setattr(measured_mod, "constant_bytes", lambda g: calls.append(g) or real(g))
    assert main(["freeze", str(model), "-o", str(tmp_path / "a.pt")]) == 0
    assert calls == []
    assert main(["freeze", str(model), "-o", str(tmp_path / "b.pt"), "--json"]) == 0
    changed = [s for s in Pipeline(torch.jit.load(str(model))).run_all() if s.changed]
    assert len(calls) == len(changed) > 0
