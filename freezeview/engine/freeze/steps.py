"""The stepwise pipeline's steps and the graphs they show, each computed when first read.

A :class:`Step` holds what one step of freezing did: its name, whether it changed the
graph, how long it took, the numerics, and - lazily, on first use - the snapshots of its
graphs, its counts and its notes. Graphs are kept as private copies (``LazyGraph``)
so that a picture never follows later edits of the module.
"""

from __future__ import annotations

import hashlib
import threading
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

import torch

from ..diff import notable_kind_changes
from ..graph import GraphSnapshot, demangle
from . import lazy_graph as _lazy
from .lazy_graph import LazyGraph, OnceGraphs, SnapshotMap
from .numerics import Numerics
from .plan import Plan

__all__ = ["FreezeResult", "Progress", "Step", "diffed_in_full", "forget_known_counts"]


#: What a step's lazy part computes: nodes added, removed, changed, and the notes.
StepDetails = tuple[int, int, int, tuple[str, ...]]


@dataclass(frozen=True, eq=False)
class Step:
    """One step of the pipeline, as a value.

    The graph pictures, node counts and notes -- and, for the two picture-only freeze
    steps (``inline``, ``fold_attributes``), also ``changed``, ``folded`` and ``kept``
    -- are computed on first access (and then kept): a run of a 17k-node model costs
    about what ``torch.jit.freeze`` costs, and the app or the CLI pays for the pictures
    of the steps it shows. Reading them is safe from any thread.

    Attributes:
        index: position in the pipeline (0 = inline).
        name: ``inline``, ``fold_attributes``, ``cleanup`` or a pass id.
        title: a short label for people (``conv -> batchnorm (round 2)``).
        kind: ``freeze``, ``optimize`` or ``inference``.
        changed: True if the step changed any graph.
        seconds: wall time of the step's work while the pipeline ran (for ``inline`` and
            ``fold_attributes``, whose pictures are built on demand, almost nothing).
        numerics: output difference versus the unfrozen module, or None when no sample
            inputs were given ("numerics not checked").
        error: the failure of this step (the pipeline stopped here), or None.
        round: the loop round, for loop passes.
        folded: attribute paths folded into constants (``fold_attributes`` only).
        kept: attribute paths that stayed module attributes (``fold_attributes`` only).
        snapshot: the ``forward`` graph after the step (None if there is no forward).
        snapshots: every method graph shown after the step, by method name.
        graphs: the same graphs as the step holds them (:class:`LazyGraph`: printout,
            kinds and snapshot taken on first use; the torch graph while it is held).
        node_count: nodes of the ``forward`` graph after the step (no snapshot needed).
        nodes_added, nodes_removed, nodes_changed: node counts from the diff with the
            previous step (summed over methods).
        notes: sentences for people: what changed, or why nothing did.
    """

    index: int
    name: str
    title: str
    kind: str
    _changed: bool | OnceGraphs
    seconds: float = 0.0
    numerics: Numerics | None = None
    error: str | None = None
    round: int | None = None
    # (folded, kept), or how to find them.
    _attributes: tuple[tuple[str, ...], tuple[str, ...]] | OnceGraphs = ((), ())
    # What the step shows, taken lazily: method -> graph, and (counts, notes).
    _graphs: Mapping[str, LazyGraph] = field(default_factory=dict, repr=False)
    _lazy: OnceGraphs = field(default_factory=lambda: OnceGraphs(lambda: (0, 0, 0, ())), repr=False)
    # The counts and the leading notes alone, when the notes after them cost more than
    # the rest together (the fold step's kept-attribute reasons run explain): the table
    # of ``freezeview freeze`` shows counts and the first note only.
    _head: OnceGraphs | None = field(default=None, repr=False)

    @property
    def ok(self) -> bool:
        """True unless the step failed."""
        return self.error is None

    @property
    def changed(self) -> bool:
        """True if the step changed any graph."""
        value = self._changed
        return bool(value.get() if isinstance(value, OnceGraphs) else value)

    @property
    def folded(self) -> tuple[str, ...]:
        """Attribute paths folded into constants (``fold_attributes`` only)."""
        value = self._attributes
        return (value.get() if isinstance(value, OnceGraphs) else value)[0]  # type: ignore[no-any-return]

    @property
    def kept(self) -> tuple[str, ...]:
        """Attribute paths that stayed module attributes (``fold_attributes`` only)."""
        value = self._attributes
        return (value.get() if isinstance(value, OnceGraphs) else value)[1]  # type: ignore[no-any-return]

    @property
    def graphs(self) -> Mapping[str, LazyGraph]:
        """Every method graph after the step, by method name, as the step holds it: a
        picture whose printout, node kinds and snapshot are taken when first asked for
        (and whose torch graph :func:`release_graphs` may let go). Callers must not
        change the mapping."""
        return self._graphs

    @property
    def snapshots(self) -> Mapping[str, GraphSnapshot]:
        """Every method graph after the step (each snapshotted on first access)."""
        return SnapshotMap(self._graphs)

    @property
    def snapshot(self) -> GraphSnapshot | None:
        """The ``forward`` graph after the step, or None if there is no forward."""
        graph = self._graphs.get("forward")
        return graph.snapshot() if graph is not None else None

    @property
    def forward_graph(self) -> LazyGraph | None:
        """The ``forward`` graph after the step, its snapshot taken only when asked for
        (``forward_graph.snapshot()``); None if there is no forward. Steps that left the
        graph as it was share one."""
        return self._graphs.get("forward")

    @property
    def node_count(self) -> int | None:
        """Nodes of the ``forward`` graph after the step, without taking a snapshot."""
        graph = self._graphs.get("forward")
        return graph.node_count if graph is not None else None

    def _resolved(self) -> StepDetails:
        return self._lazy.get()  # type: ignore[no-any-return]

    def _counted(self) -> StepDetails:
        """The counts (and leading notes), without the trailing notes if they are apart."""
        if self._head is None or self._lazy.done:
            return self._resolved()
        return self._head.get()  # type: ignore[no-any-return]

    @property
    def nodes_added(self) -> int:
        """Nodes added by the step (summed over methods)."""
        return self._counted()[0]

    @property
    def nodes_removed(self) -> int:
        """Nodes removed by the step (summed over methods)."""
        return self._counted()[1]

    @property
    def nodes_changed(self) -> int:
        """Nodes changed in place by the step (summed over methods)."""
        return self._counted()[2]

    @property
    def first_note(self) -> str:
        """``notes[0]`` (or ``""``), computing only what that sentence needs."""
        lead = self._counted()[3]
        if lead:
            return lead[0]
        notes = self.notes
        return notes[0] if notes else ""

    @property
    def notes(self) -> tuple[str, ...]:
        """Sentences for people: what changed, or why nothing did."""
        return self._resolved()[3]


