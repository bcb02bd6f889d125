"""freezeview migrate: torch's converter's verdict, checked against torch run by the test.

Each case converts a model with torch's converter here as well, runs the TorchScript
module and the program itself, and holds migrate's verdict, lost writes and failures
against what it saw. The converter crashing or hanging is simulated by replacing the
child process's command.
"""

from __future__ import annotations

import copy
import html
import json
import re
import shutil
import sys
import warnings
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.migrate import (
    BEHAVES_THE_SAME,
    DIFFERS,
    DOES_NOT_CONVERT,
    Migration,
    migrate,
)
from freezeview.engine.migrate import migration as migration_module
from freezeview.engine.plumbing import BadInputError

EXAMPLE = ROOT / "examples" / "example.pt"
SCHEMA = json.loads((ROOT / "docs" / "schemas" / "migrate.schema.json").read_text())


def _converter() -> Any:
    """torch's converter, imported by the tests that run it: importing it costs torch's
    export and dynamo machinery, which collecting the suite should not pay in every
    worker (what the import does to torch.jit's builtins: tests/conftest.py)."""
    return pytest.importorskip("torch._export.converter")


def _convert(module: Any, inputs: tuple[Any, ...]) -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return _converter().TS2EPConverter(module, inputs).convert()


def _torchs_program(module: Any, inputs: tuple[Any, ...], verdict: str) -> Any:
    """torch's own conversion of ``module``, which the test compares freezeview with.

    Where this release's converter fails on the model (torch 2.4's cannot parse some
    operator schemas), freezeview must say it does not convert, and what the test checks
    of a program has nothing to check: it says so and stops.
    """
    try:
        return _convert(module, inputs)
    except Exception as exc:
        assert verdict == DOES_NOT_CONVERT, (verdict, exc)
        pytest.skip(f"torch {torch.__version__}'s converter does not convert it; freezeview agrees")


def _attribute(module: Any, path: str) -> Any:
    for part in path.split("."):
        module = getattr(module, part)
    return module


def _program_attribute(program: Any, path: str) -> Any:
    try:
        return program.get_buffer(path)
    except AttributeError:
        return None


def _same(a: Any, b: Any) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and bool(torch.equal(a, b))
    return not isinstance(b, torch.Tensor) and b is not None and a == b


def _save(module: nn.Module, folder: Path, name: str) -> Path:
    path = folder / f"{name}.pt"
    torch.jit.save(torch.jit.script(module.eval()), str(path))
    return path


class Conv(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.conv(x))


