"""Every bad input in the catalogue, through every subcommand it concerns.

For each (input, subcommand): the run ends by itself with the exit code DESIGN.md
prescribes, says one sentence on stderr (``error: ...``) that matches the catalogue's
message and names the model file where that makes sense, prints no traceback, leaves
every guarded file byte-for-byte unchanged, leaves no output (and no temporary file)
behind, and — for hostile pickles — never creates the marker file.

Two ways to run, same checks:

* all pairs through ``bad_inputs/driver.py`` — one process per subcommand calling
  ``freezeview.cli.main`` (what the console script calls) per input, so the whole
  catalogue costs three torch imports;
* a representative set through the real console script ``.venv/bin/freezeview``: the
  hostile inputs, one input refused before torch loads the model and one after (the
  fast set runs one of them, a hostile pickle; the slow set the rest). The slow set
  adds every other stage of failure and the hostile inputs with every subcommand.

Nothing is skipped: every subcommand is in ``freezeview --help`` (a command module
that fails to import is an error of its own, see tests/cli/test_help.py) and offers
the options its cases need (asserted below).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import pytest
from bad_inputs.catalogue import CATALOGUE, BadInput, Built, by_name, save_tiny
from bad_inputs.run import Job, Outcome, command_options, run_batch, run_cli

CLI_COMMANDS = ("explain", "freeze", "export")


def _pairs() -> list[tuple[BadInput, str]]:
    return [(case, cmd) for case in CATALOGUE for cmd in case.commands if cmd in CLI_COMMANDS]


def _param(case: BadInput, command: str, *, slow: bool = False) -> object:
    marks = [pytest.mark.slow] if slow else []
    return pytest.param(case, command, id=f"{command}-{case.name}", marks=marks)


@pytest.mark.parametrize(("case", "command"), [_param(c, m) for c, m in _pairs() if c.needs])
def test_each_command_offers_the_options_its_cases_need(case: BadInput, command: str) -> None:
    """A case that passes an option runs through commands that have it (never skipped)."""
    assert set(case.needs) <= command_options(command), command_options(command)


def _digest(path: Path) -> str | None:
    try:
        return hashlib.sha256(path.read_bytes()).hexdigest()
    except OSError:
        return None


def _argv(case: BadInput, command: str, built: Built, tmp: Path) -> list[str]:
    argv = [command, str(built.model), *built.args_for(command)]
    out = built.output_for(command, tmp)
    if out is not None:
        argv += ["-o", str(out)]
    return argv


def check_answer(
    case: BadInput,
    command: str,
    built: Built,
    tmp: Path,
    outcome: Outcome,
    digests: dict[Path, str | None],
) -> None:
    """Assert everything the catalogue promises for one run."""
    where = outcome.describe()
    assert not outcome.problems(), f"{'; '.join(outcome.problems())}\n{where}"
    allowed = (case.exit_code, *case.ok_exit_codes)
    assert outcome.returncode in allowed, f"expected exit {allowed}\n{where}"
    assert case.matches(outcome.error), f"message does not match {case.message!r}\n{where}"
    if case.names_file:
        assert built.model.name in outcome.error, f"message does not name the file\n{where}"
    for path, digest in digests.items():
        assert _digest(path) == digest, f"{path} was modified or removed\n{where}"
    if built.marker is not None:
        assert not built.marker.exists(), f"the hostile pickle RAN: {built.marker}\n{where}"
    out = built.output_for(command, tmp)
    if out is not None and out not in digests and out.parent.is_dir():
        # A failed run writes nothing: no output, no temporary file next to it.
        if command == "freeze":
            assert not out.exists(), f"{out} was written by a failed run\n{where}"
        leftovers = [p.name for p in out.parent.glob(".*tmp*")]
        assert not leftovers, f"temporary files left behind: {leftovers}\n{where}"


def _build(case: BadInput, command: str, tmp: Path) -> tuple[Built, dict[Path, str | None]]:
    built = case.build(tmp)
    return built, {p: _digest(p) for p in built.guarded}


# --------------------------------------------------------------------------- in-process


@pytest.fixture(scope="module")
def batch(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple]:
    """Build every (input, subcommand) and run each subcommand's inputs in one process."""
    results: dict[str, tuple] = {}
    jobs: list[Job] = []
    prepared = {}
    for case, command in _pairs():
        tmp = tmp_path_factory.mktemp(f"{command}-{case.name}")
        built, digests = _build(case, command, tmp)
        key = f"{command}:{case.name}"
        prepared[key] = (built, digests, tmp)
        jobs.append(Job(key, tuple(_argv(case, command, built, tmp)), built.env, timeout=60))
    outcomes = run_batch(jobs)
    for key, (built, digests, tmp) in prepared.items():
        results[key] = (built, digests, tmp, outcomes[key])
    return results