def release_graphs(done: Step, following: Step | None = None, *, settled: bool = False) -> int:
    """Let go of the torch graphs ``done`` shows, except those ``following`` shows too.

    Every count and note of ``done`` (and of ``following``, which reads ``done``'s
    graphs as its "before") must have been read already: a picture released before its
    snapshot was needed cannot take it any more. The pipeline's working module is not
    affected.

    Args:
        done: the step whose graphs can go.
        following: the step after it (its graphs stay).
        settled: release only the pictures ``following``'s counts can do without
            (:attr:`LazyGraph.settled`): then ``following`` need not have been read
            yet, and a picture freezeview would copy from one of them (the fold step's
            from the inline step's) can take the graph over instead.

    Returns:
        How many graphs were let go.
    """
    keep = {id(graph) for graph in following.graphs.values()} if following is not None else set()
    count = 0
    for graph in done.graphs.values():
        if id(graph) not in keep and (not settled or graph.settled):
            count += graph.release()
    return count


@dataclass(frozen=True)
class Progress:
    """What the pipeline is about to do (passed to the ``progress`` callback).

    Attributes:
        index: the index the next step will get.
        name: the step's name.
        title: its label.
        phase: ``freeze``, ``optimize`` or ``inference``.
    """

    index: int
    name: str
    title: str
    phase: str


ProgressCallback = Callable[[Progress], None]


@dataclass(frozen=True)
class FreezeResult:
    """What :func:`freeze` returns.

    Attributes:
        steps: every step, in order.
        module: the frozen (and optimized) module; None if a step failed.
        plan: the plan that was run.
    """

    steps: tuple[Step, ...]
    module: torch.jit.ScriptModule | None
    plan: Plan

    @property
    def final(self) -> Step | None:
        """The last step."""
        return self.steps[-1] if self.steps else None


#: Counts of recent full diffs, by the digests of both printouts (type mangling aside).
#: A re-run of the same plan, or a preserved attribute toggled back, shows the same
#: pass steps again: their counts need neither snapshots nor a diff then. Small: a
#: digest pair and four values each.
_RECENT_COUNTS: OrderedDict[tuple[bytes, bytes], tuple[int, int, int, str]] = OrderedDict()
_RECENT_COUNTS_SIZE = 256
_recent_lock = threading.Lock()