class Forked(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        fut = torch.jit.fork(torch.neg, x)
        return torch.jit.wait(fut) + x


@pytest.fixture(scope="module")
def example_output(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the example's migration is asked to write its ``.pt2`` (without --force)."""
    return tmp_path_factory.mktemp("migrate") / "example.pt2"


EXAMPLE_BYTES = EXAMPLE.read_bytes() if EXAMPLE.exists() else b""


@pytest.fixture(scope="module")
def example(example_output: Path) -> Migration:
    """The example's migration, its forwards timed briefly on two threads."""
    torch.manual_seed(0)
    return migrate(
        EXAMPLE, (torch.randn(1, 3, 16, 16),), output=example_output, threads=2, budget=0.05
    )


@pytest.mark.slow
def test_example_lost_writes_are_the_ones_torch_loses(example: Migration) -> None:
    x = torch.randn(1, 3, 16, 16)
    script = torch.jit.load(str(EXAMPLE))
    program = _torchs_program(script, (x,), example.verdict)
    ours = copy.deepcopy(script)
    theirs = program.module()
    lost: set[str] = set()
    with torch.no_grad():
        for _ in range(3):
            assert torch.allclose(ours(x.clone()), theirs(x.clone()))
            for write in example.writes:
                if not _same(_attribute(ours, write.path), _program_attribute(theirs, write.path)):
                    lost.add(write.path)
    declared = set(program.graph_signature.buffers_to_mutate.values())
    assert lost, "the example's forward writes state the converter does not keep"
    assert {w.path for w in example.lost_writes} == lost
    assert {w.path for w in example.writes if w.declared} == declared & {
        w.path for w in example.writes
    }
    for write in example.lost_writes:
        assert write.source and write.source_text
        assert any(write.path in d and write.source in d for d in example.differences)
    assert example.verdict == DIFFERS
    assert example.exit_code == 1
    assert example.outputs_same == (True, True, True)
    jsonschema.validate(example.to_json(), SCHEMA)


@pytest.mark.slow
def test_example_facts_are_the_program_s(example: Migration) -> None:
    script = torch.jit.load(str(EXAMPLE))
    program = _torchs_program(script, (torch.randn(1, 3, 16, 16),), example.verdict)
    buffers = set(program.graph_signature.buffers)
    expected = [n for n, _ in script.named_parameters() if n in buffers]
    assert list(example.parameters_as_buffers) == expected
    user = program.graph_signature.user_inputs[0]
    shape = next(n for n in program.graph.nodes if n.name == user).meta["val"].shape
    fixed = [d for d, size in enumerate(shape) if isinstance(size, int)]
    assert [s.split("[")[1].split("]")[0] for s in example.specialised] == [str(d) for d in fixed]


@pytest.mark.slow
def test_a_conv_model_behaves_the_same_and_its_program_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    if sys.platform.startswith("linux"):
        # The converter runs in a fork of the fresh-process server, not a new interpreter.
        def no_new_interpreter(*args: Any, **kwargs: Any) -> Any:
            raise AssertionError("the converter started a new interpreter")

        monkeypatch.setattr(migration_module.subprocess, "run", no_new_interpreter)
    torch.manual_seed(0)
    path = _save(Conv(), tmp_path, "conv")
    x = torch.randn(1, 3, 8, 8)
    torch.save(x, str(tmp_path / "x.pt"))
    out = tmp_path / "conv.pt2"
    args = ["--inputs", str(tmp_path / "x.pt"), "-o", str(out), "--json", "--time-budget", "0.05"]
    code = main(["migrate", str(path), *args])
    document = json.loads(capsys.readouterr().out)
    jsonschema.validate(document, SCHEMA)
    script = torch.jit.load(str(path))
    program = _torchs_program(script, (x,), document["verdict"])
    with torch.no_grad():
        same = torch.allclose(script(x), program.module()(x))
    assert same
    assert document["verdict"] == BEHAVES_THE_SAME and code == 0
    assert document["written"] == str(out)
    latency = document["latency"]
    assert latency["threads"] == 1 and latency["budget"] == 0.05
    assert latency["exported_program"]["candidate"]["runs"] > 0
    loaded = torch.export.load(str(out))
    with torch.no_grad():
        assert torch.allclose(loaded.module()(x), script(x))


def test_the_cli_says_bad_input_with_exit_2(tmp_path: Path) -> None:
    path = _save(Conv(), tmp_path, "conv")
    assert main(["migrate", str(path)]) == 2
    assert main(["migrate", str(path), "--input-shape", "1,3,8,8", "--calls", "0"]) == 2


@pytest.mark.slow
def test_a_node_without_a_handler_is_named_and_the_failure_points_at_it(
    tmp_path: Path,
) -> None:
    path = _save(Forked(), tmp_path, "forked")
    x = torch.randn(4)
    script = torch.jit.load(str(path))
    with pytest.raises(Exception):  # noqa: B017 - torch's own failure, whatever its type
        _convert(script, (x,))
    converter = _converter()
    cls = converter.TS2FXGraphConverter
    assert not hasattr(cls, converter.ir_name_to_func_name("prim::fork"))
    result = migrate(path, (x,), output=tmp_path / "never.pt2")
    assert result.verdict == DOES_NOT_CONVERT and result.exit_code == 1
    assert "prim::fork" in result.conversion.unhandled_kinds
    assert result.conversion.failed_node is not None
    assert result.conversion.failed_node.kind == "prim::fork"
    assert result.conversion.failed_node.source_text
    assert result.conversion.cause
    assert not (tmp_path / "never.pt2").exists()
    jsonschema.validate(result.to_json(), SCHEMA)


@pytest.mark.parametrize(
    "code",
    ["import time; time.sleep(60)", "import os; os.abort()"],
    ids=["hang", "abort"],
)
def test_a_hanging_or_crashing_converter_never_takes_freezeview_down(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, code: str
) -> None:
    path = _save(Conv(), tmp_path, "conv")
    monkeypatch.setattr(
        migration_module, "child_command", lambda request, result: [sys.executable, "-c", code]
    )
    result = migrate(path, (torch.randn(1, 3, 8, 8),), timeout=1.5)
    assert result.verdict == DOES_NOT_CONVERT
    assert result.conversion.stage == "the child process"
    assert result.conversion.cause
    jsonschema.validate(result.to_json(), SCHEMA)


def test_inputs_the_forward_rejects_are_bad_input(tmp_path: Path) -> None:
    path = _save(Conv(), tmp_path, "conv")
    with pytest.raises(BadInputError):
        migrate(path, (torch.randn(1, 5, 8, 8),))
    with pytest.raises(BadInputError):
        migrate(path, ())


@pytest.mark.slow
def test_a_scripted_transformer_encoder_fails_as_torch_does(tmp_path: Path) -> None:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(8, 2, 16)
    path = _save(nn.TransformerEncoder(layer, 1, enable_nested_tensor=False), tmp_path, "enc")
    x = torch.randn(3, 1, 8)
    script = torch.jit.load(str(path))
    try:
        _convert(script, (x,))
        converts = True
    except Exception:
        converts = False
    result = migrate(path, (x,))
    assert result.conversion.converted == converts
    if not converts:
        assert result.verdict == DOES_NOT_CONVERT
        assert result.conversion.method == "forward" and result.conversion.stage
        assert result.conversion.cause


@pytest.mark.slow
def test_force_writes_a_differing_program_saved_before_any_run(
    example: Migration, example_output: Path, tmp_path: Path
) -> None:
    assert example.verdict != BEHAVES_THE_SAME
    assert not example.written and not example_output.exists()
    _torchs_program(torch.jit.load(str(EXAMPLE)), (torch.randn(1, 3, 16, 16),), example.verdict)
    out = tmp_path / "forced.pt2"
    forced = migrate(EXAMPLE, (torch.randn(1, 3, 16, 16),), output=out, force=True, budget=0)
    assert forced.written == str(out) and forced.differences
    assert forced.speed is not None and forced.speed.program is None
    assert "--time-budget 0" in forced.speed.note
    program = torch.export.load(str(out))
    script = torch.jit.load(str(EXAMPLE))
    for path, value in program.state_dict.items():
        if path in dict(script.named_buffers()):
            assert torch.equal(value, _attribute(script, path)), path


@pytest.mark.slow
def test_the_program_is_timed_against_the_frozen_torchscript(example: Migration) -> None:
    """Is it as fast? The pair is timed with the threads asked for, under the mode torch
    runs each forward in, and the input file is what it was."""
    x = torch.randn(1, 3, 16, 16)
    script = torch.jit.load(str(EXAMPLE))
    program = _torchs_program(script, (x,), example.verdict).module()
    try:
        with torch.inference_mode():
            program(x)
        mode = "inference_mode"
    except Exception:
        mode = "no_grad"
    speed = example.speed
    assert speed is not None and speed.program is not None, speed
    pair = speed.program
    assert speed.threads == 2 and speed.budget == 0.05 and not speed.note
    assert pair.frozen.threads == 2 and pair.other.threads == 2
    assert pair.other.mode == mode
    assert pair.frozen.runs > 0 and pair.other.runs > 0 and pair.frozen.warmup > 0
    assert pair.change.ratio == pytest.approx(pair.other.median / pair.frozen.median)
    document = example.to_json()["latency"]
    assert document["exported_program"]["verdict"] == pair.text()
    assert document["exported_program"]["candidate"]["median"] == pair.other.median
    assert EXAMPLE.read_bytes() == EXAMPLE_BYTES


@pytest.mark.slow
def test_the_review_page_shows_the_migration_torch_s_program_makes(
    example: Migration, tmp_path: Path
) -> None:
    """The review page's section names exactly the writes the example's migration loses
    (held against torch's own program by the test above), at their lines, and opens in
    Chromium from its one summary line."""
    from freezeview.engine.output.export import export
    from freezeview.engine.output.migration_section import add_migration_section

    result = export(EXAMPLE, tmp_path / "out", fmt="dot")
    assert result.index is not None
    add_migration_section(result.index, example)
    page = result.index.read_text()
    section = page[page.index('id="migration"') : page.index("<!-- migration -->")]
    lost = re.findall(r'<tr class="lost" data-path="([^"]+)">', section)
    assert lost == [w.path for w in example.lost_writes] and lost
    for write in example.lost_writes:
        assert html.escape(write.source_text) in section
    for dimension in example.specialised:
        assert html.escape(dimension) in section
    assert example.speed is not None and example.speed.program is not None
    assert html.escape(example.speed.program.text()) in section
    sync_api = pytest.importorskip("playwright.sync_api")
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        pytest.skip("Debian's chromium is not installed")
    with sync_api.sync_playwright() as p:
        browser = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"], headless=True)
        try:
            tab = browser.new_page(viewport={"width": 1400, "height": 900})
            tab.goto(result.index.as_uri())
            row = tab.locator(f'#migration tr.lost[data-path="{lost[0]}"]')
            assert not row.is_visible()
            tab.click("#migration summary")
            assert row.is_visible()
            assert example.lost_writes[0].source_text in row.inner_text()
        finally:
            browser.close()
