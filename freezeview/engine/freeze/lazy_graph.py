"""The graphs a step shows, each read from torch only when someone first asks.

:class:`LazyGraph` holds one method graph at one moment (a private copy, the working
graph until a pass rewrites it, or a function that builds it) and gives its printout,
node kinds and :class:`~freezeview.engine.graph.snapshot.GraphSnapshot` on first use;
:class:`OnceGraphs` computes a value once, whichever thread asks first;
:class:`SnapshotMap` is a step's snapshots by method. :data:`FULL_DIFF_LIMIT` is the size
above which a step's counts come from node kinds only.
"""

from __future__ import annotations

import re
import threading
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from typing import Any

import torch

from ..graph import GraphSnapshot, SparseReading, partial_snapshot, snapshot_graph

__all__ = ["FULL_DIFF_LIMIT", "LazyGraph", "OnceGraphs", "SnapshotMap"]

# Above this many nodes (on either side) a step's counts come from node kinds only: the
# full structural diff of two large inlined graphs costs seconds, and the app runs
# diff.py itself on the steps a user opens.
FULL_DIFF_LIMIT = 4000


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

    A full :class:`GraphSnapshot` of a large inlined graph is slow (a torch call per
    node); counting kinds from the printout is far cheaper and is all the by-kind step counts need.
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
        "__weakref__",
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
            self._forget_graph()
            self._released = True
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

    def _forget_graph(self) -> None:
        # The torch graph and the means to build it let go (the caller holds the lock).
        self._graph = None
        self._build = None
        self._live = False
        self._partial = None

    def snapshot(self) -> GraphSnapshot:
        """The snapshot (taken now if this is the first call)."""
        with self._lock:
            earlier, self._earlier = self._earlier, None
            if self._snapshot is None and earlier is not None and self.text == earlier.text:
                # The same printout of a graph made the same way from the same module:
                # the same snapshot, without walking torch's nodes again.
                self._snapshot = earlier
                self._forget_graph()
                self._kinds = None
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
