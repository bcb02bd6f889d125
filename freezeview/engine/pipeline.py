"""Run ``torch.jit.freeze`` as a sequence of visible steps.

``torch.jit.freeze`` is one opaque call. freezeview runs the same work one step at a
time and takes a snapshot after each, so a user sees what every step did to the graph
and to the numbers, can choose which passes run, and still gets exactly torch's result:

1. **freeze phase** (kind ``freeze``): *inline* (a copy of each preserved method with
   ``torch._C._jit_pass_inline`` applied), *fold attributes* (that inlined copy with
   every attribute torch folded replaced by its constant -- a picture built by
   freezeview, shown so the user sees the folding before torch tidies up) and
   *clean-up* (the real ``torch._C._freeze_module`` result: constant propagation,
   dead-code elimination, unused attributes and methods removed).
2. **optimization phase** (kind ``optimize``): every pass of the plan on the frozen
   module's graphs, in torch's order; consecutive loop passes repeat until a whole
   round changes nothing, each call its own step.
3. **inference phase** (kind ``inference``): the ``optimize_for_inference`` passes,
   when asked.

The engine knows nothing about who watches: :meth:`Pipeline.run` is an iterator of
:class:`Step` and takes a progress callback and a ``threading.Event`` to cancel.
"""

from __future__ import annotations

import dataclasses
import re
import threading
import time
import warnings
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import BadInputError, PlanError
from .loading import LoadedModel, check_eval, load_model
from .numerics import Numerics, StateGuard, compare_outputs, run_graph
from .passes import (
    REGISTRY,
    PassInfo,
    default_passes,
    guard_info,
    needs_guard,
)
from .snapshot import GraphSnapshot, snapshot_graph

