"""Run ``torch.jit.freeze`` as a sequence of visible steps.

``torch.jit.freeze`` is one opaque call. freezeview runs the same work one step at a
time and keeps a picture of the graphs after each, so a user sees what every step did to
the graph and to the numbers, can choose which passes run, and still gets exactly
torch's result:

1. **freeze phase** (kind ``freeze``): *inline* (a copy of each preserved method with
   ``torch._C._jit_pass_inline`` applied), *fold attributes* (that inlined copy with
   every attribute torch folded replaced by its constant -- a picture built by
   freezeview, shown so the user sees the folding before torch tidies up) and
   *clean-up* (the real ``torch._C._freeze_module`` result: constant propagation,
   dead-code elimination, unused attributes and methods removed).
2. **optimization phase** (kind ``optimize``): every pass of the plan on the frozen
   module's graphs, in torch's order; consecutive loop passes repeat until a whole
   round reports no fold (torch's own test), each call its own step.
3. **inference phase** (kind ``inference``): the ``optimize_for_inference`` passes,
   when asked.

A run costs about what ``torch.jit.freeze`` costs: a step keeps a graph (a private
copy, or the working graph until the next pass is about to rewrite it), and its
:class:`~freezeview.engine.snapshot.GraphSnapshot`, node counts and notes (explain's
reasons for kept attributes, why a pass did not fire) are computed the first time
someone reads them, once, from any thread.

The engine knows nothing about who watches: :meth:`Pipeline.run` is an iterator of
:class:`Step` and takes a progress callback and a ``threading.Event`` to cancel.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from .errors import BadInputError, PlanError
from .loading import LoadedModel, check_eval, load_model
from .module_slots import attribute_paths
from .numerics import Numerics, StateGuard, compare_outputs, run_graph
from .passes import (
    REGISTRY,
    PassInfo,
    default_passes,
    guard_info,
    needs_guard,
)
from .snapshot import GraphSnapshot, demangle, snapshot_graph
from .torch_outcome import TorchOutcome, torch_outcome

if TYPE_CHECKING:  # verdicts imports the engine's loading too; only the type is needed here
    from .verdicts import Explanation

__all__ = [
    "FREEZE_STEPS",
    "FreezeResult",
    "Pipeline",
    "Plan",
    "Progress",
    "SnapshotMap",
    "Step",
    "freeze",
]

#: The freeze phase's step names, in order.
FREEZE_STEPS = ("inline", "fold_attributes", "cleanup")
_FREEZE_TITLES = {
    "inline": "inline calls",
    "fold_attributes": "fold attributes to constants",
    "cleanup": "clean-up (torch._C._freeze_module)",
}
# A fixed-point loop that has not settled after this many rounds is stopped (torch
# would loop forever; a note on the step says so).
_MAX_ROUNDS = 50


@dataclass(frozen=True)
class Plan:
    """What to freeze and which passes to run.

    Attributes:
        preserved_attrs: attributes, submodules and methods to keep, as in
            ``torch.jit.freeze(preserved_attrs=...)``; dotted names reach submodules.
        passes: pass ids in the order they run (see ``freezeview passes``); consecutive
            loop passes form one repeat-until-nothing-changes loop.
        optimize_numerics: False gives ``torch.jit.freeze(optimize_numerics=False)``:
            the folds that recompute weights are not allowed.
        optimize_for_inference: allow (and by default add) the
            ``torch.jit.optimize_for_inference`` passes.
        freeze_interfaces: inline module interfaces (torch's default).
    """

    preserved_attrs: tuple[str, ...] = ()
    passes: tuple[str, ...] = field(default_factory=default_passes)
    optimize_numerics: bool = True
    optimize_for_inference: bool = False
    freeze_interfaces: bool = True

    @classmethod
    def default(
        cls,
        preserved_attrs: Sequence[str] = (),
        *,
        optimize_numerics: bool = True,
        optimize_for_inference: bool = False,
        freeze_interfaces: bool = True,
    ) -> Plan:
        """torch's own plan for the installed version.

        Args:
            preserved_attrs: what to keep besides ``forward``.
            optimize_numerics: as ``torch.jit.freeze(optimize_numerics=...)``.
            optimize_for_inference: also run ``torch.jit.optimize_for_inference``'s passes.
            freeze_interfaces: inline module interfaces.

        Returns:
            A validated :class:`Plan`.
        """
        return cls(
            preserved_attrs=tuple(preserved_attrs),
            passes=default_passes(optimize_numerics, optimize_for_inference),
            optimize_numerics=optimize_numerics,
            optimize_for_inference=optimize_for_inference,
            freeze_interfaces=freeze_interfaces,
        ).validate()

    def validate(self, registry: Mapping[str, PassInfo] | None = None) -> Plan:
        """Check every pass id; return ``self``.

        Raises:
            PlanError: an unknown, unavailable or repeated pass, a pass that changes
                numerics while ``optimize_numerics`` is False, or an inference pass
                without ``optimize_for_inference``.
        """
        reg = REGISTRY if registry is None else registry
        seen: set[str] = set()
        for pid in self.passes:
            info = reg.get(pid)
            if info is None:
                raise PlanError(f"unknown pass {pid!r}; valid passes are: {', '.join(reg)}.")
            if pid in seen:
                raise PlanError(f"pass {pid!r} is listed twice; list each pass once.")
            seen.add(pid)
            if not info.available:
                raise PlanError(
                    f"pass {pid!r} needs torch._C.{info.binding}, which this torch "
                    f"({torch.__version__}) does not have."
                )
            if info.group == "loop" and not self.optimize_numerics:
                raise PlanError(
                    f"pass {pid!r} changes numerics, which --no-optimize "
                    "(optimize_numerics=False) rules out; drop one of them."
                )
            if info.group == "inference" and not self.optimize_for_inference:
                raise PlanError(
                    f"pass {pid!r} is an optimize_for_inference pass; add "
                    "--optimize-for-inference to run it."
                )
        return self

    def replace(self, **changes: Any) -> Plan:
        """A copy with ``changes`` applied, validated."""
        return dataclasses.replace(self, **changes).validate()

    @property
    def freeze_key(self) -> tuple[tuple[str, ...], bool]:
        """What the freeze phase depends on (a change here restarts from step 0)."""
        return (self.preserved_attrs, self.freeze_interfaces)

    @property
    def is_torch_default(self) -> bool:
        """True when the frozen-graph passes are exactly torch's for this version."""
        frozen = tuple(
            p
            for p in self.passes
            if REGISTRY.get(p, None) is None or REGISTRY[p].group != "inference"
        )
        return frozen == default_passes(self.optimize_numerics, False)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "preserved_attrs": list(self.preserved_attrs),
            "passes": list(self.passes),
            "optimize_numerics": self.optimize_numerics,
            "optimize_for_inference": self.optimize_for_inference,
            "freeze_interfaces": self.freeze_interfaces,
        }


