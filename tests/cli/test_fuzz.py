"""Fuzzing: damaged copies of a valid model never crash, hang or traceback freezeview.

A valid TorchScript archive is built in the test (``bad_inputs.catalogue.save_tiny``);
``bad_inputs.fuzz.make_variant`` turns seeds into damaged copies — truncations, flipped
bytes inside each zip member (raw: checksums stale; rebuilt: checksums rewritten to
match, so only the interpreting code can notice), damaged headers and central
directory, members truncated, replaced with garbage, swapped or dropped.

```freezeview explain`` runs on each with a 20 s limit (and ``freezeview freeze`` on
160 more, since only freezing reaches some damage). Every run must end by itself with
exit 0, 1 or 2, say exactly one ``error:`` line on failure and print no traceback.
Most variants run through ``bad_inputs/driver.py`` (one torch import per batch); a
smaller set runs through the real console script, one process each. Crashes found are
kept as regression cases in ``tests/fuzz_regressions/regressions.json`` and replayed in
the fast set.
"""

from __future__ import annotations

import collections
import hashlib
import json
from pathlib import Path

import pytest
from bad_inputs.catalogue import save_tiny
from bad_inputs.fuzz import KINDS, make_variant, replay
from bad_inputs.run import Job, Outcome, run_batch, run_cli
from repo_paths import TESTS

N_VARIANTS = 320  # 40 per kind; the issue asks for at least 200
N_CONSOLE = 8  # 1 per kind through the real console script (the batches take 40 each)
TIME_LIMIT = 20.0
REGRESSIONS = TESTS / "fuzz_regressions" / "regressions.json"


def _write_variants(tmp: Path, seeds: range) -> dict[int, tuple[Path, str, str]]:
    valid = save_tiny(tmp / "valid.pt").read_bytes()
    files = {}
    for seed in seeds:
        variant = make_variant(valid, seed)
        path = tmp / f"variant-{seed:04d}.pt"
        path.write_bytes(variant.data)
        files[seed] = (path, variant.label, hashlib.sha256(variant.data).hexdigest())
    return files


def _report(failures: list[tuple[str, Outcome]]) -> str:
    lines = [f"{len(failures)} damaged archives were not handled cleanly:"]
    for label, outcome in failures[:20]:
        lines.append(f"- {label}: {'; '.join(outcome.problems())}")
        lines.append(f"  {outcome.describe()}")
    return "\n".join(lines)


def _check(files: dict[int, tuple[Path, str, str]], outcomes: dict[str, Outcome]) -> None:
    failures = []
    for seed, (path, label, digest) in files.items():
        outcome = outcomes[str(seed)]
        if outcome.problems():
            failures.append((label, outcome))
        assert hashlib.sha256(path.read_bytes()).hexdigest() == digest, f"{label}: input modified"
    assert not failures, _report(failures)


@pytest.mark.slow
def test_fuzz_explain_in_batches(tmp_path: Path) -> None:
    """320 damaged archives through `freezeview explain`, in-process batches."""
    files = _write_variants(tmp_path, range(N_VARIANTS))
    jobs = [
        Job(str(seed), ("explain", str(path)), timeout=TIME_LIMIT)
        for seed, (path, _label, _digest) in files.items()
    ]
    outcomes = run_batch(jobs, cwd=tmp_path)
    _check(files, outcomes)
    # The fuzzer must exercise both answers: damage torch tolerates (exit 0: flipped
    # weights in a rebuilt archive) and damage it refuses (exit 2).
    endings = collections.Counter(o.ending for o in outcomes.values())
    assert endings["exit 2"] > N_VARIANTS // 4, endings
    assert endings["ok"] > 0, endings
    (tmp_path / "endings.json").write_text(json.dumps(endings))


@pytest.mark.slow
def test_fuzz_freeze_in_batches(tmp_path: Path) -> None:
    """160 more damaged archives through `freezeview freeze`, which runs torch's freezing
    (where an archive that loads cleanly can still crash the process)."""
    files = _write_variants(tmp_path, range(20_000, 20_160))
    jobs = [
        Job(
            str(seed),
            ("freeze", str(path), "-o", str(tmp_path / f"out-{seed}.pt")),
            timeout=TIME_LIMIT,
        )
        for seed, (path, _label, _digest) in files.items()
    ]
    outcomes = run_batch(jobs, cwd=tmp_path)
    _check(files, outcomes)


@pytest.mark.slow
@pytest.mark.long_pole
def test_fuzz_explain_console_script(tmp_path: Path) -> None:
    """A smaller set, one real `freezeview explain` process each (crash signals visible)."""
    # Seeds from a different range than the batches, spread evenly over the kinds.
    seeds = range(10_000, 10_000 + N_CONSOLE)
    files = _write_variants(tmp_path, seeds)
    outcomes = {
        str(seed): run_cli(["explain", str(path)], timeout=TIME_LIMIT, cwd=tmp_path)
        for seed, (path, _label, _digest) in files.items()
    }
    _check(files, outcomes)
    assert {label.split()[2] for _p, label, _d in files.values()} == set(KINDS)


def _regressions() -> list[dict[str, object]]:
    return json.loads(REGRESSIONS.read_text())["cases"]


# explain reads the model; freeze and export also run torch's freezing, which is where
# the empty tensor records crashed the process. Each case is replayed through all three.
REGRESSION_COMMANDS = ("explain", "freeze", "export")


@pytest.fixture(scope="module")
def regression_outcomes(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Outcome]:
    """Replay every regression case through each subcommand (one batch)."""
    tmp = tmp_path_factory.mktemp("regressions")
    valid = save_tiny(tmp / "valid.pt").read_bytes()
    jobs = []
    for case in _regressions():
        path = tmp / f"{case['name']}.pt"
        path.write_bytes(replay(valid, case["replay"]).data)  # type: ignore[arg-type]
        for command in REGRESSION_COMMANDS:
            argv: tuple[str, ...] = (command, str(path))
            if command != "explain":
                argv += ("-o", str(tmp / f"{case['name']}-{command}-out"))
            jobs.append(Job(f"{case['name']}:{command}", argv, timeout=TIME_LIMIT))
    return run_batch(jobs, cwd=tmp)


@pytest.mark.parametrize("command", REGRESSION_COMMANDS)
@pytest.mark.parametrize("case", _regressions(), ids=lambda c: str(c["name"]))
def test_regression(
    case: dict[str, object], command: str, regression_outcomes: dict[str, Outcome]
) -> None:
    """Each damaged archive that once crashed or tracebacked now gets its sentence."""
    outcome = regression_outcomes[f"{case['name']}:{command}"]
    assert not outcome.problems(), outcome.describe()
    expect = case["expect"]
    assert isinstance(expect, dict)
    assert outcome.returncode == expect["exit"], outcome.describe()
    assert expect["message"] in outcome.error, outcome.describe()


def test_variants_are_deterministic_and_damaged(tmp_path: Path) -> None:
    """A seed always names the same damage, and the damage is real."""
    valid = save_tiny(tmp_path / "valid.pt").read_bytes()
    for seed in range(0, 64):
        a, b = make_variant(valid, seed), make_variant(valid, seed)
        assert a == b
        assert a.data != valid, a.label
    assert {make_variant(valid, s).kind for s in range(len(KINDS))} == set(KINDS)
