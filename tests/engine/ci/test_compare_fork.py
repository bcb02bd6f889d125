"""``compare``'s forked helper: the new model's facts made by a child, or by the parent."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest
from models.versions import save_version
from repo_paths import TESTS

from freezeview.engine.ci import compare_fork, model_facts
from freezeview.engine.ci.compare import compare, render_markdown, render_text
from freezeview.engine.ci.model_facts import FreezeFacts
from freezeview.engine.freeze.pipeline import Plan
from freezeview.engine.load.loading import LoadedModel, load_model
from freezeview.engine.plumbing.errors import PlanError
from freezeview.engine.plumbing.forked import can_fork

needs_fork = pytest.mark.skipif(not can_fork(), reason="forks only on Linux with 2+ CPUs")

FORKED = "#made-by-the-child"


@pytest.fixture(scope="module")
def paths(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("fork-versions")
    names = ["base", "in-place", "broken-conv-bn", "interface"]
    return {name: save_version(name, folder / f"{name}.pt") for name in names}


def _load(paths: dict[str, Path], *names: str) -> list[LoadedModel]:
    return [load_model(paths[name]) for name in names]


def _tagging(parent: int) -> Any:
    """A gatherer that marks the facts a forked child made (the parent's are unmarked)."""

    def gather(*args: Any, **kwargs: Any) -> FreezeFacts:
        facts = model_facts.gather_facts(*args, **kwargs)
        return replace(facts, model=facts.model + FORKED) if os.getpid() != parent else facts

    return gather


def _essence(facts: FreezeFacts) -> tuple[Any, ...]:
    """What compare shows of one model's facts (timings left out)."""
    verdicts = [
        (v.path, v.kind, v.type, v.status, v.reasons, v.info) for v in facts.explanation.attributes
    ]
    return (
        facts.model.removesuffix(FORKED),
        verdicts,
        facts.explanation.inventory,
        facts.explanation.preserved_attrs,
        facts.explanation.methods,
        facts.kept_bytes,
        facts.kept_tensors,
        facts.passes_fired,
        facts.node_kinds,
        facts.numerics,
        facts.plan,
    )


@needs_fork
def test_the_child_makes_the_new_models_facts_as_the_parent_would(
    paths: dict[str, Path],
) -> None:
    old, new = _load(paths, "base", "in-place")
    plan = Plan.default()
    gather = _tagging(os.getpid())
    forked = compare_fork.gather_pair(old, new, plan, fork=True, gather=gather)
    alone = compare_fork.gather_pair(old, new, plan, fork=False, gather=gather)
    assert forked[1].model.endswith(FORKED), "the new model's facts came from the child"
    assert not forked[0].model.endswith(FORKED) and not alone[1].model.endswith(FORKED)
    assert [_essence(f) for f in forked] == [_essence(f) for f in alone]
    # The parent's own model goes back in, for the reasons compare may ask for later.
    assert forked[1].loaded is new and forked[0].loaded is old
    assert forked[1].outcome is not None and forked[1].outcome.frozen is None
    with_reasons = forked[1].with_reasons()
    assert with_reasons.has_reasons
    assert with_reasons.explanation.by_path("cache").reasons[0].code == "in-place-write"


@needs_fork
@pytest.mark.parametrize("death", ["exit", "kill", "error"])
def test_a_child_that_dies_leaves_the_work_to_the_parent(
    paths: dict[str, Path], death: str
) -> None:
    old, new = _load(paths, "base", "in-place")
    plan = Plan.default()
    parent = os.getpid()

    def gather(*args: Any, **kwargs: Any) -> FreezeFacts:
        if os.getpid() != parent:
            if death == "exit":
                os._exit(3)
            if death == "kill":
                os.kill(os.getpid(), signal.SIGKILL)
            raise RuntimeError("the child fails")
        return model_facts.gather_facts(*args, **kwargs)

    survived = compare_fork.gather_pair(old, new, plan, fork=True, gather=gather)
    alone = compare_fork.gather_pair(old, new, plan, fork=False)
    assert [_essence(f) for f in survived] == [_essence(f) for f in alone]


@needs_fork
def test_torch_refusing_the_new_model_is_said_by_the_parent(paths: dict[str, Path]) -> None:
    old, new = _load(paths, "base", "interface")
    with pytest.raises(PlanError) as alone:
        compare_fork.gather_pair(old, new, Plan.default(), fork=False)
    with pytest.raises(PlanError) as forked:
        compare_fork.gather_pair(old, new, Plan.default(), fork=True)
    assert str(forked.value) == str(alone.value) and "SetAttr on an interface" in str(forked.value)


@needs_fork
@pytest.mark.parametrize("new", ["in-place", "broken-conv-bn", "base"])
def test_compare_forked_and_in_one_process_says_the_same(
    paths: dict[str, Path], new: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    made: list[int] = []

    class Counting(compare_fork.Forked):  # type: ignore[type-arg]
        def __exit__(self, *exc: Any) -> None:
            made.append(self.from_helper)
            super().__exit__(*exc)

    monkeypatch.setattr(compare_fork, "Forked", Counting)
    outputs = []
    for fork in (True, False):
        monkeypatch.setattr(compare_fork, "_fork_wanted", lambda inputs, fork=fork: fork)
        result = compare(str(paths["base"]), str(paths[new]))
        doc = result.to_json()
        doc.pop("seconds")
        outputs.append((json.dumps(doc), render_text(result), render_markdown(result)))
    assert made == [1, 0], "the first compare took the child's facts, the second none"
    assert outputs[0] == outputs[1]


def test_when_compare_forks(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(compare_fork, "cpu_to_spare", lambda: True)
    monkeypatch.delenv(compare_fork.FORK_VARIABLE, raising=False)
    assert compare_fork._fork_wanted(None) is None  # fork if no other thread runs
    assert compare_fork._fork_wanted([object()]) is False  # numerics under torch's threads
    monkeypatch.setenv(compare_fork.FORK_VARIABLE, "0")
    assert compare_fork._fork_wanted(None) is False
    monkeypatch.setattr(compare_fork, "cpu_to_spare", lambda: False)
    monkeypatch.delenv(compare_fork.FORK_VARIABLE)
    assert compare_fork._fork_wanted(None) is False  # a busy machine
    monkeypatch.setenv(compare_fork.FORK_VARIABLE, "1")
    assert compare_fork._fork_wanted(None) is None


def test_a_cpu_to_spare_is_read_off_the_load(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0, 1}, raising=False)
    assert compare_fork.cpu_to_spare("0.20 0.35 0.40 1/180 4242\n")
    assert not compare_fork.cpu_to_spare("0.20 0.35 0.40 2/180 4242\n"), "another task runs"
    assert not compare_fork.cpu_to_spare("1.60 0.35 0.40 1/180 4242\n"), "busy this minute"
    assert not compare_fork.cpu_to_spare("garbage")
    monkeypatch.setattr(os, "sched_getaffinity", lambda pid: {0}, raising=False)
    assert not compare_fork.cpu_to_spare("0.00 0.00 0.00 1/180 4242\n"), "one CPU"


_INTERRUPTED = """
import os, sys, time
from freezeview.engine.ci import compare_fork
from freezeview.engine.ci import model_facts
from freezeview.cli import main

parent = os.getpid()
real = model_facts.gather_facts

def gather(*args, **kwargs):
    if os.getpid() != parent or {parent_sleeps}:
        os.write(1, b"working\\n")  # one write: parent and child share the pipe
        time.sleep(60)
    return real(*args, **kwargs)

compare_fork.model_facts.gather_facts = gather
sys.exit(main(["compare", sys.argv[1], sys.argv[2]]))
"""


def _group(pgid: int) -> list[int]:
    """The processes of process group ``pgid`` (zombies left out)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        if fields[0] != "Z" and int(fields[2]) == pgid:
            found.append(int(entry.name))
    return found


@needs_fork
@pytest.mark.parametrize(
    "parent_sleeps",
    [pytest.param(False, id="waiting"), pytest.param(True, marks=pytest.mark.slow, id="working")],
)
def test_ctrl_c_leaves_no_process_and_no_file(
    paths: dict[str, Path], tmp_path: Path, parent_sleeps: bool
) -> None:
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    env = {**os.environ, "FREEZEVIEW_COMPARE_FORK": "1", "TMPDIR": str(scratch)}
    env["PYTHONPATH"] = os.pathsep.join([str(TESTS), *filter(None, [env.get("PYTHONPATH")])])
    script = textwrap.dedent(_INTERRUPTED).replace("{parent_sleeps}", str(parent_sleeps))
    proc = subprocess.Popen(
        [sys.executable, "-c", script, str(paths["base"]), str(paths["in-place"])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        start_new_session=True,
    )
    try:
        # Wait for the child to be forked and at work (and the parent too, if it sleeps).
        assert proc.stdout is not None
        for _ in range(2 if parent_sleeps else 1):
            assert proc.stdout.readline() == "working\n"
        assert len(_group(proc.pid)) == 2, "the parent and its forked child"
        time.sleep(0.2)
        os.killpg(proc.pid, signal.SIGINT)  # as a terminal sends Ctrl-C
        code = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    assert code == 130, proc.stderr.read() if proc.stderr else ""
    deadline = time.monotonic() + 5
    while _group(proc.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert _group(proc.pid) == [], "no process of the command is left"
    assert list(scratch.iterdir()) == [], "no file is left"
