"""Everything freezing does to one model under one plan, gathered once for check/compare.

``freezeview check`` and ``freezeview compare`` ask the same questions of a model: which
attributes torch inlines, keeps or drops (and why), how many bytes of tensors stay module
attributes, which optimization passes fire, which node kinds the frozen graph holds and,
given sample inputs, how far the frozen outputs are from the original ones. One stepwise
run answers all of them: explain reuses the run's own torch freeze, so the statuses are
torch's (:mod:`.torch_outcome`).
"""

from __future__ import annotations

import re
import time
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch

from .errors import PlanError
from .loading import LoadedModel, check_eval, load_model
from .numerics import Numerics
from .pipeline import Pipeline, Plan
from .torch_outcome import TorchOutcome
from .verdicts import Explanation, explain, torch_statuses_only

__all__ = ["FreezeFacts", "as_loaded", "gather_facts", "kept_tensor_bytes"]


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

    def status_of(self, path: str) -> str | None:
        """The status of ``path`` (None when the model has no such attribute)."""
        verdict = self.explanation.by_path(path)
        return verdict.status if verdict is not None else None


# Every node's kind follows "= " in torch's printout (`%y : T = aten::add(...)`, and
# ` = prim::SetAttr[...](...)` for a node without outputs); counting them in the
# printout, which torch writes in C++, is ten times faster than walking the nodes from
# Python on a 9k-node frozen transformer. A fork's subgraph is printed, and counted, too.
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
    cmod = loaded.module._c
    seen: set[int] = set()
    total = 0
    each: list[tuple[str, int]] = []
    for verdict in explanation.with_status("kept"):
        if verdict.info.dtype is None:
            continue
        tensor = _tensor_at(cmod, verdict.path)
        if tensor is None:
            continue
        storage = tensor.untyped_storage()
        size = int(storage.nbytes())
        each.append((verdict.path, size))
        if storage.data_ptr() not in seen:
            seen.add(storage.data_ptr())
            total += size
    each.sort(key=lambda item: (-item[1], item[0]))
    return total, tuple(each)


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
    if eval_mode and loaded.module.training:
        loaded.module.eval()
    return loaded


def gather_facts(
    loaded: LoadedModel,
    plan: Plan,
    inputs: Sequence[Any] | None = None,
    *,
    reasons: bool = True,
) -> FreezeFacts:
    """Freeze ``loaded`` step by step under ``plan`` and gather every fact check needs.

    Args:
        loaded: the model (never modified).
        plan: what to preserve and which passes run.
        inputs: sample inputs for the numerics, or None.
        reasons: work out freezeview's reasons for every attribute now; with False only
            torch's statuses are read (:meth:`FreezeFacts.with_reasons` adds the reasons
            when something needs them).

    Returns:
        The :class:`FreezeFacts`.

    Raises:
        PlanError: torch cannot freeze the model as asked, or a step failed.
    """
    start = time.perf_counter()
    check_eval(loaded)
    pipe = Pipeline(loaded, plan, inputs)
    steps = pipe.run_all()
    failed = next((s for s in steps if s.error), None)
    if failed is not None or pipe.frozen_module is None:
        error = failed.error if failed is not None else "the run stopped"
        raise PlanError(f"step {failed.index if failed else '?'} failed: {error}")
    outcome = pipe.torch_outcome(plan.preserved_attrs)
    explanation = None
    if not reasons and outcome is not None:
        explanation = torch_statuses_only(loaded, plan.preserved_attrs, outcome)
    if explanation is None:
        explanation = explain(
            loaded, plan.preserved_attrs, freeze_interfaces=plan.freeze_interfaces, outcome=outcome
        )
    fired: dict[str, int] = {}
    for step in steps:
        if step.kind != "freeze" and step.changed:
            fired[step.name] = fired.get(step.name, 0) + 1
    total, each = kept_tensor_bytes(loaded, explanation)
    return FreezeFacts(
        model=explanation.model,
        plan=plan,
        explanation=explanation,
        kept_bytes=total,
        kept_tensors=each,
        passes_fired=fired,
        node_kinds=_node_kinds(pipe.frozen_module),
        numerics=steps[-1].numerics if inputs is not None else None,
        seconds=time.perf_counter() - start,
        loaded=loaded,
        outcome=outcome,
    )
