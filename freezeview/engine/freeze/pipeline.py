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
:class:`~freezeview.engine.graph.snapshot.GraphSnapshot`, node counts and notes (explain's
reasons for kept attributes, why a pass did not fire) are computed the first time
someone reads them, once, from any thread.

The engine knows nothing about who watches: :meth:`Pipeline.run` is an iterator of
:class:`Step` and takes a progress callback and a ``threading.Event`` to cancel.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from functools import partial
from typing import TYPE_CHECKING, Any

import torch

from ..graph import RECENT_LINES, GraphSnapshot
from ..load import LoadedModel, check_eval, load_model
from ..plumbing import PlanError, inputs_rejected, torch_cause
from ..reasons import TorchOutcome, release_clone
from .fold_picture import is_module_value, module_paths, resolve_attribute
from .lazy_graph import FULL_DIFF_LIMIT, LazyGraph, OnceGraphs, SnapshotMap
from .numerics import Numerics, compare_outputs
from .passes import (
    REGISTRY,
    PassInfo,
    default_passes,
)
from .pipeline_run import RunContext
from .plan import Plan
from .run_state import PictureSteps
from .sandbox import Sandbox, SandboxError
from .steps import FreezeResult, Progress, ProgressCallback, Step

if TYPE_CHECKING:  # verdicts imports the engine's loading too; only the type is needed here
    from ..reasons import Explanation

