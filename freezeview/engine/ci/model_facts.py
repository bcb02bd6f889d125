"""Everything freezing does to one model under one plan, gathered once for check/compare.

``freezeview check`` and ``freezeview compare`` ask the same questions of a model: which
attributes torch inlines, keeps or drops (and why), how many bytes of tensors stay module
attributes, which optimization passes fire, which node kinds the frozen graph holds and,
given sample inputs, how far the frozen outputs are from the original ones. One stepwise
run answers all of them: explain reuses the run's own torch freeze, so the statuses are
torch's (:mod:`~freezeview.engine.reasons.torch_freeze`).
"""

from __future__ import annotations

import re
import threading
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, NamedTuple

import torch

from ..freeze import Numerics, Pipeline, Plan
from ..load import LoadedModel, check_eval, in_training_mode, load_model
from ..measure import MeasuredRun, Measurement
from ..plumbing import PlanError
from ..reasons import (
    Explanation,
    TorchOutcome,
    explain,
    frozen_writes_a_constant,
    module_statuses,
    torch_statuses_only,
)

__all__ = [
    "FreezeFacts",
    "PathStatus",
    "TorchFacts",
    "as_loaded",
    "gather_facts",
    "kept_tensor_bytes",
    "torch_facts",
]


@dataclass(frozen=True)
class FreezeFacts:
    """What freezing one model under one plan does.

    Attributes:
        model: how to name the model (its file).
        plan: the plan that was run.
        explanation: every attribute's status (torch's) and reasons.
        kept_bytes: bytes of tensors torch keeps as module attributes (a storage shared
            by several attributes counts once).
        kept_tensors: ``(path, bytes)`` of each kept tensor, largest first.
        passes_fired: pass id -> how many times it changed the graph.
        node_kinds: node kinds of the frozen graphs and their counts.
        numerics: frozen outputs against the original ones on the sample inputs, or None.
        seconds: wall time of the whole gathering.
        measurement: latency per step, sizes and portability, when asked (``measure``).
    """

    model: str
    plan: Plan
    explanation: Explanation
    kept_bytes: int
    kept_tensors: tuple[tuple[str, int], ...]
    passes_fired: dict[str, int]
    node_kinds: Counter[str] = field(default_factory=Counter)
    numerics: Numerics | None = None
    seconds: float = 0.0
    measurement: Measurement | None = None
    loaded: LoadedModel | None = field(default=None, repr=False, compare=False)
    outcome: TorchOutcome | None = field(default=None, repr=False, compare=False)

    @property
    def has_reasons(self) -> bool:
        """Whether the verdicts carry freezeview's reasons (not only torch's statuses)."""
        return any(v.reasons for v in self.explanation.attributes)

    def with_reasons(self) -> FreezeFacts:
        """The same facts with every verdict's reasons (explain on this run's freeze)."""
        if self.has_reasons or self.loaded is None:
            return self
        explanation = explain(
            self.loaded,
            self.plan.preserved_attrs,
            freeze_interfaces=self.plan.freeze_interfaces,
            outcome=self.outcome,
        )
        return replace(self, explanation=explanation)


# Every node's kind follows "= " in torch's printout (`%y : T = aten::add(...)`, and
# ` = prim::SetAttr[...](...)` for a node without outputs); counting them in the
# printout, which torch writes in C++, is much faster than walking the nodes from
# Python. A fork's subgraph is printed, and counted, too.
# A node holding a subgraph prints its name after the kind (`prim::fork_0(`).
_KIND = re.compile(r"= ([a-z_]+::\w+?)(?:_\d+)?(?=[\[(])")


def _node_kinds(module: torch.jit.ScriptModule) -> Counter[str]:
    kinds: Counter[str] = Counter()
    for name in module._c._method_names():
        kinds.update(_KIND.findall(str(module._c._get_method(name).graph)))
    return kinds


def _tensor_at(cmod: torch._C.ScriptModule, path: str) -> torch.Tensor | None:
    value: Any = cmod
    for part in path.split("."):
        try:
            value = value.getattr(part)
        except (AttributeError, RuntimeError):
            return None
    return value if isinstance(value, torch.Tensor) else None


