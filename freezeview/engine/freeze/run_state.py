"""The state of one run of freezing, and what a run needs of the pipeline running it.

A :class:`~.pipeline.Pipeline` starts a run (:class:`~.pipeline_run.RunContext`, built on
:class:`~.freeze_phase.FreezePhase`, built on :class:`RunState`) and the run writes its
steps and results back. :class:`RunHost` says what the run reads and writes there, so
the run's modules need not import the pipeline's: imports flow pipeline -> pipeline_run
-> freeze_phase -> run_state, one way.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import torch

from .lazy_graph import LazyGraph
from .plan import Plan
from .steps import Progress, ProgressCallback, Step

if TYPE_CHECKING:
    from ..graph import GraphSnapshot
    from ..load import LoadedModel
    from ..reasons import Explanation, TorchOutcome
    from .numerics import Numerics
    from .passes import PassInfo

__all__ = ["PictureSteps", "RunHost", "RunState"]


@dataclass(frozen=True)
class PictureSteps:
    """A run's *inline* and *fold attributes* steps, offered to the next run of the same
    module (:meth:`~.pipeline.Pipeline.offer_steps`; the app's re-runs).

    Both are freezeview's pictures of the input module, which freezing never changes:
    the same methods inline to the same graphs, and the fold picture follows from them
    and the attributes torch's freeze keeps. A run with the same methods shows the
    inline step again (whatever attributes it preserves); it shows the fold step again
    only with the same freeze (preserved names, interfaces: the step's notes name them)
    and when its own torch freeze keeps exactly the same attribute paths.

    Attributes:
        freeze_key: the plan's :attr:`~.plan.Plan.freeze_key` they were made with.
        methods: the methods they show.
        kept_paths: the attribute paths torch's freeze kept in that run.
        inline: the inline step.
        fold: the fold step.
    """

    freeze_key: tuple[tuple[str, ...], bool]
    methods: tuple[str, ...]
    kept_paths: frozenset[str]
    inline: Step
    fold: Step

    def fits(self, methods: Sequence[str]) -> bool:
        """True if a run showing these methods shows the same inline step."""
        return (
            tuple(methods) == self.methods
            and self.inline.name == "inline"
            and self.fold.name == "fold_attributes"
            and self.inline.error is None
            and self.fold.error is None
        )

    def fold_fits(
        self, freeze_key: tuple[tuple[str, ...], bool], kept_paths: set[str] | frozenset[str]
    ) -> bool:
        """True if a run with this freeze, whose torch freeze kept ``kept_paths``, shows
        the same fold step."""
        return freeze_key == self.freeze_key and frozenset(kept_paths) == self.kept_paths


class RunHost(Protocol):
    """What one run of freezing reads and writes on the pipeline that runs it."""

    loaded: LoadedModel
    module: torch.jit.ScriptModule
    registry: Mapping[str, PassInfo]
    steps: list[Step]
    warnings: list[str]
    cancelled: bool
    failed: bool
    #: each step is read before the next and its pictures not again (the CLI).
    read_in_order: bool
    #: the module being frozen: the frozen clone once the clean-up step has run.
    working: torch.jit.ScriptModule | None
    #: the input module's method graphs as first seen (one picture per method).
    initial_graphs: dict[str, LazyGraph]
    #: torch's freeze per preserved names, from the clean-up step.
    outcomes: dict[tuple[str, ...], TorchOutcome]
    #: an earlier run's inline and fold steps the caller offered, and this run's.
    offered_steps: PictureSteps | None
    picture_steps: PictureSteps | None

    def methods_for(self, plan: Plan) -> list[str]:
        """The methods torch optimizes and freezeview shows under ``plan``."""
        ...

    def module_paths(self) -> tuple[set[str], set[str]]:
        """The input module's attribute paths and all its paths."""
        ...

    def prepare_numerics(self, kept_paths: set[str], frozen: torch.jit.ScriptModule) -> None:
        """Guard the state sample inputs may change, and compute the reference outputs."""
        ...

    def step_numerics(
        self, graph: Callable[[], torch._C.Graph | None] | torch._C.Graph | None, self_module: Any
    ) -> tuple[Numerics | None, str]:
        """A forward graph's outputs compared with the reference, or why not."""
        ...

    def explanation(self, preserved: Sequence[str] | None = None) -> Explanation | None:
        """explain's verdicts for ``preserved`` (worked out once)."""
        ...

    def earlier_picture(self, step: str, method: str) -> GraphSnapshot | None:
        """An earlier run's snapshot of a picture-only step, if the caller offered one."""
        ...

    def take_outcome(self, preserved: Sequence[str]) -> TorchOutcome | None:
        """torch's freeze with ``preserved`` the caller made already, handed out once."""
        ...


class RunState:
    """State of one run of a pipeline."""

    def __init__(
        self,
        pipe: RunHost,
        plan: Plan,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> None:
        self.pipe = pipe
        self.plan = plan
        self.progress = progress
        self.cancel = cancel
        self.stopped = False
        self.methods = pipe.methods_for(plan)
        self.current: dict[str, LazyGraph] = {}
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

    def _add(self, step: Step) -> Step:
        self.pipe.steps.append(step)
        if step.graphs:
            self.current = dict(step.graphs)
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