__all__ = [
    "FREEZE_STEPS",
    "FULL_DIFF_LIMIT",
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


class Pipeline:
    """The stepwise freeze of one module with one plan.

    Args:
        model: a :class:`LoadedModel`, a ScriptModule, or a path to a ``.pt`` file.
        plan: what to preserve and which passes to run (default: torch's plan).
        inputs: sample inputs for ``forward``; each step then reports its numerics.
        registry: the pass registry (tests inject failing passes here).

    The input module is never modified, and neither it nor the frozen module is ever
    run: freezing works on a clone that shares tensor storage with it, and every run on
    the sample inputs (numerics, timing) runs on a :class:`~.sandbox.Sandbox`, a
    private copy of the module's state and of the graph's constants. What is written
    from ``frozen_module`` is torch's freeze of the untouched input.
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
        model: LoadedModel | torch.jit.ScriptModule | str | os.PathLike[str],
        plan: Plan | None = None,
        inputs: Sequence[Any] | None = None,
        *,
        registry: Mapping[str, PassInfo] | None = None,
    ) -> None:
        if isinstance(model, (str, os.PathLike)):
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
        #: True when the caller reads each step (counts, notes) before asking for the
        #: next and never reads an earlier step's pictures again (the command line's
        #: table and JSON lines): the fold step may then fold the inline step's graph
        #: in place instead of copying it.
        self.read_in_order = False
        self._reference: Any = None
        self._reference_ready = False
        self._reference_error: str | None = None
        # Private copies that runs on the sample inputs write, by the module copied.
        self._sandboxes: dict[int, tuple[Any, Sandbox]] = {}
        self.working: torch.jit.ScriptModule | None = None
        # Per pipeline, not per run: the input module never changes.
        self.initial_graphs: dict[str, LazyGraph] = {}
        self._paths: tuple[set[str], set[str]] | None = None
        # explain's verdicts by preserved names: the fold step's notes and an export's
        # kept-attribute tooltips both need them, and on a large model one explain
        # costs about as much as freezing itself.
        self._explained: dict[tuple[str, ...], OnceGraphs] = {}
        self._explained_lock = threading.Lock()
        # torch's freeze per preserved names, from the freeze step (explain reuses it).
        self.outcomes: dict[tuple[str, ...], TorchOutcome] = {}
        # A freeze the caller made already (the app's explain), for the next freeze step.
        self._adopted: tuple[tuple[str, ...], TorchOutcome] | None = None
        # Snapshots an earlier run of the same module took, by (step name, method).
        self._earlier: dict[tuple[str, str], GraphSnapshot] = {}
        # An earlier run's inline and fold steps (offer_steps), and this run's own.
        self.offered_steps: PictureSteps | None = None
        self.picture_steps: PictureSteps | None = None

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
        yield from self._execute(progress, cancel)

    def run_all(self) -> list[Step]:
        """Run to the end and return all steps."""
        for _ in self.run():
            pass
        return self.steps

    def step(self, index: int) -> Step:
        """The step at ``index`` (negative indices count from the end)."""
        return self.steps[index]

    def release(self) -> None:
        """Free the frozen module and torch's freezes of this pipeline for good.

        torch keeps every frozen clone's graphs (and their folded constants) for as long
        as the loaded model lives (:func:`~freezeview.engine.reasons.release_clone`): a
        caller that freezes one loaded model again and again, as the app's re-runs do,
        calls this once it has read all it needs. ``frozen_module`` is None afterwards,
        and the steps' graphs must not be read any more (their snapshots taken before
        stay valid).
        """
        clones = {id(o.frozen): o.frozen for o in self.outcomes.values() if o.frozen is not None}
        if self._adopted is not None and self._adopted[1].frozen is not None:
            clones[id(self._adopted[1].frozen)] = self._adopted[1].frozen
        self._adopted = None
        for module in (self.working, self.frozen_module):
            if module is not None:
                clones[id(module._c)] = module._c
        self.outcomes.clear()
        self._explained.clear()
        # An offered step may outlive this pipeline (the next run shows it again) and
        # its notes still name this pipeline: nothing of other runs hangs on it then.
        self.offered_steps = self.picture_steps = None
        self._earlier = {}
        self.working = self.frozen_module = None
        self._sandboxes = {}
        # The steps' lazy parts hold the pipeline (and graphs): without these links the
        # whole run waits for a full collection of the cyclic garbage collector, which
        # a long-lived process (the app's engine) runs seldom.
        self.steps = []
        self.initial_graphs = {}
        self._reference = None
        released: list[Any] = []
        for clone in clones.values():
            if not any(clone == seen for seen in released):  # wrappers differ per access
                release_clone(clone, self.module)
                released.append(clone)

    def adopt(
        self,
        preserved: Sequence[str],
        outcome: TorchOutcome | None = None,
        explanation: Explanation | None = None,
    ) -> None:
        """Take torch's freeze and explain's verdicts the caller already has.

        The app explains the model, then runs the steps with the same preserved names:
        without this, the run would freeze the model again and explain it again for the
        fold step's notes, each about as costly as ``torch.jit.freeze`` itself.

        Args:
            preserved: the preserved attribute names both were made with (torch's
                default ``freeze_interfaces``).
            outcome: :func:`~freezeview.engine.reasons.torch_freeze.torch_outcome` of
                this pipeline's module with ``preserved``, not used by anything else: the
                next freeze step with these names takes its frozen clone as the working
                module (once), and :meth:`release` frees it.
            explanation: :func:`~freezeview.engine.reasons.verdicts.explain` of this
                pipeline's module with ``preserved`` (what :meth:`explanation` gives).
        """
        names = tuple(preserved)
        if outcome is not None:
            self._adopted = (names, outcome)
        if explanation is not None:
            with self._explained_lock:
                self._explained[names] = OnceGraphs(lambda: explanation)

    def offer_pictures(self, earlier: Mapping[tuple[str, str], GraphSnapshot]) -> None:
        """Snapshots of the picture-only freeze steps (``inline``, ``fold_attributes``)
        an earlier run of this pipeline's module took, by (step name, method).

        The app re-runs the same loaded model: a picture whose printout is the same as
        the earlier one's takes its snapshot instead of walking torch's nodes again.
        """
        self._earlier = dict(earlier)

    def offer_steps(self, earlier: PictureSteps | None) -> None:
        """An earlier run's inline and fold steps of this pipeline's module
        (:attr:`picture_steps` of that run's pipeline, read before its release): a run
        with the same freeze shows them again instead of inlining and folding anew, the
        fold step only where torch's freeze keeps the same attributes."""
        self.offered_steps = earlier

    def earlier_picture(self, step: str, method: str) -> GraphSnapshot | None:
        """What :meth:`offer_pictures` gave for ``step`` and ``method``."""
        return self._earlier.get((step, method))

    def take_outcome(self, preserved: Sequence[str]) -> TorchOutcome | None:
        """The adopted freeze for ``preserved``, handed out once (None if there is none)."""
        adopted, self._adopted = self._adopted, None
        if adopted is not None and adopted[0] == tuple(preserved):
            return adopted[1]
        if adopted is not None and adopted[1].frozen is not None:
            release_clone(adopted[1].frozen, self.module)  # nobody else will use it
        return None

    @property
    def done(self) -> bool:
        """True when the last run reached the end without failing or being cancelled."""
        return self.frozen_module is not None

    def torch_outcome(self, preserved: Sequence[str]) -> TorchOutcome | None:
        """torch's freeze of the input module from this run's freeze step, if it ran.

        Args:
            preserved: the preserved attribute names it was run with.

        Returns:
            The :class:`~freezeview.engine.reasons.torch_freeze.TorchOutcome`, or None when no
            run froze the module with these names (and torch's default interfaces).
        """
        return self.outcomes.get(tuple(preserved))

    def explanation(self, preserved: Sequence[str] | None = None) -> Explanation | None:
        """freezeview's explain of the input module with ``preserved`` (default: the plan's).

        Computed on first use and kept for the pipeline's life (the input module never
        changes), so the fold step's notes and whoever draws the kept attributes share
        one run. None when explain cannot say (its failure is not the pipeline's).

        Args:
            preserved: the preserved attribute names (as in ``Plan.preserved_attrs``).

        Returns:
            The :class:`~freezeview.engine.reasons.verdicts.Explanation`, or None.
        """
        names = tuple(self.plan.preserved_attrs if preserved is None else preserved)
        with self._explained_lock:
            once = self._explained.get(names)
            if once is None:
                outcome = self.outcomes.get(names)
                once = self._explained[names] = OnceGraphs(
                    partial(_explain_or_none, self.module, names, outcome)
                )
        return once.get()  # type: ignore[no-any-return]

    def step_graphs(self, step: Step) -> dict[str, torch._C.Graph]:
        """The torch graphs ``step`` shows, by method, while they are still held.

        Read it when the step has just been yielded (the measure stage does): a step's
        graphs may be released once later steps are read. Callers must not change them.

        Args:
            step: a step of this pipeline's current run.

        Returns:
            Method -> graph; empty for a failed step or released pictures.
        """
        graphs: dict[str, torch._C.Graph] = {}
        for method, picture in step.graphs.items():
            graph = picture.graph() if not picture.released else None
            if graph is not None:
                graphs[method] = graph
        return graphs

    def step_module(self, step: Step) -> torch.jit.ScriptModule | None:
        """The module a just-yielded step's graphs run on (bound to ``self``).

        The inline and fold pictures read the input module's attributes; torch's clean-up
        and every pass after it work on the frozen (working) module.
        """
        if step.kind == "freeze" and step.name != "cleanup":
            return self.module
        return self.working

    def restore_state(self) -> None:
        """Put every sandbox back as its module is (runs write only sandboxes)."""
        self._restore()

    def sandbox(self, module: Any) -> Sandbox:
        """The private copy runs of ``module`` (this pipeline's input or working
        module) use, made once and put back as the module is."""
        key = id(getattr(module, "_c", module))
        held = self._sandboxes.get(key)
        if held is None:
            held = self._sandboxes[key] = (module, Sandbox(module))
        else:
            held[1].restore()
        return held[1]

    def sandboxed_call(self, graph: torch._C.Graph, module: Any) -> Callable[[], Any]:
        """One forward of ``graph`` on the sample inputs, on ``module``'s sandbox: the
        call writes nothing the pipeline holds."""
        run = self.sandbox(module).function(graph)
        inputs = self.inputs or ()
        return lambda: run(*inputs)

    # --- the run ----------------------------------------------------------------------

    def _check_preserved(self, plan: Plan) -> None:
        cmod = self.module._c
        for name in plan.preserved_attrs:
            found = resolve_attribute(cmod, name)
            ok = (
                found is not None
                and is_module_value(found[0])
                and (found[0].hasattr(found[1]) or found[0]._has_method(found[1]))
            )
            if not ok:
                hint = ""
                try:
                    from ..graph import build_inventory

                    close = build_inventory(self.module).suggest(name)
                    hint = f" (did you mean {', '.join(close)}?)" if close else ""
                except Exception:
                    hint = ""
                raise PlanError(
                    f"cannot preserve {name!r}: the model has no attribute, submodule or "
                    f"method of that name{hint}."
                )

    def methods_for(self, plan: Plan) -> list[str]:
        """Methods torch optimizes and freezeview shows: forward + preserved methods."""
        cmod = self.module._c
        names = ["forward"] if cmod._has_method("forward") else []
        names += [n for n in plan.preserved_attrs if cmod._has_method(n) and n not in names]
        return names

    def module_paths(self) -> tuple[set[str], set[str]]:
        """The input module's attribute paths and all paths (computed once)."""
        if self._paths is None:
            self._paths = module_paths(self.module)
        return self._paths

    def _execute(
        self,
        progress: ProgressCallback | None,
        cancel: threading.Event | None,
    ) -> Iterator[Step]:
        self.steps = []
        self.frozen_module = None
        self.working = None
        # The lines this run's graphs print are parsed once for all its steps; lines the
        # last run printed are kept for it too (a re-run prints the same graphs).
        RECENT_LINES.new_generation()
        self.cancelled = False
        self.failed = False
        plan = self.plan
        ctx = RunContext(self, plan, progress, cancel)
        try:
            for step in ctx.freeze_phase():
                yield step
            if ctx.stopped:
                return
            for step in ctx.optimize_phase():
                yield step
            if ctx.stopped:
                return
            self.frozen_module = self.working
        finally:
            # The last step may still show the working module's own graphs; from now on
            # they belong to the caller (who may run optimize_for_inference on them).
            ctx.detach_all()

    # --- numerics ---------------------------------------------------------------------

    def prepare_numerics(self, kept_paths: set[str], frozen: torch.jit.ScriptModule) -> None:
        """Compute the reference outputs (once per pipeline), on the input's sandbox."""
        if self.inputs is None:
            return  # nothing will run
        if self._reference_ready or self._reference_error:
            return
        if not self.module._c._has_method("forward"):
            self._reference_error = "the model has no forward method"
            return
        try:
            call = self.sandboxed_call(self.module._c._get_method("forward").graph, self.module)
            with torch.no_grad():
                self._reference = call()
            self._reference_ready = True
        except SandboxError as exc:
            self._reference_error = f"not run ({exc})"
        except Exception as exc:
            raise inputs_rejected(exc, self.inputs) from exc
        finally:
            self._restore()

    def _restore(self) -> None:
        for _, box in self._sandboxes.values():
            box.restore()

    def step_numerics(
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
            with torch.no_grad():
                out = self.sandboxed_call(graph, self_module)()
        except Exception as exc:
            why = torch_cause(exc)
            return None, f"numerics not checked: this step's graph failed on the inputs ({why})"
        finally:
            self._restore()
        return compare_outputs(self._reference, out), ""


def _explain_or_none(
    module: torch.jit.ScriptModule, preserved: Sequence[str], outcome: TorchOutcome | None
) -> Any:
    """explain's :class:`~freezeview.engine.reasons.verdicts.Explanation`, or None if it fails."""
    try:
        from ..reasons import explain as run_explain

        return run_explain(module, preserved_attrs=list(preserved), outcome=outcome)
    except Exception:
        return None


def freeze(
    model_or_path: LoadedModel | torch.jit.ScriptModule | str | os.PathLike[str],
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
    if isinstance(model_or_path, (str, os.PathLike)):
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
