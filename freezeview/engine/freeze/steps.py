"""The stepwise pipeline's steps and the graphs they show, each computed when first read.

A :class:`Step` holds what one step of freezing did: its name, whether it changed the
graph, how long it took, the numerics, and - lazily, on first use - the snapshots of its
graphs, its counts and its notes. Graphs are kept as private copies (``LazyGraph``)
so that a picture never follows later edits of the module.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..diff import notable_kind_changes
from ..graph import GraphSnapshot, SparseReading, demangle, partial_snapshot, snapshot_graph
from .numerics import Numerics
from .plan import Plan

__all__ = ["FULL_DIFF_LIMIT", "FreezeResult", "Progress", "SnapshotMap", "Step"]


class OnceGraphs:
    """A value computed on first use, exactly once, even when threads ask together.

    The app reads steps from a worker thread while the pipeline may still be running, so
    a lazily built snapshot or note list must never be built twice or half-seen.
    """

    __slots__ = ("_fn", "_lock", "_value")

    def __init__(self, fn: Callable[[], Any]) -> None:
        self._fn: Callable[[], Any] | None = fn
        self._lock = threading.Lock()
        self._value: Any = None

    @property
    def done(self) -> bool:
        """True once the value exists."""
        return self._fn is None

    def get(self) -> Any:
        """The value (computed now if this is the first call)."""
        if self._fn is None:
            return self._value
        with self._lock:
            fn = self._fn
            if fn is not None:
                self._value = fn()
                # Drop the closure: it holds graphs and modules the value no longer needs.
                self._fn = None
        return self._value


# One node per printed line "  %out : T = ns::kind..." (or "   = ns::kind" without
# outputs). Types may hold "=" ("strides=[4, 1]") but never " = "; continuation lines of
# multi-line constants never look like that.
_NODE_LINE_RE = re.compile(r"^ +(?:%.*? )?= ([A-Za-z_]\w*::[A-Za-z_][\w.]*)", re.MULTILINE)
# torch prints a node that owns a subgraph as "prim::fork_0" (the subgraph's label).
_SUBGRAPH_LABEL_RE = re.compile(r"^(prim::\w+?)_\d+$")


def _text_kinds(text: str) -> Counter[str]:
    """Node kinds counted from torch's IR printout, nested blocks included.

    A full :class:`GraphSnapshot` of a 17k-node inlined graph takes a second; counting
    kinds from the printout takes milliseconds and is all the by-kind step counts need.
    Subgraphs torch prints after the graph's ``return`` are not part of it (the snapshot
    does not walk them either).
    """
    end = text.find("\n  return (")
    body = text if end < 0 else text[:end]
    kinds: Counter[str] = Counter(_NODE_LINE_RE.findall(body))
    for kind in [k for k in kinds if _SUBGRAPH_LABEL_RE.match(k)]:
        match = _SUBGRAPH_LABEL_RE.match(kind)
        assert match is not None
        kinds[match.group(1)] += kinds.pop(kind)
    return kinds


class LazyGraph:
    """One method graph at one moment; its :class:`GraphSnapshot` is built on first use.

    It holds a torch graph nothing changes any more: a private copy, or the pipeline's
    working graph up to the moment the pipeline is about to run a pass on it -- then
    :meth:`detach` swaps in a copy -- or a function that builds the graph when it is
    first needed. Graph copies share constant tensors with the module (no storage is
    copied). Once the snapshot exists the graph is let go.
    """

    __slots__ = (
        "_build",
        "_count",
        "_earlier",
        "_graph",
        "_kinds",
        "_live",
        "_lock",
        "_partial",
        "_released",
        "_snapshot",
        "_text",
        "method",
    )

    def __init__(
        self,
        method: str,
        graph: torch._C.Graph | None = None,
        *,
        build: Callable[[], torch._C.Graph] | None = None,
        live: bool = False,
        text: str | None = None,
        count: Callable[[], Counter[str] | None] | None = None,
    ) -> None:
        if (graph is None) == (build is None):
            raise ValueError("a lazy graph needs exactly one of graph and build")
        # The kinds of a graph not built yet, if they can be told without building it
        # (None from it: build and count).
        self._count = count
        self.method = method
        self._graph = graph
        self._build = build
        self._live = live
        self._text = text
        self._snapshot: GraphSnapshot | None = None
        self._kinds: Counter[str] | None = None
        self._released = False
        self._partial: tuple[frozenset[str], GraphSnapshot | SparseReading] | None = None
        self._earlier: GraphSnapshot | None = None
        # Re-entrant: text and kinds call each other while holding it.
        self._lock = threading.RLock()

    @property
    def built(self) -> bool:
        """True once the snapshot has been taken."""
        return self._snapshot is not None

    def graph(self) -> torch._C.Graph | None:
        """The torch graph (built now if needed); None once the snapshot has replaced it.

        Callers must not change it.
        """
        with self._lock:
            if self._graph is None and self._build is not None:
                self._graph = self._build()
                self._build = None
            return self._graph

    def detach(self) -> None:
        """Keep a private copy before the pipeline changes the graph this one shows.

        The printout is taken first: a copy renumbers unnamed values, and the picture
        must show the names the working graph had (the ones torch's result prints).
        """
        with self._lock:
            if self._live and self._graph is not None:
                if self._text is None:
                    self._text = str(self._graph)
                self._graph = self._graph.copy()
            self._live = False

    def hold(self) -> bool:
        """Keep showing the working graph through a pass, without a private copy, when
        the counts against this picture need no graph (:attr:`settled`).

        For a reader of each step once, in order (the CLI): the printout is taken now;
        the pass that follows either leaves the graph as it is (this picture still shows
        it) or changes it, and then the caller releases this picture (:meth:`release`).

        Returns:
            True if held (else :meth:`detach` it).
        """
        with self._lock:
            if not (self._live and self._graph is not None and self.settled):
                return False
            if self._text is None:
                self._text = str(self._graph)
            return True

    @property
    def text(self) -> str:
        """torch's IR printout of the graph."""
        with self._lock:
            if self._text is None:
                graph = self.graph()
                if graph is None:
                    raise RuntimeError(f"the picture of {self.method} was released")
                self._text = str(graph)
            return self._text

    def known_kinds(self) -> Counter[str] | None:
        """The node kinds if they are known without printing or walking anything."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot.kinds()
            return Counter(self._kinds) if self._kinds is not None else None

    def set_kinds(self, kinds: Counter[str]) -> None:
        """Tell the node kinds (nested blocks included) of a graph built for this picture,
        counted while it was made: :meth:`kinds` then needs no printout."""
        with self._lock:
            if self._snapshot is None and self._kinds is None:
                self._kinds = Counter(kinds)

    def kinds(self) -> Counter[str]:
        """How many nodes of each kind (from the snapshot if taken, else the printout)."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot.kinds()
            if self._kinds is None and self._text is None and self._build is not None:
                told = self._count() if self._count is not None else None
                self._count = None
                if told is not None:
                    self._kinds = Counter(told)
                else:
                    self.graph()  # a picture may count its kinds as it is made (set_kinds)
            if self._kinds is None:
                self._kinds = _text_kinds(self.text)
            return Counter(self._kinds)

    @property
    def node_count(self) -> int:
        """Number of nodes, nested blocks included."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot.node_count
            return sum(self.kinds().values())

    @property
    def released(self) -> bool:
        """True once :meth:`release` has let the graph go."""
        return self._released

    @property
    def settled(self) -> bool:
        """True when a step's counts against this picture need no graph any more.

        The snapshot is taken, or the node kinds are counted and the picture is too large
        for a full diff (:data:`FULL_DIFF_LIMIT`: counts by kind only).
        """
        with self._lock:
            if self._snapshot is not None:
                return True
            return self._kinds is not None and sum(self._kinds.values()) > FULL_DIFF_LIMIT

    def release(self) -> bool:
        """Let the torch graph go, keeping the printout and counts taken so far.

        For a reader that is done with this picture (the CLI's table, row by row): a
        9k-node inlined graph and its folded copy are tens of MB. A snapshot not taken
        by now can no longer be taken.

        Returns:
            True if a graph (or the means to build one) was let go.
        """
        with self._lock:
            if self._graph is None and self._build is None:
                self._released = True
                return False
            if self._text is None and self._snapshot is None and self._kinds is None:
                return False  # nothing kept yet: the counts would have nothing to read
            self._graph = None
            self._build = None
            self._live = False
            self._released = True
            self._partial = None
            return True

    def reading(self, scope_kinds: frozenset[str]) -> GraphSnapshot | SparseReading:
        """The snapshot if taken, else a sparse reading of the printout (its lines parsed
        when asked for; module scopes of ``scope_kinds`` only, see
        :class:`~freezeview.engine.graph.snapshot_sparse.SparseReading`), or a partial
        snapshot where the printout does not suit one
        (:func:`~freezeview.engine.graph.snapshot.partial_snapshot`); not kept."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot
            kept = self._partial
            if kept is not None and kept[0] == scope_kinds:
                return kept[1]
            graph = self.graph()
            if graph is None:
                raise RuntimeError(f"the picture of {self.method} was released")
            # Kept while the graph is: every pass that leaves it unchanged reads it.
            found: GraphSnapshot | SparseReading
            try:
                found = SparseReading(graph, self.text, scope_kinds)
            except ValueError:
                found = partial_snapshot(
                    graph, self.method, text=self.text, scope_kinds=scope_kinds
                )
            self._partial = (scope_kinds, found)
            return found

    def offer(self, earlier: GraphSnapshot) -> None:
        """A snapshot an earlier run took of the same method of the same module, to be
        this one's if the printouts are the same (a re-run inlines the same graph again)."""
        with self._lock:
            if self._snapshot is None:
                self._earlier = earlier

    def snapshot(self) -> GraphSnapshot:
        """The snapshot (taken now if this is the first call)."""
        with self._lock:
            earlier, self._earlier = self._earlier, None
            if self._snapshot is None and earlier is not None and self.text == earlier.text:
                # The same printout of a graph made the same way from the same module:
                # the same snapshot, without walking torch's nodes again.
                self._snapshot = earlier
                self._graph = None
                self._build = None
                self._live = False
                self._kinds = None
                self._partial = None
            if self._snapshot is None:
                graph = self.graph()
                if graph is None:
                    raise RuntimeError(f"the picture of {self.method} was released")
                self._snapshot = snapshot_graph(graph, self.method, text=self._text)
                if self._text is None:
                    self._text = self._snapshot.text
                self._graph = None
                self._live = False
                self._kinds = None
                self._partial = None
            return self._snapshot


class SnapshotMap(Mapping[str, GraphSnapshot]):
    """Method name -> :class:`GraphSnapshot`, each taken on first access.

    ``step.snapshots["forward"]`` snapshots ``forward`` only; listing the methods
    (``sorted(step.snapshots)``) snapshots nothing.
    """

    __slots__ = ("_graphs",)

    def __init__(self, graphs: Mapping[str, LazyGraph]) -> None:
        self._graphs = graphs

    def __getitem__(self, method: str) -> GraphSnapshot:
        return self._graphs[method].snapshot()

    def __iter__(self) -> Iterator[str]:
        return iter(self._graphs)

    def __len__(self) -> int:
        return len(self._graphs)

    def __repr__(self) -> str:
        return f"SnapshotMap({list(self._graphs)})"


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
    keep = {id(graph) for graph in following._graphs.values()} if following is not None else set()
    count = 0
    for graph in done._graphs.values():
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


# Above this many nodes (on either side) a step's counts come from node kinds only: the
# full structural diff of two 17k-node inlined graphs costs seconds, and the app runs
# diff.py itself on the steps a user opens.
FULL_DIFF_LIMIT = 4000


def _graph_counts(before: LazyGraph | None, after: LazyGraph) -> tuple[int, int, int, str]:
    """Added, removed, changed node counts and a one-line summary."""
    if before is None:
        count = after.node_count
        return count, 0, 0, f"+{count} added"
    if max(before.node_count, after.node_count) <= FULL_DIFF_LIMIT:
        from ..diff import diff_snapshots

        d = diff_snapshots(before.snapshot(), after.snapshot())
        c = d.counts()
        return c["added"], c["removed"], c["changed"], d.summary()
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
