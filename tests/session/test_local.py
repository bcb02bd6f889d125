"""The app's engine door (``freezeview/session/local.py``): what a re-run leaves behind."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from freezeview.session import SessionOptions
from freezeview.session.explain_turns import reasons_pending
from freezeview.session.local import Session
from freezeview.session.summaries_wire import SummariesDecoder


def _use_counts(session: Session) -> dict[str, int]:
    """How many owners each parameter's storage has: its slot, the tensor read here and
    whatever else still holds it (a constant of a frozen graph, say), once the last run's
    step pictures are let go as the next run lets go of them (a picture whose counts
    were known from an earlier run is still a torch graph, its constants the weights)."""
    session._step_graphs.clear()
    return {
        name: torch._C._storage_Use_Count(p.untyped_storage()._cdata)
        for name, p in session.module.named_parameters()
    }


def test_reruns_leave_no_frozen_graph_behind(small_pt: Path) -> None:
    """Each run freezes the same loaded model again; torch keeps a frozen clone's graphs
    (and the constants folded into them) in the loaded model's compilation unit, so
    without releasing them every re-run would hold on to one more copy of the model."""
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    before = _use_counts(session)
    for preserved in ([], ["scale"], [], ["head"]):
        session.explain(preserved)
        steps = list(session.run_steps(preserved, passes))
        assert steps and not any(s.error for s in steps)
    assert session.final_code  # the last run's code was read before its module went
    assert _use_counts(session) == before


def test_a_cancelled_run_releases_its_clone_too(small_pt: Path) -> None:
    """A run the user stops half-way (its generator closed) frees what it froze."""
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    before = _use_counts(session)
    run = session.run_steps([], passes)
    for _, _step in zip(range(3), run, strict=False):
        pass
    run.close()
    assert _use_counts(session) == before
    # The loaded model itself is untouched: it still runs, and freezes again.
    x = torch.randn(1, 3, 8, 8)
    assert session.module(x).shape == (1, 4)
    assert list(session.run_steps([], passes))


def test_a_rerun_drops_what_the_engine_kept_of_the_last_run(small_pt: Path) -> None:
    """The engine keeps recent diffs and prepared pictures for reuse; none of the last
    run's graphs is asked for again once a re-run replaces every step."""
    from freezeview.engine.diff import diff as diff_module
    from freezeview.engine.draw.folding import prepared

    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    # The first run's views stay alive: an id of a freed snapshot could be reused by a
    # graph of the second run, which the caches may rightly hold.
    first_views = list(session.run_steps([], passes))
    first_graphs = [session.step_graph(s.graph) for s in first_views]
    first = {id(g) for g in first_graphs}
    held = {id(entry[0]) for entry in diff_module._side_cache.values()}
    held |= {id(entry[0]) for entry in prepared._prepared_cache.values()}
    assert held & first  # the run's steps diffed its graphs
    second = list(session.run_steps([], passes))
    assert second
    held = {id(entry[0]) for entry in diff_module._side_cache.values()}
    held |= {id(entry[0]) for entry in diff_module._diff_cache.values()}
    held |= {id(entry[0]) for entry in prepared._prepared_cache.values()}
    # (A re-run's inline and fold pictures are the last run's snapshots when the
    # printouts match: those are this run's graphs too.)
    assert not held & (first - {id(session.step_graph(s.graph)) for s in second})


def test_the_engine_process_keeps_one_runs_graphs(small_pt: Path) -> None:
    """Both sides of the engine process address the current run's graphs by key, and
    only those: keeping the run before too held two runs' graphs through every re-run."""
    from freezeview.session.remote import RemoteSession

    session = RemoteSession(small_pt)
    try:
        opened = session.open()
        passes = [p.id for p in opened.passes if p.default]
        for _ in range(3):
            steps = list(session.run_steps([], passes))
            assert steps
            for step in steps:
                session.step_graph(step.graph)
            session.forget_runs()  # as the screen does at a run's start
            assert session.known_graph(steps[0].graph) is None
    finally:
        session.close()