def kept_tensor_bytes(
    loaded: LoadedModel, explanation: Explanation
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Bytes of the tensors ``explanation`` calls kept, each storage counted once.

    Args:
        loaded: the model the explanation is of.
        explanation: its verdicts.

    Returns:
        The total, and ``(path, bytes)`` per kept tensor, largest first.
    """
    kept = [v.path for v in explanation.with_status("kept") if v.info.dtype is not None]
    return _tensor_bytes(loaded.module._c, kept)


def _tensor_bytes(
    cmod: torch._C.ScriptModule, paths: Sequence[str]
) -> tuple[int, tuple[tuple[str, int], ...]]:
    """Bytes of the tensors at ``paths`` (others skipped), each storage counted once."""
    seen: set[object] = set()
    total = 0
    each: list[tuple[str, int]] = []
    for path in paths:
        tensor = _tensor_at(cmod, path)
        if tensor is None:
            continue
        parts = _storages(tensor)
        each.append((path, sum(size for _key, size in parts)))
        for key, size in parts:
            if key not in seen:
                seen.add(key)
                total += size
    each.sort(key=lambda item: (-item[1], item[0]))
    return total, tuple(each)


_SPARSE_PARTS = {
    torch.sparse_coo: ("_indices", "_values"),
    torch.sparse_csr: ("crow_indices", "col_indices", "values"),
    torch.sparse_bsr: ("crow_indices", "col_indices", "values"),
    torch.sparse_csc: ("ccol_indices", "row_indices", "values"),
    torch.sparse_bsc: ("ccol_indices", "row_indices", "values"),
}


def _storages(tensor: torch.Tensor) -> list[tuple[object, int]]:
    """``(key, bytes)`` of the memory a tensor holds; one key per storage it shares.

    A sparse tensor has no storage of its own: its bytes are those of its index and value
    tensors. A tensor with no storage at all (MKLDNN) counts its elements' bytes.
    """
    parts = _SPARSE_PARTS.get(tensor.layout)
    if parts is not None:
        return [key for part in parts for key in _storages(getattr(tensor, part)())]
    try:
        storage = tensor.untyped_storage()
    except (NotImplementedError, RuntimeError):
        return [(("tensor", id(tensor)), tensor.numel() * tensor.element_size())]
    pointer = storage.data_ptr()
    key: object = ("storage", tensor.device.type, pointer) if pointer else ("tensor", id(tensor))
    return [(key, int(storage.nbytes()))]


def as_loaded(model: Any, eval_mode: bool = False) -> LoadedModel:
    """A :class:`LoadedModel` from a path, a ScriptModule or a LoadedModel.

    Args:
        model: what the caller has.
        eval_mode: switch a training-mode module to eval mode (``--eval``).
    """
    if isinstance(model, LoadedModel):
        loaded = model
    elif isinstance(model, torch.jit.ScriptModule):
        loaded = LoadedModel.from_module(model)
    else:
        return load_model(Path(model), eval_mode=eval_mode)
    if eval_mode and in_training_mode(loaded.module):
        loaded.module.eval()
    return loaded


class _Run(NamedTuple):
    """What one finished run leaves for the facts (its pipeline and steps can go)."""

    frozen: torch.jit.ScriptModule
    passes_fired: dict[str, int]
    numerics: Numerics | None
    outcome: TorchOutcome | None
    measurement: Measurement | None = None
    # The measurement has each step's figures, not only the result's (see _run).
    per_step: bool = True


#: ``(threads, time budget in seconds)`` for a measured run (:class:`MeasuredRun`), and
#: optionally ``autograd`` (time with autograd on instead of under inference_mode).
Measure = tuple[int, float] | tuple[int, float, bool]


def _run(
    loaded: LoadedModel,
    plan: Plan,
    inputs: Sequence[Any] | None,
    measure: Measure | None = None,
    *,
    per_step: bool = True,
) -> _Run:
    """The stepwise freeze of ``loaded`` under ``plan``; PlanError if it does not finish.

    With ``per_step`` False and nothing to time (no inputs, or no budget), a measurement
    reads only the result (its sizes and portability: what every ``[deployment]`` rule
    decides on), not each step's constant bytes and backend-only nodes, which only say
    which step to blame when a rule is broken: measuring them builds every step's
    picture, the fold step's one constant per attribute (a large share of a deep
    model's check).
    """
    check_eval(loaded)
    pipe = Pipeline(loaded, plan, inputs)
    measured = None
    if measure is not None:
        measured = MeasuredRun.of(pipe, measure)
        per_step = per_step or measured.timing
        steps = list(measured.run()) if per_step else pipe.run_all()
    else:
        steps = pipe.run_all()
        per_step = True  # nothing to measure: nothing left out
    failed = next((s for s in steps if s.error), None)
    if failed is not None or pipe.frozen_module is None:
        error = failed.error if failed is not None else "the run stopped"
        raise PlanError(f"step {failed.index if failed else '?'} failed: {error}")
    fired: dict[str, int] = {}
    for step in steps:
        if step.kind != "freeze" and step.changed:
            fired[step.name] = fired.get(step.name, 0) + 1
    measurement = None
    if measured is not None:
        measurement = measured.finish(input_file=loaded.path, check_roundtrip=True)
    return _Run(
        pipe.frozen_module,
        fired,
        steps[-1].numerics if inputs is not None else None,
        pipe.torch_outcome(plan.preserved_attrs),
        measurement,
        per_step,
    )


def _facts_of_run(
    loaded: LoadedModel, plan: Plan, run: _Run, reasons: bool, start: float
) -> FreezeFacts:
    """The :class:`FreezeFacts` of a finished run (explain's verdicts read now)."""
    explanation = None
    if not reasons and run.outcome is not None:
        explanation = torch_statuses_only(loaded, plan.preserved_attrs, run.outcome)
    if explanation is None:
        explanation = explain(
            loaded,
            plan.preserved_attrs,
            freeze_interfaces=plan.freeze_interfaces,
            outcome=run.outcome,
        )
    total, each = kept_tensor_bytes(loaded, explanation)
    return FreezeFacts(
        model=explanation.model,
        plan=plan,
        explanation=explanation,
        kept_bytes=total,
        kept_tensors=each,
        passes_fired=run.passes_fired,
        node_kinds=_node_kinds(run.frozen),
        numerics=run.numerics,
        seconds=time.perf_counter() - start,
        measurement=run.measurement,
        loaded=loaded,
        outcome=run.outcome,
    )


def gather_facts(
    loaded: LoadedModel,
    plan: Plan,
    inputs: Sequence[Any] | None = None,
    *,
    reasons: bool = True,
    measure: Measure | None = None,
) -> FreezeFacts:
    """Freeze ``loaded`` step by step under ``plan`` and gather every fact check needs.

    Args:
        loaded: the model (never modified).
        plan: what to preserve and which passes run.
        inputs: sample inputs for the numerics, or None.
        reasons: work out freezeview's reasons for every attribute now; with False only
            torch's statuses are read (:meth:`FreezeFacts.with_reasons` adds the reasons
            when something needs them).
        measure: ``(threads, budget)``: also time every step's forward on the inputs
            and read the result's sizes and portability (``facts.measurement``).

    Returns:
        The :class:`FreezeFacts`.

    Raises:
        PlanError: torch cannot freeze the model as asked, or a step failed.
    """
    start = time.perf_counter()
    return _facts_of_run(loaded, plan, _run(loaded, plan, inputs, measure), reasons, start)


@dataclass(frozen=True)
class PathStatus:
    """torch's status for one attribute path, without freezeview's module tree.

    Attributes:
        path: the dotted path from the root.
        kind: ``submodule`` or ``attribute`` (parameters and buffers too: telling them
            apart takes the module tree).
        status: ``inlined``, ``kept`` or ``dropped`` (torch's).
        reasons: always empty (freezeview's reasons take the module tree).
    """

    path: str
    kind: str
    status: str
    reasons: tuple[Any, ...] = ()


class TorchFacts:
    """What torch did to one model under one plan, by attribute path.

    Everything a check's rules are held against when they all hold: torch's status per
    path, the bytes of tensors kept, the passes that fired and the numerics, read off
    the run and one listing of the module's attribute paths. The module tree
    (:func:`~.inventory.build_inventory`: types, values, readers of every attribute) and
    freezeview's reasons are read only when someone asks for :meth:`facts`, which gives
    the :class:`FreezeFacts` :func:`gather_facts` gives for the same run.

    Attributes:
        model: how to name the model (its file).
        plan: the plan that was run.
        statuses: one :class:`PathStatus` per attribute path (submodules too), or None
            when only the module tree can tell
            (:func:`~freezeview.engine.reasons.torch_freeze.module_statuses`).
        kept_bytes, kept_tensors, passes_fired, numerics: as in :class:`FreezeFacts`
            (the kept bytes from :meth:`facts` when ``statuses`` is None).
        seconds: wall time of the run and the reading of the statuses.
    """

    def __init__(self, loaded: LoadedModel, plan: Plan, run: _Run, start: float) -> None:
        self.model = str(loaded.path) if loaded.path else loaded.name
        self.plan = plan
        # Whether the measurement has each step's figures, not only the result's.
        self.per_step = run.per_step
        self.passes_fired = run.passes_fired
        self.numerics = run.numerics
        self.measurement = run.measurement
        self.statuses: tuple[PathStatus, ...] | None = None
        self._kept: tuple[int, tuple[tuple[str, int], ...]] | None = None
        self._loaded = loaded
        self._run = run
        self._facts: FreezeFacts | None = None
        self._lock = threading.Lock()
        cmod = loaded.module._c
        found = module_statuses(run.outcome, cmod) if run.outcome is not None else None
        if found is not None:
            statuses, submodules = found
            self.statuses = tuple(
                PathStatus(p, "submodule" if p in submodules else "attribute", s)
                for p, s in statuses.items()
            )
            kept = [p for p, s in statuses.items() if s == "kept" and p not in submodules]
            self._kept = _tensor_bytes(cmod, kept)
        self.seconds = time.perf_counter() - start

    @property
    def kept_bytes(self) -> int:
        """Bytes of tensors torch keeps as module attributes (a storage counted once)."""
        return self._kept[0] if self._kept is not None else self.facts().kept_bytes

    @property
    def kept_tensors(self) -> tuple[tuple[str, int], ...]:
        """``(path, bytes)`` of each kept tensor, largest first."""
        return self._kept[1] if self._kept is not None else self.facts().kept_tensors

    def writes_a_constant(self) -> bool:
        """Whether the frozen graphs write one of their own constants: one walk of
        them, where which attribute each constant was folded from takes freezeview's
        reasons (``written-constant``)."""
        return frozen_writes_a_constant(self._run.frozen)

    def facts(self, reasons: bool = False) -> FreezeFacts:
        """The run's :class:`FreezeFacts` (built on the first call), with reasons if asked.

        Args:
            reasons: work out freezeview's reasons for every attribute too.
        """
        with self._lock:
            if self._facts is None:
                # Its ``seconds``: the run's, and the time taken now (not the time between).
                start = time.perf_counter() - self.seconds
                self._facts = _facts_of_run(self._loaded, self.plan, self._run, reasons, start)
            elif reasons:
                self._facts = self._facts.with_reasons()
            return self._facts


def torch_facts(
    loaded: LoadedModel,
    plan: Plan,
    inputs: Sequence[Any] | None = None,
    measure: Measure | None = None,
    *,
    per_step: bool = True,
) -> TorchFacts:
    """Freeze ``loaded`` step by step under ``plan`` and read torch's statuses by path.

    Args:
        loaded: the model (never modified).
        plan: what to preserve and which passes run.
        inputs: sample inputs for the numerics, or None.
        measure: ``(threads, budget)``: also measure latency, sizes and portability.
        per_step: with False, a measurement that times nothing reads only the result
            (see :func:`_run`; ``TorchFacts.per_step`` says which was done).

    Returns:
        The :class:`TorchFacts`; its :meth:`~TorchFacts.facts` are what
        :func:`gather_facts` returns.

    Raises:
        PlanError: torch cannot freeze the model as asked, or a step failed.
    """
    start = time.perf_counter()
    run = _run(loaded, plan, inputs, measure, per_step=per_step)
    return TorchFacts(loaded, plan, run, start)