@pytest.mark.parametrize(("case", "command"), [_param(c, m) for c, m in _pairs()])
def test_bad_input_in_process(case: BadInput, command: str, batch: dict[str, tuple]) -> None:
    built, digests, tmp, outcome = batch[f"{command}:{case.name}"]
    check_answer(case, command, built, tmp, outcome, digests)


# --------------------------------------------------------------------------- console script

# Through the real script: every hostile input (nothing may ever run them), one input
# refused before torch loads the model and one after; the fast set runs the hostile
# pickle (about a second: the script's torch import and the refusal), the slow set the
# others. The slow set also runs the other stages of failure through the script, and
# the hostile inputs with every other subcommand (the in-process batch runs every pair
# in the fast set).
_FAST_SCRIPT = {("hostile-pickle", "explain")}
_HOSTILE_EVERY_COMMAND = {
    (name, cmd) for name in ("hostile-pickle", "hostile-torchscript") for cmd in CLI_COMMANDS
}
_REPRESENTATIVE = {
    ("hostile-pickle", "explain"),
    ("hostile-torchscript", "explain"),
    ("hostile-torch-save", "explain"),
    ("missing-path", "explain"),
    ("training-mode", "freeze"),
}
_STAGES_SLOW = {
    ("unknown-preserve", "explain"),
    ("malformed-input-shape", "freeze"),
    ("output-exists", "export"),
    ("dot-missing", "export"),
}


def _script_params(slow: bool) -> list[object]:
    """Console-script runs: the representative pairs (fast set), and — in the slow set —
    the other stages of failure with their own subcommand and the hostile inputs with
    their other subcommands. Every other input runs through ``freezeview.cli.main``, what
    the script calls, in the in-process batch (every pair, same checks): a script run
    each would import torch thirty times more to prove the same."""
    params = []
    for case in CATALOGUE:
        commands = [c for c in case.commands if c in CLI_COMMANDS]
        if not commands:
            continue
        if not slow:
            params += [
                _param(case, c, slow=(case.name, c) not in _FAST_SCRIPT)
                for c in commands
                if (case.name, c) in _REPRESENTATIVE
            ]
            continue
        if any((case.name, c) in _STAGES_SLOW for c in commands):
            chosen = [c for c in commands if (case.name, c) in _STAGES_SLOW]
        elif any((case.name, c) in _REPRESENTATIVE for c in commands):
            chosen = [
                c
                for c in commands
                if (case.name, c) in _HOSTILE_EVERY_COMMAND
                and (case.name, c) not in _REPRESENTATIVE
            ]
        else:
            chosen = []
        params += [_param(case, command, slow=True) for command in chosen]
    return params


def _run_script(case: BadInput, command: str, tmp: Path) -> None:
    built, digests = _build(case, command, tmp)
    outcome = run_cli(_argv(case, command, built, tmp), env=built.env, timeout=120)
    check_answer(case, command, built, tmp, outcome, digests)


@pytest.mark.parametrize(("case", "command"), _script_params(slow=False))
def test_bad_input_console_script(case: BadInput, command: str, tmp_path: Path) -> None:
    _run_script(case, command, tmp_path)