class _Once:
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


class _LazyGraph:
    """One method graph at one moment; its :class:`GraphSnapshot` is built on first use.

    It holds a torch graph nothing changes any more: a private copy, or the pipeline's
    working graph up to the moment the pipeline is about to run a pass on it -- then
    :meth:`detach` swaps in a copy -- or a function that builds the graph when it is
    first needed. Graph copies share constant tensors with the module (no storage is
    copied). Once the snapshot exists the graph is let go.
    """

    __slots__ = ("_build", "_graph", "_kinds", "_live", "_lock", "_snapshot", "_text", "method")

    def __init__(
        self,
        method: str,
        graph: torch._C.Graph | None = None,
        *,
        build: Callable[[], torch._C.Graph] | None = None,
        live: bool = False,
        text: str | None = None,
    ) -> None:
        if (graph is None) == (build is None):
            raise ValueError("a lazy graph needs exactly one of graph and build")
        self.method = method
        self._graph = graph
        self._build = build
        self._live = live
        self._text = text
        self._snapshot: GraphSnapshot | None = None
        self._kinds: Counter[str] | None = None
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

    @property
    def text(self) -> str:
        """torch's IR printout of the graph."""
        with self._lock:
            if self._text is None:
                graph = self.graph()
                assert graph is not None
                self._text = str(graph)
            return self._text

    def kinds(self) -> Counter[str]:
        """How many nodes of each kind (from the snapshot if taken, else the printout)."""
        with self._lock:
            if self._snapshot is not None:
                return self._snapshot.kinds()
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

    def snapshot(self) -> GraphSnapshot:
        """The snapshot (taken now if this is the first call)."""
        with self._lock:
            if self._snapshot is None:
                graph = self.graph()
                assert graph is not None
                self._snapshot = snapshot_graph(graph, self.method, text=self._text)
                if self._text is None:
                    self._text = self._snapshot.text
                self._graph = None
                self._live = False
                self._kinds = None
            return self._snapshot


class SnapshotMap(Mapping[str, GraphSnapshot]):
    """Method name -> :class:`GraphSnapshot`, each taken on first access.

    ``step.snapshots["forward"]`` snapshots ``forward`` only; listing the methods
    (``sorted(step.snapshots)``) snapshots nothing.
    """

    __slots__ = ("_graphs",)

    def __init__(self, graphs: Mapping[str, _LazyGraph]) -> None:
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
_Details = tuple[int, int, int, tuple[str, ...]]


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
    _changed: bool | _Once
    seconds: float = 0.0
    numerics: Numerics | None = None
    error: str | None = None
    round: int | None = None
    # (folded, kept), or how to find them.
    _attributes: tuple[tuple[str, ...], tuple[str, ...]] | _Once = ((), ())
    # What the step shows, taken lazily: method -> graph, and (counts, notes).
    _graphs: Mapping[str, _LazyGraph] = field(default_factory=dict, repr=False)
    _lazy: _Once = field(default_factory=lambda: _Once(lambda: (0, 0, 0, ())), repr=False)

    @property
    def ok(self) -> bool:
        """True unless the step failed."""
        return self.error is None

    @property
    def changed(self) -> bool:
        """True if the step changed any graph."""
        value = self._changed
        return bool(value.get() if isinstance(value, _Once) else value)

    @property
    def folded(self) -> tuple[str, ...]:
        """Attribute paths folded into constants (``fold_attributes`` only)."""
        value = self._attributes
        return (value.get() if isinstance(value, _Once) else value)[0]  # type: ignore[no-any-return]

    @property
    def kept(self) -> tuple[str, ...]:
        """Attribute paths that stayed module attributes (``fold_attributes`` only)."""
        value = self._attributes
        return (value.get() if isinstance(value, _Once) else value)[1]  # type: ignore[no-any-return]

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
    def node_count(self) -> int | None:
        """Nodes of the ``forward`` graph after the step, without taking a snapshot."""
        graph = self._graphs.get("forward")
        return graph.node_count if graph is not None else None

    def _resolved(self) -> _Details:
        return self._lazy.get()  # type: ignore[no-any-return]

    @property
    def nodes_added(self) -> int:
        """Nodes added by the step (summed over methods)."""
        return self._resolved()[0]

    @property
    def nodes_removed(self) -> int:
        """Nodes removed by the step (summed over methods)."""
        return self._resolved()[1]

    @property
    def nodes_changed(self) -> int:
        """Nodes changed in place by the step (summed over methods)."""
        return self._resolved()[2]

    @property
    def notes(self) -> tuple[str, ...]:
        """Sentences for people: what changed, or why nothing did."""
        return self._resolved()[3]


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


def _graph_counts(before: _LazyGraph | None, after: _LazyGraph) -> tuple[int, int, int, str]:
    """Added, removed, changed node counts and a one-line summary."""
    if before is None:
        count = after.node_count
        return count, 0, 0, f"+{count} added"
    if max(before.node_count, after.node_count) <= FULL_DIFF_LIMIT:
        from .diff import diff_snapshots

        d = diff_snapshots(before.snapshot(), after.snapshot())
        c = d.counts()
        return c["added"], c["removed"], c["changed"], d.summary()
    delta = after.kinds()
    delta.subtract(before.kinds())
    added = sum(n for n in delta.values() if n > 0)
    removed = -sum(n for n in delta.values() if n < 0)
    notable = [
        f"{kind} {n:+d}"
        for kind, n in sorted(delta.items(), key=lambda kv: (-abs(kv[1]), kv[0]))
        if n and kind != "prim::Constant"
    ][:4]
    text = f"+{added} added, -{removed} removed by node kind"
    return added, removed, 0, f"{text} ({', '.join(notable)})" if notable else text