def forget_known_counts() -> None:
    """Drop the counts of the pairs diffed so far (each test starts without them)."""
    with _recent_lock:
        _RECENT_COUNTS.clear()


def _printout_digest(graph: LazyGraph) -> bytes:
    return hashlib.blake2b(_ir_key(graph.text).encode(), digest_size=16).digest()


def diffed_in_full(graph: LazyGraph) -> bool:
    """True if ``graph`` is small enough for a step's counts to diff its snapshot in full
    (:data:`~.lazy_graph.FULL_DIFF_LIMIT` nodes); larger graphs are counted by node kind,
    and their snapshot is taken only when somebody asks for it."""
    # Read at each call: tests lower the limit to reach the full diff on small graphs.
    return graph.node_count <= _lazy.FULL_DIFF_LIMIT


def _graph_counts(before: LazyGraph | None, after: LazyGraph) -> tuple[int, int, int, str]:
    """Added, removed, changed node counts and a one-line summary."""
    if before is None:
        count = after.node_count
        return count, 0, 0, f"+{count} added"
    if diffed_in_full(before) and diffed_in_full(after):
        from ..diff import diff_snapshots

        # Equal printouts are equal graphs, and the diff matches nodes by what they
        # print: the counts of a pair diffed before stand.
        key = (_printout_digest(before), _printout_digest(after))
        with _recent_lock:
            known = _RECENT_COUNTS.get(key)
            if known is not None:
                _RECENT_COUNTS.move_to_end(key)
                return known
        d = diff_snapshots(before.snapshot(), after.snapshot())
        c = d.counts()
        counts = (c["added"], c["removed"], c["changed"], d.summary())
        with _recent_lock:
            _RECENT_COUNTS[key] = counts
            while len(_RECENT_COUNTS) > _RECENT_COUNTS_SIZE:
                _RECENT_COUNTS.popitem(last=False)
        return counts
    delta = after.kinds()
    delta.subtract(before.kinds())
    added = sum(n for n in delta.values() if n > 0)
    removed = -sum(n for n in delta.values() if n < 0)
    notable = notable_kind_changes(delta)
    text = f"+{added} added, -{removed} removed by node kind"
    return added, removed, 0, f"{text} ({', '.join(notable)})" if notable else text


def kind_counts(
    before: Mapping[str, LazyGraph], after: Mapping[str, LazyGraph]
) -> tuple[int, int, int, list[str]]:
    """Node counts summed over methods, and one summary note per changed method."""
    added = removed = changed = 0
    notes = []
    for method, graph in after.items():
        prev = before.get(method)
        if prev is graph:
            continue
        # Different kinds are different printouts: the printouts are compared (and the
        # fold step's picture printed) only when the kinds say nothing.
        if prev is not None and prev.kinds() == graph.kinds() and same_ir(prev.text, graph.text):
            continue
        a, r, c, summary = _graph_counts(prev, graph)
        added, removed, changed = added + a, removed + r, changed + c
        notes.append(summary if method == "forward" else f"{method}: {summary}")
    return added, removed, changed, notes


def step_details(
    compute: Callable[[], StepDetails],
    fallback: Sequence[str] | Callable[[], Sequence[str]] = (),
) -> OnceGraphs:
    """A step's lazy counts and notes; a failure becomes a note, never an exception.

    They are computed when someone first reads them (the app's worker, the CLI's table),
    long after the step ran: an error there must not break the reader. ``fallback`` (the
    step's own notes, or how to word them) leads the note that says so.
    """

    def run() -> StepDetails:
        try:
            return compute()
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            try:
                lead = tuple(fallback() if callable(fallback) else fallback)
            except Exception:
                lead = ()
            return 0, 0, 0, (*lead, f"could not count this step's changes: {first}")

    return OnceGraphs(run)


def _ready(notes: Sequence[str] = (), counts: tuple[int, int, int] = (0, 0, 0)) -> OnceGraphs:
    """Details known already (a failed step)."""
    value: StepDetails = (*counts, tuple(notes))
    return OnceGraphs(lambda: value)


def _ir_key(text: str) -> str:
    """IR text without torch's per-clone type mangling.

    Each freeze clones the module's class type under a new mangled name, so the same
    graph frozen twice (a rerun) prints ``___torch_mangle_4`` once and ``_7`` the next
    time; whether a step changed anything is judged without that.
    """
    return demangle(text)


def same_ir(a: str, b: str) -> bool:
    """Equal printouts, type mangling aside (the plain comparison settles most cases)."""
    return a == b or _ir_key(a) == _ir_key(b)