@pytest.mark.parametrize(("case", "command"), _script_params(slow=True))
def test_bad_input_console_script_all(case: BadInput, command: str, tmp_path: Path) -> None:
    _run_script(case, command, tmp_path)


# --------------------------------------------------------------------------- specifics


@pytest.mark.slow
def test_debug_shows_the_traceback(tmp_path: Path) -> None:
    """--debug is the one way to see a traceback, for a bug report."""
    case = by_name("truncated")
    built = case.build(tmp_path)
    outcome = run_cli(["explain", str(built.model), "--debug"], timeout=120)
    assert outcome.returncode == 2, outcome.describe()
    assert outcome.has_traceback, outcome.describe()
    assert case.matches(outcome.error_lines[-1]), outcome.describe()


def test_preserving_an_exported_method_is_fine(tmp_path: Path) -> None:
    """``--preserve describe`` names a compiled method: torch keeps it, so must we."""
    import torch

    model = save_tiny(tmp_path / "model.pt")
    out = tmp_path / "frozen.pt"
    from freezeview.cli import main

    assert main(["freeze", str(model), "--preserve", "describe", "-o", str(out)]) == 0
    theirs = torch.jit.freeze(torch.jit.load(str(model)).eval(), preserved_attrs=["describe"])
    ours = torch.jit.load(str(out))
    assert hasattr(theirs, "describe")
    assert ours.describe() == theirs.describe()


@pytest.mark.parametrize("command", ["freeze", "export"])
def test_a_pass_that_raises_is_reported_on_its_step(
    command: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 6, item 2: a failing pass names its step, and nothing is written."""
    import dataclasses

    from freezeview.cli import main
    from freezeview.engine.freeze import passes

    def explode(*args: object, **kwargs: object) -> bool:
        raise RuntimeError("injected failure in conv -> batchnorm folding")

    broken = dataclasses.replace(passes.REGISTRY["fold_conv_bn"], apply=explode)
    monkeypatch.setitem(passes.REGISTRY, "fold_conv_bn", broken)
    model = save_tiny(tmp_path / "model.pt")
    model_digest = _digest(model)
    out = tmp_path / ("frozen.pt" if command == "freeze" else "export-out")
    if command == "freeze":
        out.write_bytes(b"previous frozen model")
    previous = _digest(out) if out.is_file() else None
    code = main([command, str(model), "-o", str(out), "--force"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 1, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert "fold_conv_bn" in lines[0] or "conv -> batchnorm" in lines[0], err
    assert "injected failure" in lines[0], err
    assert "Traceback" not in err
    assert _digest(model) == model_digest
    if command == "freeze":
        assert _digest(out) == previous  # the previous frozen model is untouched
    else:  # no picture of a frozen graph that was never finished
        assert not out.exists() or not list(out.glob("after.*"))
    assert not list(tmp_path.rglob("*freezeview-tmp*"))


def test_a_frozen_model_torch_cannot_write_is_one_sentence(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """torch.jit.save failing (its C++ writer on a full disk says RuntimeError) names the
    output and says nothing was written; exit 2, the previous file untouched."""
    import torch

    from freezeview.cli import main

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("\nPytorchStreamWriter failed writing file data/0: file write failed")

    model = save_tiny(tmp_path / "model.pt")
    out = tmp_path / "frozen.pt"
    out.write_bytes(b"previous frozen model")
    previous = _digest(out)
    monkeypatch.setattr(torch.jit, "save", broken)
    code = main(["freeze", str(model), "-o", str(out), "--force"])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert code == 2, err
    assert len(lines) == 1 and lines[0].startswith("error:"), err
    assert str(out) in lines[0] and "nothing was written" in lines[0], err
    assert "Traceback" not in err
    assert _digest(out) == previous
    assert not list(tmp_path.rglob("*freezeview-tmp*"))
