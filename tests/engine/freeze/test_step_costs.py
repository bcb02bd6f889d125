"""What a run and its snapshots cost (issue 23): lines parsed once for all the steps,
snapshots that pickle as plain calls, and step notes computed only for who reads them."""

from __future__ import annotations

import collections
import pickle
import pickletools
from dataclasses import replace

import torch
from models.small import Branchy, Counter, scripted

from freezeview.engine.freeze.pipeline import Pipeline
from freezeview.engine.graph import snapshot_parse
from freezeview.engine.graph.snapshot import snapshot_graph
from freezeview.engine.measure import constants


def _inlined(module: torch.jit.ScriptModule) -> torch._C.Graph:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def _recorded(monkeypatch, name: str) -> list[str]:  # type: ignore[no-untyped-def]
    """The text of every call of ``snapshot_parse.<name>`` from now on (it still runs)."""
    real = getattr(snapshot_parse, name)
    calls: list[str] = []

    def recording(text: str):  # type: ignore[no-untyped-def]
        calls.append(text)
        return real(text)

    monkeypatch.setattr(snapshot_parse, name, recording)
    return calls


def test_a_graph_printed_again_is_not_parsed_again(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The steps of a run, and a re-run, print mostly the same lines: a line parsed
    lately is reused, and the snapshot is the same as a fresh parse's."""
    graph = _inlined(scripted(Branchy))
    snapshot_parse.RECENT_LINES.clear()
    fresh = snapshot_graph(graph)
    calls = _recorded(monkeypatch, "split_values")
    again = snapshot_graph(graph)
    blocks = sum(len(n.blocks) for n in again.walk())
    # The graph's and the blocks' parameters only (header lines); no node line.
    assert len(calls) <= blocks + 1 < again.node_count
    assert again == fresh
    assert [(n.scope, n.line) for n in again.walk()] == [(n.scope, n.line) for n in fresh.walk()]


def test_runs_that_parse_nothing_keep_the_lines_of_the_run_before(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Re-runs whose steps' counts are known parse no graph: the lines of the last run
    that did stay for the next toggle, which prints most of them again."""
    graph = _inlined(scripted(Branchy))
    snapshot_parse.RECENT_LINES.clear()
    snapshot_graph(graph)
    for _ in range(3):  # three runs start, none of them parses a line
        snapshot_parse.RECENT_LINES.new_generation()
    parsed = _recorded(monkeypatch, "line_parts")
    snapshot_graph(graph)
    assert parsed == []
    # Once a run parsed another graph's lines, the run after it lets these go.
    snapshot_parse.RECENT_LINES.new_generation()
    snapshot_graph(_inlined(scripted(Counter)))
    snapshot_parse.RECENT_LINES.new_generation()
    parsed.clear()
    snapshot_graph(graph)
    assert parsed
    # A big graph's lines (one the user looked at) go after two runs however idle.
    monkeypatch.setattr(snapshot_parse, "IDLE_KEEP_LIMIT", 3)
    for _ in range(2):
        snapshot_parse.RECENT_LINES.new_generation()
    parsed.clear()
    snapshot_graph(graph)
    assert parsed


def test_remembered_lines_stay_bounded(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """Two generations at most: a run starts one, and so does a full one."""
    monkeypatch.setattr(snapshot_parse, "LINE_LIMIT", 5)
    snapshot_parse.RECENT_LINES.clear()
    sizes = [snapshot_graph(_inlined(scripted(m))).node_count for m in (Branchy, Counter) * 3]
    recent = snapshot_parse.RECENT_LINES
    assert 0 < len(recent.before) + len(recent.current) <= 2 * max(sizes)


def test_snapshots_pickle_as_plain_calls() -> None:
    """Each node, value and constant pickles as its class called with its fields: no
    state object rebuilt field by field (several times slower for 50k small values)."""
    snap = snapshot_graph(_inlined(scripted(Branchy)))
    data = pickle.dumps(snap, protocol=pickle.HIGHEST_PROTOCOL)
    ops = [op.name for op, _arg, _pos in pickletools.genops(data)]
    # BUILD applies a state: only the GraphSnapshot itself may use one.
    assert ops.count("BUILD") <= 1
    copy = pickle.loads(data)
    assert copy == snap
    assert [n.id for n in copy.walk()] == list(range(snap.node_count))
    assert copy.node(3) == snap.node(3) and copy.node(3).line == snap.node(3).line


def test_the_cleanup_steps_first_note_lists_no_module_paths() -> None:
    """freeze's table shows each step's first note: the clean-up step's counts, without
    listing every path of the input module (which only its last note needs)."""
    pipe = Pipeline(scripted(Counter))
    steps = pipe.run_all()
    cleanup = next(s for s in steps if s.name == "cleanup")
    assert cleanup.first_note and "kept on the frozen module" not in cleanup.first_note
    assert pipe._paths is None
    assert any("kept on the frozen module" in n for n in cleanup.notes)
    assert pipe._paths is not None


def test_backend_check_walks_no_graph_without_a_backend_kind(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A printout with no backend marker needs no node walk; one with a marker does."""
    frozen = torch.jit.freeze(scripted(Counter))

    def no_walk(*_args):  # type: ignore[no-untyped-def]
        raise AssertionError("walked a graph without a backend kind")

    monkeypatch.setattr(constants, "_count_kinds", no_walk)
    assert constants.backend_only_nodes([frozen.graph]) == {}
    monkeypatch.undo()
    graph = torch._C.parse_ir(
        """graph(%x : Tensor):
  %y : Tensor = aten::to_mkldnn(%x)
  %z : Tensor = aten::to_dense(%y)
  return (%z)"""
    )
    assert constants.backend_only_nodes([graph]) == {"aten::to_mkldnn": 1, "aten::to_dense": 1}


def test_why_a_pass_did_not_fire_reads_a_partial_snapshot_and_says_the_same() -> None:
    """freeze's table says why each pass did not fire, naming nodes by kind, module and
    line: read off a partial snapshot (no walk of torch's nodes), in the very words the
    full snapshot gives."""
    from freezeview.engine.freeze.pass_diagnosis import SCOPED_KINDS, Reading
    from freezeview.engine.freeze.passes import REGISTRY
    from freezeview.engine.graph import SparseReading
    from freezeview.engine.graph import snapshot as snapshot_module

    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    models = [torch.jit.script(torch.nn.TransformerEncoder(layer, 2).eval()), scripted(Branchy)]
    for model in models:
        graph = torch.jit.freeze(model, optimize_numerics=False).graph
        full = snapshot_graph(graph)
        part = snapshot_module.partial_snapshot(graph, scope_kinds=SCOPED_KINDS)
        assert part.node_count == full.node_count
        assert [n.kind for n in part.walk()] == [n.kind for n in full.walk()]
        scoped = [n.scope for n in full.walk() if n.kind in SCOPED_KINDS]
        assert [n.scope for n in part.walk() if n.kind in SCOPED_KINDS] == scoped
        sparse = SparseReading(graph, full.text, SCOPED_KINDS)
        said = 0
        for info in REGISTRY.values():
            if info.diagnose is not None and info.available:
                assert info.why_not(part) == info.why_not(full), info.id
                reading = Reading(full.kinds(), lambda sparse=sparse: sparse)
                assert info.why_not(reading) == info.why_not(full), info.id
                said += " in " in info.why_not(full)
        if model is models[0]:
            assert said  # some sentence names a module scope
            # The diagnoses read a few of the encoder's nodes only.
            assert len(sparse._nodes) < full.node_count / 3
        # Each node read sparsely is the partial snapshot's (but for its blocks), and
        # the outputs of the kinds it scopes have torch's use counts.
        uses = collections.Counter(name for n in full.walk() for name in n.inputs)
        uses.update(name for n in full.walk() for b in n.blocks for name in b.outputs)
        uses.update(full.block.outputs)
        for node in part.walk():
            assert sparse.node(node.id) == replace(node, blocks=())
            if node.kind in SCOPED_KINDS:
                for out in node.output_names:
                    assert sparse.use_count(out) == uses[out], (node.line, out)


def test_freezes_table_notes_are_the_apps_notes() -> None:
    """A reader of the first notes alone (freeze's table) reads what the full snapshot
    of the same graph says (the app takes every step's snapshot first). One pipeline:
    torch's freeze of one module repeated in a process may differ by a node or two."""
    from freezeview.engine.freeze.passes import REGISTRY

    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, batch_first=True)
    model = torch.jit.script(torch.nn.TransformerEncoder(layer, 2).eval())
    checked = 0
    for step in Pipeline(model).run():
        note = step.first_note
        if note.startswith("did not fire: "):
            full = step.snapshot
            assert full is not None
            assert note == f"did not fire: {REGISTRY[step.name].why_not(full)}"
            checked += " in " in note
    assert checked


def test_passes_that_leave_one_graph_read_one_sparse_reading(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    from freezeview.engine.graph import SparseReading

    taken = []

    def counting(graph, *args, **kwargs):  # type: ignore[no-untyped-def]
        taken.append(graph)
        return SparseReading(graph, *args, **kwargs)

    monkeypatch.setattr("freezeview.engine.freeze.lazy_graph.SparseReading", counting)
    steps = list(Pipeline(scripted(Counter)).run())
    quiet = [s for s in steps if s.kind == "optimize" and not s.changed]
    assert len(quiet) > 1 and all(s.first_note.startswith("did not fire") for s in quiet)
    shown = {id(s._graphs["forward"]) for s in quiet}
    assert len(taken) == len(shown)


def test_a_pass_whose_nodes_are_absent_says_so_without_a_snapshot(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """A pass whose nodes are absent says so from the step's kind tally ("no
    aten::batch_norm node in the graph"): a graph without any node a quiet pass
    rewrites is never snapshotted for its sentence, and the sentence is the one the full
    snapshot gives."""
    from freezeview.engine.freeze.passes import REGISTRY

    taken = []
    monkeypatch.setattr(
        "freezeview.engine.freeze.lazy_graph.partial_snapshot",
        lambda *args, **kwargs: taken.append(args) or snapshot_graph(args[0]),
    )
    model = torch.jit.script(torch.nn.Sequential(torch.nn.ReLU(), torch.nn.Tanh()).eval())
    steps = list(Pipeline(model).run())
    quiet = [s for s in steps if s.kind == "optimize" and not s.changed]
    notes = [s.first_note for s in quiet]
    assert len(quiet) > 2 and all(n.startswith("did not fire: no ") for n in notes)
    assert taken == []
    for step, note in zip(quiet, notes, strict=True):
        full = step.snapshot
        assert full is not None and note == f"did not fire: {REGISTRY[step.name].why_not(full)}"