__all__ = [
    "FREEZE_STEPS",
    "FreezeResult",
    "Pipeline",
    "Plan",
    "Progress",
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


@dataclass(frozen=True, eq=False)
class Step:
    """One step of the pipeline, as a value.

    Attributes:
        index: position in the pipeline (0 = inline).
        name: ``inline``, ``fold_attributes``, ``cleanup`` or a pass id.
        title: a short label for people (``conv -> batchnorm (round 2)``).
        kind: ``freeze``, ``optimize`` or ``inference``.
        snapshot: the ``forward`` graph after the step (None if there is no forward).
        snapshots: every method graph shown after the step, by method name.
        changed: True if the step changed any graph.
        nodes_added, nodes_removed, nodes_changed: node counts from the diff with the
            previous step (summed over methods).
        seconds: wall time of the step's torch work.
        notes: sentences for people: what changed, or why nothing did.
        numerics: output difference versus the unfrozen module, or None when no sample
            inputs were given ("numerics not checked").
        error: the failure of this step (the pipeline stopped here), or None.
        round: the loop round, for loop passes.
        folded: attribute paths folded into constants (``fold_attributes`` only).
        kept: attribute paths that stayed module attributes (``fold_attributes`` only).
    """

    index: int
    name: str
    title: str
    kind: str
    snapshot: GraphSnapshot | None
    snapshots: Mapping[str, GraphSnapshot]
    changed: bool
    nodes_added: int = 0
    nodes_removed: int = 0
    nodes_changed: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    numerics: Numerics | None = None
    error: str | None = None
    round: int | None = None
    folded: tuple[str, ...] = ()
    kept: tuple[str, ...] = ()

    @property
    def ok(self) -> bool:
        """True unless the step failed."""
        return self.error is None


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


def _graph_counts(before: GraphSnapshot | None, after: GraphSnapshot) -> tuple[int, int, int, str]:
    """Added, removed, changed node counts and a one-line summary."""
    if before is None:
        return after.node_count, 0, 0, f"+{after.node_count} added"
    if max(before.node_count, after.node_count) <= FULL_DIFF_LIMIT:
        from .diff import diff_snapshots

        d = diff_snapshots(before, after)
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


_MANGLE_RE = re.compile(r"___torch_mangle_\d+\.")


def _ir_key(text: str) -> str:
    """IR text without torch's per-clone type mangling.

    Each freeze clones the module's class type under a new mangled name, so the same
    graph frozen twice (a rerun) prints ``___torch_mangle_4`` once and ``_7`` the next
    time; whether a step changed anything is judged without that.
    """
    return _MANGLE_RE.sub("", text)


def _walk(block: torch._C.Block) -> Iterator[torch._C.Node]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _walk(sub)


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


class Pipeline:
    """The stepwise freeze of one module with one plan.

    Args:
        model: a :class:`LoadedModel`, a ScriptModule, or a path to a ``.pt`` file.
        plan: what to preserve and which passes to run (default: torch's plan).
        inputs: sample inputs for ``forward``; each step then reports its numerics.
        registry: the pass registry (tests inject failing passes here).

    The input module is never modified: freezing works on a clone that shares tensor
    storage with it, and running sample inputs restores any state a run changes.

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
        self._initial: dict[str, GraphSnapshot] | None = None

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
        for step in ctx.freeze_phase():
            yield step
        if ctx.stopped:
            return
        for step in ctx.optimize_phase():
            yield step
        if ctx.stopped:
            return
        self.frozen_module = self._working

    # --- numerics ---------------------------------------------------------------------

    def _prepare_numerics(self, kept_paths: set[str], frozen: torch.jit.ScriptModule) -> None:
        """Guard state and compute the reference outputs (once per pipeline)."""
        self._guards = [StateGuard(self.module, kept_paths), StateGuard(frozen, kept_paths)]
        if self.inputs is None or self._reference_ready or self._reference_error:
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
        self, graph: torch._C.Graph | None, self_module: Any
    ) -> tuple[Numerics | None, str]:
        """Numerics of a forward graph on the sample inputs, and a note if impossible."""
        if self.inputs is None:
            return None, ""
        if self._reference_error:
            return None, f"numerics not checked: {self._reference_error}"
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
        self.current: dict[str, GraphSnapshot] = {}

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
        if step.snapshots:
            self.current = dict(step.snapshots)
        if step.error is not None:
            self.pipe.failed = True
            self.stopped = True
        return step

    def _counts(
        self, before: Mapping[str, GraphSnapshot], after: Mapping[str, GraphSnapshot]
    ) -> tuple[int, int, int, list[str]]:
        added = removed = changed = 0
        notes = []
        for method, snap in after.items():
            prev = before.get(method)
            if prev is not None and _ir_key(prev.text) == _ir_key(snap.text):
                continue
            a, r, c, summary = _graph_counts(prev, snap)
            added, removed, changed = added + a, removed + r, changed + c
            notes.append(summary if method == "forward" else f"{method}: {summary}")
        return added, removed, changed, notes

    # --- freeze phase -----------------------------------------------------------------

    def freeze_phase(self) -> Iterator[Step]:
        pipe, plan = self.pipe, self.plan
        cmod = pipe.module._c
        if pipe._initial is None:
            pipe._initial = {
                m: snapshot_graph(self._method_graph(cmod, m), m) for m in self.methods
            }
        initial = pipe._initial

        # 1. inline
        if not self._announce("inline", _FREEZE_TITLES["inline"], "freeze"):
            return
        start = time.perf_counter()
        inlined: dict[str, torch._C.Graph] = {}
        for m in self.methods:
            g = self._method_graph(cmod, m).copy()
            torch._C._jit_pass_inline(g)
            inlined[m] = g
        seconds = time.perf_counter() - start
        old = self._reuse("inline", None)
        if old is not None:
            step = old
        else:
            snaps = {m: snapshot_graph(g, m) for m, g in inlined.items()}
            a, r, c, notes = self._counts(initial, snaps)
            changed = any(initial[m].text != snaps[m].text for m in snaps)
            if not changed:
                notes = ["nothing to inline: the methods call no other methods or functions"]
            step = Step(
                0,
                "inline",
                _FREEZE_TITLES["inline"],
                "freeze",
                snaps.get("forward"),
                snaps,
                changed,
                a,
                r,
                c,
                seconds,
                tuple(notes),
            )
        # freeze itself (torch's work) happens now: the fold step needs to know what
        # torch kept, and the guard for numerics needs it before any run.
        start = time.perf_counter()
        frozen: torch.jit.ScriptModule | None = None
        freeze_error: str | None = None
        try:
            with warnings.catch_warnings():
                warnings.simplefilter("ignore")
                cpp = torch._C._freeze_module(
                    cmod, list(plan.preserved_attrs), plan.freeze_interfaces
                )
            frozen = torch.jit.RecursiveScriptModule(cpp)
            torch.jit.RecursiveScriptModule._finalize_scriptmodule(frozen)
        except Exception as exc:
            freeze_error = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
        freeze_seconds = time.perf_counter() - start
        kept_paths = self._kept_paths(frozen) if frozen is not None else set()
        if frozen is not None:
            pipe._prepare_numerics(kept_paths, frozen)
        if old is None:
            num, note = pipe._numerics(inlined.get("forward"), pipe.module)
            step = dataclasses.replace(
                step, numerics=num, notes=step.notes + ((note,) if note else ())
            )
            yield self._add(step)
        else:
            self._add(step)

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
                    None,
                    {},
                    False,
                    seconds=freeze_seconds,
                    error=f"torch refused to freeze the model: {freeze_error}",
                )
            )
            return
        else:
            before = dict(self.current)
            snaps = {
                m: snapshot_graph(self._method_graph(frozen._c, m), m)
                for m in self.methods
                if frozen._c._has_method(m)
            }
            a, r, c, notes = self._counts(before, snaps)
            dropped = sorted(
                p for p in self._attribute_paths(pipe.module) if p not in self._all_paths(frozen)
            )
            notes.append(
                f"{len(kept_paths)} attribute(s) kept on the frozen module; "
                f"{len(dropped)} attribute or submodule path(s) removed"
            )
            num, note = pipe._numerics(
                self._method_graph(frozen._c, "forward") if "forward" in snaps else None, frozen
            )
            if note:
                notes.append(note)
            yield self._add(
                Step(
                    2,
                    "cleanup",
                    _FREEZE_TITLES["cleanup"],
                    "freeze",
                    snaps.get("forward"),
                    snaps,
                    True,
                    a,
                    r,
                    c,
                    freeze_seconds,
                    tuple(notes),
                    num,
                )
            )
        pipe._working = frozen

    @staticmethod
    def _method_graph(cmod: torch._C.ScriptModule, method: str) -> torch._C.Graph:
        return cmod._get_method(method).graph

    @staticmethod
    def _all_paths(module: Any) -> set[str]:
        cmod = getattr(module, "_c", module)
        return set(dict(torch._C._jit_debug_module_iterators(cmod)["named_attributes_r"]))  # type: ignore[attr-defined]

    @classmethod
    def _attribute_paths(cls, module: Any) -> set[str]:
        cmod = getattr(module, "_c", module)
        return {
            path
            for path, value in torch._C._jit_debug_module_iterators(cmod)[  # type: ignore[attr-defined]
                "named_attributes_r"
            ]
            if not _is_module(value)
        }

    def _kept_paths(self, frozen: torch.jit.ScriptModule) -> set[str]:
        return self._attribute_paths(frozen)

    def _fold_step(
        self, inlined: dict[str, torch._C.Graph], kept_paths: set[str], freeze_error: str | None
    ) -> Step:
        """The inlined graphs with every attribute torch folded replaced by a constant."""
        pipe = self.pipe
        start = time.perf_counter()
        folded: set[str] = set()
        kept: set[str] = set()
        unshown: set[str] = set()
        graphs: dict[str, torch._C.Graph] = {}
        cmod = pipe.module._c
        for m, g in inlined.items():
            g2 = g.copy()
            if freeze_error is None:
                f, k, u = _fold_graph(g2, cmod, kept_paths)
                folded |= f
                kept |= k
                unshown |= u
            graphs[m] = g2
        snaps = {m: snapshot_graph(g, m) for m, g in graphs.items()}
        seconds = time.perf_counter() - start
        a, r, c, notes = self._counts(self.current, snaps)
        if freeze_error is not None:
            return Step(
                1,
                "fold_attributes",
                _FREEZE_TITLES["fold_attributes"],
                "freeze",
                snaps.get("forward"),
                snaps,
                False,
                seconds=seconds,
                error=f"torch refused to freeze the model: {freeze_error}",
            )
        notes.insert(0, f"{len(folded)} attribute(s) folded into constants, {len(kept)} kept")
        if kept:
            notes.extend(self._kept_reasons(sorted(kept)))
        if unshown:
            notes.append(
                "folded by torch but shown as attribute reads here (no constant form in "
                "Python): " + ", ".join(sorted(unshown)[:8])
            )
        num, note = pipe._numerics(graphs.get("forward"), pipe.module)
        if note:
            notes.append(note)
        return Step(
            1,
            "fold_attributes",
            _FREEZE_TITLES["fold_attributes"],
            "freeze",
            snaps.get("forward"),
            snaps,
            bool(folded),
            a,
            r,
            c,
            seconds,
            tuple(notes),
            num,
            folded=tuple(sorted(folded)),
            kept=tuple(sorted(kept)),
        )

    def _kept_reasons(self, kept: list[str]) -> list[str]:
        """One note per kept attribute, with explain's reason when explain is there."""
        reasons: dict[str, str] = {}
        try:
            from .verdicts import explain as run_explain

            verdicts = run_explain(
                self.pipe.module, preserved_attrs=list(self.plan.preserved_attrs)
            )
            for path in kept:
                verdict = verdicts.by_path(path)
                if verdict is not None and verdict.reasons:
                    reasons[path] = verdict.reasons[0].message
        except Exception:
            reasons = {}
        return [f"kept {p}: {reasons[p]}" if p in reasons else f"kept {p}" for p in kept[:20]] + (
            [f"... and {len(kept) - 20} more kept"] if len(kept) > 20 else []
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
                any_change = False
                for pid in ids:
                    yield from self._pass_step(reg[pid], round_)
                    if self.stopped:
                        return
                    any_change |= self.pipe.steps[-1].changed
                if not any_change:
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
        texts = {m: _ir_key(str(g)) for m, g in graphs.items()}
        changed_methods = [
            m for m in graphs if m not in before or _ir_key(before[m].text) != texts[m]
        ]
        changed = bool(changed_methods)
        old = self._reuse(info.id, round_)
        if old is not None and old.changed == changed and error is None:
            self._add(old)
            return
        snaps = dict(before)
        for m in changed_methods:
            snaps[m] = snapshot_graph(graphs[m], m)
        notes: list[str] = []
        a = r = c = 0
        if changed:
            a, r, c, notes = self._counts(before, snaps)
        elif error is None:
            why = info.why_not(before.get("forward") or next(iter(before.values()), None))
            notes.append(f"did not fire: {why}")
        num: Numerics | None = None
        if error is None:
            prev = pipe.steps[-1].numerics if pipe.steps else None
            if changed or prev is None:
                num, note = pipe._numerics(graphs.get("forward"), working)
                if note:
                    notes.append(note)
            else:
                num = prev
        elif not changed:
            snaps = before
        yield self._add(
            Step(
                len(pipe.steps),
                info.id,
                title,
                info.kind,
                snaps.get("forward"),
                snaps,
                changed,
                a,
                r,
                c,
                seconds,
                tuple(notes),
                num,
                error,
                round_,
            )
        )


def _fold_graph(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule, kept_paths: set[str]
) -> tuple[set[str], set[str], set[str]]:
    """Replace each folded attribute read in ``graph`` by a constant, as torch does.

    An attribute read is a chain of ``prim::GetAttr`` from ``self``; its dotted path is
    folded unless it survives on the frozen module (``kept_paths``). The constant is
    the attribute's current value (tensors detached, never copied), named
    ``self.<path>`` like torch's; the reads left without users are removed.

    Returns:
        ``(folded, kept, unshown)`` paths; ``unshown`` were folded by torch but have no
        constant form freezeview can insert from Python.
    """
    nodes = list(_walk(graph.block()))
    top = list(graph.block().nodes())
    if not top:
        return set(), set(), set()
    self_value = next(iter(graph.inputs()))
    paths: dict[torch._C.Value, str] = {self_value: ""}
    constants: dict[str, torch._C.Value] = {}
    folded: set[str] = set()
    kept: set[str] = set()
    unshown: set[str] = set()
    touched: set[int] = set()
    for node in nodes:
        if node.kind() != "prim::GetAttr":
            continue
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
            touched.add(id(node))
            continue
        if path in kept_paths:
            kept.add(path)
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
        touched.add(id(node))
        folded.add(path)
    # Remove the reads this fold left without users (deepest first, so chains unwind);
    # other dead code stays for the clean-up step to remove, as torch does.
    for node in reversed(nodes):
        if id(node) in touched and not node.output().uses():
            node.destroy()
    return folded, kept, unshown


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