def _counts(
    before: Mapping[str, _LazyGraph], after: Mapping[str, _LazyGraph]
) -> tuple[int, int, int, list[str]]:
    """Node counts summed over methods, and one summary note per changed method."""
    added = removed = changed = 0
    notes = []
    for method, graph in after.items():
        prev = before.get(method)
        if prev is graph:
            continue
        if prev is not None and _same_ir(prev.text, graph.text):
            continue
        a, r, c, summary = _graph_counts(prev, graph)
        added, removed, changed = added + a, removed + r, changed + c
        notes.append(summary if method == "forward" else f"{method}: {summary}")
    return added, removed, changed, notes


def _details(compute: Callable[[], _Details], fallback: Sequence[str] = ()) -> _Once:
    """A step's lazy counts and notes; a failure becomes a note, never an exception.

    They are computed when someone first reads them (the app's worker, the CLI's table),
    long after the step ran: an error there must not break the reader.
    """

    def run() -> _Details:
        try:
            return compute()
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            return 0, 0, 0, (*fallback, f"could not count this step's changes: {first}")

    return _Once(run)


def _ready(notes: Sequence[str] = (), counts: tuple[int, int, int] = (0, 0, 0)) -> _Once:
    """Details known already (a failed step)."""
    value: _Details = (*counts, tuple(notes))
    return _Once(lambda: value)


def _ir_key(text: str) -> str:
    """IR text without torch's per-clone type mangling.

    Each freeze clones the module's class type under a new mangled name, so the same
    graph frozen twice (a rerun) prints ``___torch_mangle_4`` once and ``_7`` the next
    time; whether a step changed anything is judged without that.
    """
    return demangle(text)


def _same_ir(a: str, b: str) -> bool:
    """Equal printouts, type mangling aside (the plain comparison settles most cases)."""
    return a == b or _ir_key(a) == _ir_key(b)


def _resolve(cmod: torch._C.ScriptModule, dotted: str) -> tuple[Any, str] | None:
    """Owner object and last name of a dotted path, or None if a part is missing."""
    *parts, last = dotted.split(".")
    obj: Any = cmod
    for part in parts:
        if not (hasattr(obj, "hasattr") and obj.hasattr(part)):
            return None
        obj = obj.getattr(part)
    return obj, last


def _is_module(value: Any) -> bool:
    return isinstance(value, torch._C.ScriptModule)


def _module_paths(module: Any) -> tuple[set[str], set[str]]:
    """``(attribute paths, all paths)`` of a module tree, from one torch call.

    ``all paths`` includes submodules. torch walks the whole tree in C++ once; asking
    per attribute would walk it once per attribute.
    """
    paths = attribute_paths(getattr(module, "_c", module))
    return {path for path, is_module in paths.items() if not is_module}, set(paths)


def _pick(graphs: _Once, method: str) -> Callable[[], torch._C.Graph]:
    """A builder for one method's graph out of a lazily built ``{method: graph}``."""

    def build() -> torch._C.Graph:
        return graphs.get()[method]  # type: ignore[no-any-return]

    return build


_CALL_KINDS = ("prim::CallMethod", "prim::CallFunction")


def _call_count(graph: torch._C.Graph) -> int:
    """Calls left in a graph (nested blocks included), counted by torch in C++."""
    found: list[list[torch._C.Node]] = [graph.findAllNodes(k) for k in _CALL_KINDS]  # type: ignore[attr-defined]
    return sum(len(nodes) for nodes in found)