def test_a_run_snapshots_only_the_graphs_asked_for(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A step's graph is walked into a snapshot when somebody asks for it, never for
    a step nobody looks at (at L12 the walks and their transfer were half a re-run)."""
    from freezeview.engine.freeze import lazy_graph as steps_module

    walked: list[str] = []
    snapshot_graph = steps_module.snapshot_graph

    def counting(graph, method, **kwargs):  # type: ignore[no-untyped-def]
        walked.append(method)
        return snapshot_graph(graph, method, **kwargs)

    monkeypatch.setattr(steps_module, "snapshot_graph", counting)
    # As on a big graph: a step's counts come from the printout's node kinds.
    monkeypatch.setattr(steps_module, "FULL_DIFF_LIMIT", 0)
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    steps = list(session.run_steps([], passes))
    assert steps and walked == []
    last = session.step_graph(steps[-1].graph)
    assert walked == ["forward"] and last.node_count == steps[-1].node_count
    assert session.step_graph(steps[-1].graph) is last and walked == ["forward"]


def test_a_run_diagnoses_each_quiet_step_once(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The app's timeline says why each pass that changed nothing did not fire (the note
    ``freezeview freeze`` prints): a run asks each such pass once, and no other (a
    diagnosis reads the graph again, so a step that changed the graph never asks)."""
    from freezeview.engine.freeze.passes import PassInfo

    asked: list[str] = []
    why_not = PassInfo.why_not

    def counting(self, snapshot):  # type: ignore[no-untyped-def]
        asked.append(self.id)
        return why_not(self, snapshot)

    monkeypatch.setattr(PassInfo, "why_not", counting)
    session = Session(path=small_pt)
    session.open()
    passes = [p.id for p in session.available_passes() if p.default]
    steps = list(session.run_steps([], passes))
    quiet = [s for s in steps if not s.changed and not s.error]
    assert quiet, "the small model has passes that change nothing"
    assert all((s.added, s.removed, s.changed_nodes) == (0, 0, 0) for s in quiet)
    assert all(s.notes for s in quiet)
    # Once a quiet step at most (a pass runs again in later rounds: once a round).
    assert len(asked) <= len(quiet)


def test_the_engine_process_collects_once_a_run(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine process collects its cyclic garbage once a run and gives the freed C
    heap back, after the last step went out (without it, 50 re-runs grew it by 20-35 %:
    tests/session/test_local_runs.py holds the figure)."""
    import types

    from freezeview.session import engine_process

    collected: list[str] = []
    stub = types.SimpleNamespace(
        collect=lambda *args: collected.append("collect") or 0,
        freeze=lambda: collected.append("freeze"),
    )
    monkeypatch.setattr(engine_process, "gc", stub)
    monkeypatch.setattr(
        engine_process, "give_back_freed_memory", lambda: bool(collected.append("trim"))
    )
    sent: list[tuple[object, ...]] = []
    engine = engine_process._Engine(small_pt, SessionOptions(), sent.append)
    engine.handle(1, "open", ())
    assert collected == ["freeze"]  # the loaded model: out of every later walk
    passes = [p.id for p in engine.session.open().passes if p.default]
    engine.handle(2, "run_steps", ([], passes))
    assert collected == ["freeze", "collect", "trim"]
    # The frozen module's .code is read when the screen asks (its .code view), not
    # after every run: seconds of torch's time at 70k nodes.
    assert sent[-1][0] == "done" and not any(m[0] == "final_code" for m in sent)
    engine.handle(3, "read_final_code", ())
    code = sent[-1]
    assert code[0] == "done" and "def forward" in str(code[2])
    engine.handle(4, "read_final_code", ())  # asked again: the same text
    assert sent[-1][2] == code[2]


def test_the_engine_process_sends_the_module_tree_once(small_pt: Path) -> None:
    """Every explanation (a preserved attribute toggled) gives the verdicts; the module
    tree is the model's and crosses with the first only."""
    from freezeview.session import engine_process

    sent: list[tuple[object, ...]] = []
    engine = engine_process._Engine(small_pt, SessionOptions(), sent.append)
    engine.handle(1, "open", ())
    engine.handle(2, "explain", ([],))
    engine.handle(3, "explain", (["scale"],))
    answers = [m for m in sent if m[0] in ("item", "done") and m[1] in (2, 3)]
    # Each: torch's statuses first (reasons pending), then the reasons.
    assert [(m[0], m[1]) for m in answers] == [("item", 2), ("done", 2), ("item", 3), ("done", 3)]
    decoder = SummariesDecoder()
    decoded = [decoder.decode(m[2]) for m in answers]  # type: ignore[arg-type]
    trees = [tree for _, tree in decoded]
    assert trees[0] is not None and trees[1:] == [None, None, None]
    assert all(views for views, _ in decoded)
    assert all(reasons_pending(v) for v in decoded[2][0])
    assert not any(reasons_pending(v) for v in decoded[3][0])