class Pipeline:
    """The stepwise freeze of one module with one plan.

    Args:
        model: a :class:`LoadedModel`, a ScriptModule, or a path to a ``.pt`` file.
        plan: what to preserve and which passes to run (default: torch's plan).
        inputs: sample inputs for ``forward``; each step then reports its numerics.
        registry: the pass registry (tests inject failing passes here).

    The input module is never modified: freezing works on a clone that shares tensor
    storage with it, and running sample inputs restores any state a run changes.
    Steps hold their graph pictures, counts and notes lazily: a step's snapshot is
    taken the first time someone reads ``step.snapshot``.

    Example::

        pipe = Pipeline(torch.jit.script(net.eval()))
        for step in pipe.run():
            print(step.index, step.title, step.changed)
        frozen = pipe.frozen_module
    """

    def __init__(
        self,
        model: LoadedModel | torch.jit.ScriptModule | str | Path,
        plan: Plan | None = None,
        inputs: Sequence[Any] | None = None,
        *,
        registry: Mapping[str, PassInfo] | None = None,
    ) -> None:
        if isinstance(model, (str, Path)):
            model = load_model(model)
        self.loaded = model if isinstance(model, LoadedModel) else LoadedModel.from_module(model)
        check_eval(self.loaded)
        self.module: torch.jit.ScriptModule = self.loaded.module
        self.registry: Mapping[str, PassInfo] = REGISTRY if registry is None else registry
        self.plan = (plan or Plan.default()).validate(self.registry)
        self._check_preserved(self.plan)
        self.inputs: tuple[Any, ...] | None = tuple(inputs) if inputs is not None else None
        self.steps: list[Step] = []
        self.frozen_module: torch.jit.ScriptModule | None = None
        self.cancelled = False
        self.failed = False
        self.warnings: list[str] = []
        self._reference: Any = None
        self._reference_ready = False
        self._reference_error: str | None = None
        self._guards: list[StateGuard] = []
        self._working: torch.jit.ScriptModule | None = None
        # Per pipeline, not per run: the input module never changes.
        self._initial: dict[str, _LazyGraph] = {}
        self._paths: tuple[set[str], set[str]] | None = None
        # explain's verdicts by preserved names: the fold step's notes and an export's
        # kept-attribute tooltips both need them, and on a large model one explain
        # costs about as much as freezing itself.
        self._explained: dict[tuple[str, ...], _Once] = {}
        self._explained_lock = threading.Lock()
        # torch's freeze per preserved names, from the freeze step (explain reuses it).
        self._outcomes: dict[tuple[str, ...], TorchOutcome] = {}

    # --- public API -------------------------------------------------------------------

    def run(
        self,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[Step]:
        """Run every step from the start, yielding each as soon as it is done.

        Args:
            progress: called with a :class:`Progress` before each step starts.
            cancel: when set, the pipeline stops before the next step
                (``self.cancelled`` becomes True).

        Yields:
            :class:`Step` values; ``self.steps`` grows as they come.
        """
        yield from self._execute([], 0, None, progress, cancel)

    def run_all(self) -> list[Step]:
        """Run to the end and return all steps."""
        for _ in self.run():
            pass
        return self.steps

    def step(self, index: int) -> Step:
        """The step at ``index`` (negative indices count from the end)."""
        return self.steps[index]

    def rerun_from(
        self,
        index: int,
        plan: Plan | None = None,
        progress: ProgressCallback | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[Step]:
        """Go back to step ``index`` and run on from there, maybe with another plan.

        Steps before ``index`` are kept as they are (snapshots, numerics and all): the
        module is not reloaded; freezing is redone by torch (fast) and the passes of
        the kept steps are replayed without new snapshots, so the module is in the state
        the kept steps show. If the new plan changes what is preserved, the freeze
        phase differs and everything is recomputed from step 0.

        Args:
            index: the first step to recompute (0 <= index <= len(steps)).
            plan: the new plan (default: the current one).
            progress: as for :meth:`run`.
            cancel: as for :meth:`run`.

        Yields:
            The recomputed steps (``self.steps`` holds the kept ones too).

        Raises:
            PlanError: ``index`` is out of range or the plan is invalid.
        """
        if not 0 <= index <= len(self.steps):
            raise PlanError(
                f"cannot go back to step {index}: the pipeline has steps 0..{len(self.steps) - 1}."
            )
        new_plan = (plan or self.plan).validate(self.registry)
        self._check_preserved(new_plan)
        old, old_plan = list(self.steps), self.plan
        keep = index if new_plan.freeze_key == old_plan.freeze_key else 0
        self.plan = new_plan
        yield from self._execute(old, keep, old_plan, progress, cancel)

    @property
    def done(self) -> bool:
        """True when the last run reached the end without failing or being cancelled."""
        return self.frozen_module is not None

    def torch_outcome(self, preserved: Sequence[str]) -> TorchOutcome | None:
        """torch's freeze of the input module from this run's freeze step, if it ran.

        Args:
            preserved: the preserved attribute names it was run with.

        Returns:
            The :class:`~freezeview.engine.torch_outcome.TorchOutcome`, or None when no
            run froze the module with these names (and torch's default interfaces).
        """
        return self._outcomes.get(tuple(preserved))

    def explanation(self, preserved: Sequence[str] | None = None) -> Explanation | None:
        """freezeview's explain of the input module with ``preserved`` (default: the plan's).

        Computed on first use and kept for the pipeline's life (the input module never
        changes), so the fold step's notes and whoever draws the kept attributes share
        one run. None when explain cannot say (its failure is not the pipeline's).

        Args:
            preserved: the preserved attribute names (as in ``Plan.preserved_attrs``).

        Returns:
            The :class:`~freezeview.engine.verdicts.Explanation`, or None.
        """
        names = tuple(self.plan.preserved_attrs if preserved is None else preserved)
        with self._explained_lock:
            once = self._explained.get(names)
            if once is None:
                outcome = self._outcomes.get(names)
                once = self._explained[names] = _Once(
                    partial(_explain_or_none, self.module, names, outcome)
                )
        return once.get()  # type: ignore[no-any-return]

    # --- the run ----------------------------------------------------------------------

    def _check_preserved(self, plan: Plan) -> None:
        cmod = self.module._c
        for name in plan.preserved_attrs:
            found = _resolve(cmod, name)
            ok = (
                found is not None
                and _is_module(found[0])
                and (found[0].hasattr(found[1]) or found[0]._has_method(found[1]))
            )
            if not ok:
                hint = ""
                try:
                    from .inventory import build_inventory

                    close = build_inventory(self.module).suggest(name)
                    hint = f" (did you mean {', '.join(close)}?)" if close else ""
                except Exception:
                    hint = ""
                raise PlanError(
                    f"cannot preserve {name!r}: the model has no attribute, submodule or "
                    f"method of that name{hint}."
                )

    def _methods(self, plan: Plan) -> list[str]:
        """Methods torch optimizes and freezeview shows: forward + preserved methods."""
        cmod = self.module._c
        names = ["forward"] if cmod._has_method("forward") else []
        names += [n for n in plan.preserved_attrs if cmod._has_method(n) and n not in names]
        return names

    def _module_paths(self) -> tuple[set[str], set[str]]:
        """The input module's attribute paths and all paths (computed once)."""
        if self._paths is None:
            self._paths = _module_paths(self.module)
        return self._paths

    def _execute(
        self,
        old: list[Step],
        keep: int,
        old_plan: Plan | None,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> Iterator[Step]:
        self.steps = []
        self.frozen_module = None
        self._working = None
        self.cancelled = False
        self.failed = False
        plan = self.plan
        ctx = _RunContext(self, plan, old[:keep], progress, cancel)
        try:
            for step in ctx.freeze_phase():
                yield step
            if ctx.stopped:
                return
            for step in ctx.optimize_phase():
                yield step
            if ctx.stopped:
                return
            self.frozen_module = self._working
        finally:
            # The last step may still show the working module's own graphs; from now on
            # they belong to the caller (who may run optimize_for_inference on them).
            ctx.detach_all()

    # --- numerics ---------------------------------------------------------------------

    def _prepare_numerics(self, kept_paths: set[str], frozen: torch.jit.ScriptModule) -> None:
        """Guard state and compute the reference outputs (once per pipeline)."""
        if self.inputs is None:
            return  # nothing will run: no state to guard
        self._guards = [StateGuard(self.module, kept_paths), StateGuard(frozen, kept_paths)]
        if self._reference_ready or self._reference_error:
            return
        if not self.module._c._has_method("forward"):
            self._reference_error = "the model has no forward method"
            return
        try:
            with torch.no_grad():
                self._reference = self.module.forward(*self.inputs)
            self._reference_ready = True
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise BadInputError(
                f"the sample inputs do not fit the model: forward failed on them ({first})."
            ) from exc
        finally:
            self._restore()

    def _restore(self) -> None:
        for guard in self._guards:
            guard.restore()

    def _numerics(
        self, graph: Callable[[], torch._C.Graph | None] | torch._C.Graph | None, self_module: Any
    ) -> tuple[Numerics | None, str]:
        """Numerics of a forward graph on the sample inputs, and a note if impossible.

        ``graph`` may be a function giving the graph, so a graph freezeview builds only
        for display is built here only when there are inputs to run.
        """
        if self.inputs is None:
            return None, ""
        if self._reference_error:
            return None, f"numerics not checked: {self._reference_error}"
        if callable(graph):
            graph = graph()
        if graph is None:
            return None, "numerics not checked: no forward graph"
        try:
            out = run_graph(graph, self_module, self.inputs)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            return None, f"numerics not checked: this step's graph failed on the inputs ({first})"
        finally:
            self._restore()
        return compare_outputs(self._reference, out), ""


class _RunContext:
    """State of one run (or rerun) of a pipeline."""

    def __init__(
        self,
        pipe: Pipeline,
        plan: Plan,
        reusable: list[Step],
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> None:
        self.pipe = pipe
        self.plan = plan
        self.reusable = reusable
        self.progress = progress
        self.cancel = cancel
        self.stopped = False
        self.methods = pipe._methods(plan)
        self.current: dict[str, _LazyGraph] = {}
        # Whether the last pass step reported a rewrite (drives the fold loop).
        self.fired = False

    # --- helpers ----------------------------------------------------------------------

    def _announce(self, name: str, title: str, phase: str) -> bool:
        """Call progress; return False if cancelled."""
        if self.cancel is not None and self.cancel.is_set():
            self.pipe.cancelled = True
            self.stopped = True
            return False
        if self.progress is not None:
            self.progress(Progress(len(self.pipe.steps), name, title, phase))
        return True

    def _reuse(self, name: str, round_: int | None) -> Step | None:
        index = len(self.pipe.steps)
        if index < len(self.reusable):
            old = self.reusable[index]
            if old.name == name and old.round == round_ and old.error is None:
                return old
        return None

    def _add(self, step: Step) -> Step:
        self.pipe.steps.append(step)
        if step._graphs:
            self.current = dict(step._graphs)
        if step.error is not None:
            self.pipe.failed = True
            self.stopped = True
        return step

    def detach_all(self) -> None:
        """Give every picture still showing a working graph a private copy."""
        for graph in self.current.values():
            graph.detach()

    @staticmethod
    def _method_graph(cmod: torch._C.ScriptModule, method: str) -> torch._C.Graph:
        return cmod._get_method(method).graph

    # --- freeze phase -----------------------------------------------------------------

    def freeze_phase(self) -> Iterator[Step]:
        pipe, plan = self.pipe, self.plan
        cmod = pipe.module._c
        for m in self.methods:
            if m not in pipe._initial:
                picture = _LazyGraph(m, self._method_graph(cmod, m), live=True)
                # A copy: a picture must not follow later edits of the caller's module.
                picture.detach()
                pipe._initial[m] = picture
        initial = {m: pipe._initial[m] for m in self.methods}

        # 1. inline
        if not self._announce("inline", _FREEZE_TITLES["inline"], "freeze"):
            return
        start = time.perf_counter()
        methods = list(self.methods)

        def inline_all() -> dict[str, torch._C.Graph]:
            graphs = {}
            for m in methods:
                graph = self._method_graph(cmod, m).copy()
                torch._C._jit_pass_inline(graph)
                graphs[m] = graph
            return graphs

        # The inlined copies are freezeview's pictures, built when first needed: torch
        # inlines its own clone inside _freeze_module, and inlining the caller's module
        # a second time (compiling each callee's optimized graph again) would cost a
        # third of torch's whole freeze.
        inlined = _Once(inline_all)
        inline_graphs = {m: _LazyGraph(m, build=_pick(inlined, m)) for m in methods}
        old = self._reuse("inline", None)
        changed: bool | _Once = False
        if old is None:
            sources = {m: self._method_graph(cmod, m) for m in methods}
            changed = self._inline_changed(sources, initial, inlined)
        seconds = time.perf_counter() - start
        # freeze itself (torch's work) happens now: the fold step needs to know what
        # torch kept, and the guard for numerics needs it before any run.
        start = time.perf_counter()
        frozen: torch.jit.ScriptModule | None = None
        freeze_error: str | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                # With torch's freezing log: explain reads its statuses off this very
                # run instead of freezing the model a second time.
                outcome = torch_outcome(cmod, list(plan.preserved_attrs), plan.freeze_interfaces)
            if plan.freeze_interfaces:
                pipe._outcomes[tuple(plan.preserved_attrs)] = outcome
            frozen = torch.jit.RecursiveScriptModule(outcome.frozen)
            torch.jit.RecursiveScriptModule._finalize_scriptmodule(frozen)
        except Exception as exc:
            freeze_error = _refusal(exc, pipe.loaded.name or "the model")
        freeze_seconds = time.perf_counter() - start
        kept_paths: set[str] = set()
        frozen_all: set[str] = set()
        if frozen is not None:
            kept_paths, frozen_all = _module_paths(frozen)
            pipe._prepare_numerics(kept_paths, frozen)
        if old is None:
            forward = inline_graphs.get("forward")
            num, note = pipe._numerics(forward.graph if forward is not None else None, pipe.module)
            tail: tuple[str, ...] = (note,) if note else ()

            def inline_details(
                before: Mapping[str, _LazyGraph] = initial,
                after: Mapping[str, _LazyGraph] = inline_graphs,
                changed: bool | _Once = changed,
            ) -> _Details:
                a, r, c, notes = _counts(before, after)
                if not (changed.get() if isinstance(changed, _Once) else changed):
                    notes = ["nothing to inline: the methods call no other methods or functions"]
                return a, r, c, (*notes, *tail)

            yield self._add(
                Step(
                    0,
                    "inline",
                    _FREEZE_TITLES["inline"],
                    "freeze",
                    changed,
                    seconds,
                    num,
                    _graphs=inline_graphs,
                    _lazy=_details(inline_details, tail),
                )
            )
        else:
            self._add(old)

        # 2. fold attributes
        if not self._announce("fold_attributes", _FREEZE_TITLES["fold_attributes"], "freeze"):
            return
        old = self._reuse("fold_attributes", None)
        if old is not None:
            self._add(old)
        else:
            yield self._add(self._fold_step(inlined, kept_paths, freeze_error))
        if self.stopped:
            return

        # 3. clean-up: torch's own _freeze_module result
        if not self._announce("cleanup", _FREEZE_TITLES["cleanup"], "freeze"):
            return
        old = self._reuse("cleanup", None)
        if old is not None and frozen is not None:
            self._add(old)
        elif frozen is None:
            yield self._add(
                Step(
                    2,
                    "cleanup",
                    _FREEZE_TITLES["cleanup"],
                    "freeze",
                    False,
                    freeze_seconds,
                    error=freeze_error,
                )
            )
            return
        else:
            before = dict(self.current)
            # The working module's own graphs, until a pass is about to change them.
            after = {
                m: _LazyGraph(m, self._method_graph(frozen._c, m), live=True)
                for m in self.methods
                if frozen._c._has_method(m)
            }
            dropped = pipe._module_paths()[0] - frozen_all
            kept_note = (
                f"{len(kept_paths)} attribute(s) kept on the frozen module; "
                f"{len(dropped)} attribute or submodule path(s) removed"
            )
            num, note = pipe._numerics(
                self._method_graph(frozen._c, "forward") if "forward" in after else None, frozen
            )
            tail = (kept_note, note) if note else (kept_note,)
            # The working module from now on (readers of the step see its graphs).
            pipe._working = frozen

            def cleanup_details(
                before: Mapping[str, _LazyGraph] = before,
                after: Mapping[str, _LazyGraph] = after,
            ) -> _Details:
                a, r, c, notes = _counts(before, after)
                return a, r, c, (*notes, *tail)

            yield self._add(
                Step(
                    2,
                    "cleanup",
                    _FREEZE_TITLES["cleanup"],
                    "freeze",
                    True,
                    freeze_seconds,
                    num,
                    _graphs=after,
                    _lazy=_details(cleanup_details, tail),
                )
            )
        pipe._working = frozen

    @staticmethod
    def _inline_changed(
        sources: Mapping[str, torch._C.Graph], initial: Mapping[str, _LazyGraph], inlined: _Once
    ) -> bool | _Once:
        """Whether inlining changes any graph: False at once when there is no call.

        Otherwise the answer waits for the inlined pictures (inlining only ever
        replaces calls, but torch leaves calls through module interfaces in place).
        """
        calls = {m: _call_count(g) for m, g in sources.items()}
        if not any(calls.values()):
            return False

        def compare() -> bool:
            graphs: dict[str, torch._C.Graph] = inlined.get()
            for m, count in calls.items():
                if count and (_call_count(graphs[m]) < count or initial[m].text != str(graphs[m])):
                    return True
            return False

        return _Once(compare)

    def _fold_step(self, inlined: _Once, kept_paths: set[str], freeze_error: str | None) -> Step:
        """The inlined graphs with every attribute torch folded replaced by a constant.

        Which attributes torch folded and which it kept comes from torch's own result
        (the attributes left on the frozen module are the kept ones), read off the
        inlined graphs. Like the picture itself, that is worked out when someone first
        asks (or when sample inputs run through the picture).
        """
        pipe = self.pipe
        before = dict(self.current)
        if freeze_error is not None:
            return Step(
                1,
                "fold_attributes",
                _FREEZE_TITLES["fold_attributes"],
                "freeze",
                False,
                _graphs=before,
                error=freeze_error,
            )
        start = time.perf_counter()
        cmod = pipe.module._c

        def classify() -> tuple[tuple[str, ...], tuple[str, ...]]:
            folded: set[str] = set()
            kept: set[str] = set()
            graphs: dict[str, torch._C.Graph] = inlined.get()
            for g in graphs.values():
                f, k = _attribute_reads(g, cmod, kept_paths)
                folded |= f
                kept |= k
            return tuple(sorted(folded)), tuple(sorted(kept))

        attributes = _Once(classify)
        unshown: set[str] = set()

        def builder(method: str) -> Callable[[], torch._C.Graph]:
            def build() -> torch._C.Graph:
                copy = inlined.get()[method].copy()
                unshown.update(_fold_graph(copy, cmod, kept_paths))
                return copy

            return build

        after = {m: _LazyGraph(m, build=builder(m)) for m in before}
        forward = after.get("forward")
        num, note = pipe._numerics(forward.graph if forward is not None else None, pipe.module)
        preserved = self.plan.preserved_attrs

        def fold_details() -> _Details:
            folded, kept = attributes.get()
            head = f"{len(folded)} attribute(s) folded into constants, {len(kept)} kept"
            a, r, c, notes = _counts(before, after)
            for graph in after.values():
                _ = graph.text  # builds the folded graph, which fills ``unshown``
            tail = list(_kept_reasons(pipe, preserved, list(kept))) if kept else []
            if unshown:
                tail.append(
                    "folded by torch but shown as attribute reads here (no constant form in "
                    "Python): " + ", ".join(sorted(unshown)[:8])
                )
            if note:
                tail.append(note)
            return a, r, c, (head, *notes, *tail)

        return Step(
            1,
            "fold_attributes",
            _FREEZE_TITLES["fold_attributes"],
            "freeze",
            _Once(lambda: bool(attributes.get()[0])),
            time.perf_counter() - start,
            num,
            _attributes=attributes,
            _graphs=after,
            _lazy=_details(fold_details),
        )

    # --- optimization phase -----------------------------------------------------------

    def optimize_phase(self) -> Iterator[Step]:
        plan, reg = self.plan, self.pipe.registry
        segments: list[tuple[str, list[str]]] = []
        for pid in plan.passes:
            group = reg[pid].group
            if group == "loop" and segments and segments[-1][0] == "loop":
                segments[-1][1].append(pid)
            else:
                segments.append(("loop" if group == "loop" else "once", [pid]))
        guard_after = len(segments)
        if needs_guard() and plan.is_torch_default:
            # After the last frozen-graph segment, before the inference passes.
            guard_after = sum(1 for s in segments if reg[s[1][0]].group != "inference")
        for position, (mode, ids) in enumerate(segments):
            if position == guard_after:
                yield from self._guard_step()
                if self.stopped:
                    return
            if mode == "once":
                yield from self._pass_step(reg[ids[0]], None)
                if self.stopped:
                    return
                continue
            for round_ in range(1, _MAX_ROUNDS + 1):
                any_fold = False
                for pid in ids:
                    yield from self._pass_step(reg[pid], round_)
                    if self.stopped:
                        return
                    any_fold |= self.fired
                if not any_fold:
                    break
            else:
                self.pipe.warnings.append(
                    f"the fold loop had not settled after {_MAX_ROUNDS} rounds; stopped it"
                )
        if guard_after == len(segments):
            yield from self._guard_step()

    def _guard_step(self) -> Iterator[Step]:
        if not (needs_guard() and self.plan.is_torch_default):
            return
        info = guard_info(self.plan.optimize_numerics)
        yield from self._pass_step(info, None)
        step = self.pipe.steps[-1]
        if step.changed:
            self.pipe.warnings.append(
                "torch's own optimize_frozen_graph changed the graph after freezeview's "
                "passes: this torch release's order differs from freezeview's registry; the "
                "result is still torch's."
            )

    def _pass_step(self, info: PassInfo, round_: int | None) -> Iterator[Step]:
        pipe = self.pipe
        working = pipe._working
        assert working is not None
        title = info.title + (f" (round {round_})" if round_ is not None else "")
        if not self._announce(info.id, title, info.kind):
            return
        graphs = {
            m: self._method_graph(working._c, m) for m in self.methods if working._c._has_method(m)
        }
        before = dict(self.current)
        for graph in before.values():
            graph.detach()  # the pass rewrites the working graphs in place
        start = time.perf_counter()
        error = None
        reported: list[bool | None] = []
        try:
            for m, g in graphs.items():
                reported.append(info.apply(g, m, working._c))
        except Exception as exc:
            error = (
                f"{info.id} failed: "
                + ((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])
            )
        seconds = time.perf_counter() - start
        # ``changed`` is judged on the printout, not on what the pass returns: torch's
        # folds report False yet still run dead-code elimination, which can remove
        # constants an earlier pass left unused.
        texts = {m: str(g) for m, g in graphs.items()}
        changed_methods = [
            m for m in graphs if m not in before or not _same_ir(before[m].text, texts[m])
        ]
        changed = bool(changed_methods)
        # Whether the fold loop goes on is torch's own test: did a fold report folding
        # (``changed |= FoldFrozenConvBatchnorm(graph)`` in frozen_graph_optimizations.cpp),
        # so the loop runs as many rounds as torch's; a pass that cannot tell counts
        # by its printout.
        self.fired = any(r for r in reported) or (changed and None in reported)
        old = self._reuse(info.id, round_)
        if old is not None and old.changed == changed and error is None:
            self._add(old)
            return
        after = dict(before)
        for m in changed_methods:
            after[m] = _LazyGraph(m, graphs[m], live=True, text=texts[m])
        num: Numerics | None = None
        tail: tuple[str, ...] = ()
        if error is None:
            prev = pipe.steps[-1].numerics if pipe.steps else None
            if changed or prev is None:
                num, note = pipe._numerics(graphs.get("forward"), working)
                tail = (note,) if note else ()
            else:
                num = prev
        shown = before.get("forward") or next(iter(before.values()), None)

        def pass_details(
            before: Mapping[str, _LazyGraph] = before,
            after: Mapping[str, _LazyGraph] = after,
            shown: _LazyGraph | None = shown,
        ) -> _Details:
            if changed:
                a, r, c, notes = _counts(before, after)
                return a, r, c, (*notes, *tail)
            if error is None:
                why = info.why_not(shown.snapshot() if shown is not None else None)
                return 0, 0, 0, (f"did not fire: {why}", *tail)
            return 0, 0, 0, tail

        yield self._add(
            Step(
                len(pipe.steps),
                info.id,
                title,
                info.kind,
                changed,
                seconds,
                num,
                error,
                round_,
                _graphs=after,
                _lazy=_details(pass_details, tail),
            )
        )


_ASSERT_PREFIX_RE = re.compile(
    r"^.*INTERNAL ASSERT FAILED at .*?please report a bug to PyTorch\.\s*"
)


def _refusal(exc: Exception, model: str) -> str:
    """torch's refusal to freeze as freezeview's sentence (file name and fix), quoting torch.

    The sentence is the one ``freezeview explain`` gives for the same model; torch's own
    first line follows, so a user can search for it.
    """
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # torch words some refusals as failed internal asserts; the sentence after the
    # assert's boilerplate is the part that says something.
    first = _ASSERT_PREFIX_RE.sub("", lines[0] if lines else type(exc).__name__)[:300]
    try:
        from .replay import torch_refusal

        sentence = torch_refusal(str(exc), model)
    except Exception:
        return f"torch refused to freeze {model}: {first}"
    return sentence if first in sentence else f"{sentence} (torch: {first})"


def _explain_or_none(
    module: torch.jit.ScriptModule, preserved: Sequence[str], outcome: TorchOutcome | None
) -> Any:
    """explain's :class:`~freezeview.engine.verdicts.Explanation`, or None if it fails."""
    try:
        from .verdicts import explain as run_explain

        return run_explain(module, preserved_attrs=list(preserved), outcome=outcome)
    except Exception:
        return None


def _kept_reasons(pipe: Pipeline, preserved: Sequence[str], kept: list[str]) -> list[str]:
    """One note per kept attribute, with explain's reason when explain is there.

    Runs when someone reads the fold step's notes, never while the pipeline runs: on a
    large model explain's alias analysis costs about as much as freezing itself.
    """
    reasons: dict[str, str] = {}
    try:
        verdicts = pipe.explanation(preserved)
        if verdicts is not None:
            for path in kept:
                verdict = verdicts.by_path(path)
                if verdict is not None and verdict.reasons:
                    reasons[path] = verdict.reasons[0].message
    except Exception:
        reasons = {}
    return [f"kept {p}: {reasons[p]}" if p in reasons else f"kept {p}" for p in kept[:20]] + (
        [f"... and {len(kept) - 20} more kept"] if len(kept) > 20 else []
    )


def _attribute_chains(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule
) -> Iterator[tuple[torch._C.Node, str, Any]]:
    """Every attribute read from ``self`` in ``graph``: ``(node, dotted path, value)``.

    A read is a chain of ``prim::GetAttr`` starting at ``self``; torch finds the nodes
    in C++ (pre-order, nested blocks included), so a chain's earlier links come first.
    """
    inputs = list(graph.inputs())
    if not inputs:
        return
    paths: dict[torch._C.Value, str] = {inputs[0]: ""}
    for node in graph.findAllNodes("prim::GetAttr"):  # type: ignore[attr-defined]
        base = paths.get(node.input())
        if base is None:
            continue
        name = node.s("name")
        path = f"{base}.{name}" if base else name
        found = _resolve(cmod, path)
        if found is None:
            continue
        owner, last = found
        try:
            value = owner.getattr(last)
        except (RuntimeError, AttributeError):
            continue
        if _is_module(value):
            paths[node.output()] = path
        yield node, path, value


def _attribute_reads(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule, kept_paths: set[str]
) -> tuple[set[str], set[str]]:
    """``(folded, kept)`` attribute paths read in ``graph``, as torch decided them."""
    folded: set[str] = set()
    kept: set[str] = set()
    for _node, path, value in _attribute_chains(graph, cmod):
        if _is_module(value):
            continue
        (kept if path in kept_paths else folded).add(path)
    return folded, kept


def _fold_graph(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule, kept_paths: set[str]
) -> set[str]:
    """Replace each folded attribute read in ``graph`` by a constant, as torch does.

    An attribute read's dotted path is folded unless it survives on the frozen module
    (``kept_paths``). The constant is the attribute's current value (tensors detached,
    never copied), named ``self.<path>`` like torch's; the reads left without users
    are removed.

    Returns:
        The paths torch folded that have no constant form freezeview can insert from
        Python (they stay attribute reads in the picture).
    """
    top = list(graph.block().nodes())
    if not top:
        return set()
    constants: dict[str, torch._C.Value] = {}
    unshown: set[str] = set()
    touched: list[torch._C.Node] = []
    for node, path, value in list(_attribute_chains(graph, cmod)):
        if _is_module(value):
            touched.append(node)
            continue
        if path in kept_paths:
            continue
        const = constants.get(path)
        if const is None:
            if isinstance(value, torch.Tensor):
                value = value.detach()  # shares storage: a snapshot never copies weights
            try:
                with graph.insert_point_guard(top[0]):
                    const = graph.insertConstant(value)  # type: ignore[attr-defined]
            except Exception:
                unshown.add(path)
                continue
            const.setDebugName(f"self.{path}")
            constants[path] = const
        node.output().replaceAllUsesWith(const)
        touched.append(node)
    # Remove the reads this fold left without users (deepest first, so chains unwind);
    # other dead code stays for the clean-up step to remove, as torch does.
    for node in reversed(touched):
        if not node.output().uses():
            node.destroy()
    return unshown


def freeze(
    model_or_path: LoadedModel | torch.jit.ScriptModule | str | Path,
    preserved_attrs: Sequence[str] = (),
    passes: Sequence[str] | None = None,
    *,
    optimize_numerics: bool = True,
    optimize_for_inference: bool = False,
    freeze_interfaces: bool = True,
    inputs: Sequence[Any] | None = None,
    eval_mode: bool = False,
) -> FreezeResult:
    """Freeze a TorchScript model step by step; the result equals ``torch.jit.freeze``.

    Args:
        model_or_path: a ScriptModule, a :class:`LoadedModel`, or a ``.pt`` path.
        preserved_attrs: as ``torch.jit.freeze(preserved_attrs=...)``.
        passes: pass ids to run (default: torch's passes for the installed version).
        optimize_numerics: as ``torch.jit.freeze(optimize_numerics=...)``.
        optimize_for_inference: also run ``torch.jit.optimize_for_inference``'s passes.
        freeze_interfaces: inline module interfaces (torch's default).
        inputs: sample inputs; each step then reports max abs/rel output differences.
        eval_mode: switch a training-mode model loaded from a path to eval mode.

    Returns:
        A :class:`FreezeResult` with every step and the frozen module.

    Raises:
        BadInputError: the file cannot be loaded, or the inputs do not fit the model.
        PlanError: a bad plan, a training-mode model, or a step failed (its message).

    Example::

        result = freeze(torch.jit.script(net.eval()), preserved_attrs=["version"])
        print([s.title for s in result.steps if s.changed])
        torch.jit.save(result.module, "frozen.pt")
    """
    if isinstance(model_or_path, (str, Path)):
        model_or_path = load_model(model_or_path, eval_mode=eval_mode)
    plan = Plan(
        preserved_attrs=tuple(preserved_attrs),
        passes=tuple(passes)
        if passes is not None
        else default_passes(optimize_numerics, optimize_for_inference),
        optimize_numerics=optimize_numerics,
        optimize_for_inference=optimize_for_inference,
        freeze_interfaces=freeze_interfaces,
    )
    pipe = Pipeline(model_or_path, plan, inputs)
    steps = pipe.run_all()
    failed = next((s for s in steps if s.error), None)
    if failed is not None:
        raise PlanError(f"step {failed.index} ({failed.title}) failed: {failed.error}")
    return FreezeResult(tuple(steps), pipe.frozen_module, pipe.plan)
