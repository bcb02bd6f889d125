"""The app's one door into the engine.

Every engine call the app makes goes through :class:`Session`; its methods block (torch
work) and are called from Textual thread workers, never from the event loop. The
session turns the engine's objects into the small, stable views the widgets draw
(:class:`AttrView`, :class:`StepView`, :class:`PassView`) so a widget never depends on
an engine class directly. Where an engine module is not available, the stand-ins in
:mod:`freezeview.ui.standin` keep the app usable.
"""

from __future__ import annotations

import contextlib
import importlib
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any

import torch

from ..engine.errors import BadInputError, FreezeviewError, PlanError
from ..engine.loading import LoadedModel, load_model
from ..engine.snapshot import GraphSnapshot, SourceLocation, snapshot_graph
from . import standin
from .views import AttrView, PassView, ReasonView, StepView

__all__ = ["AttrView", "PassView", "ReasonView", "Session", "StepView", "engine_module"]


def engine_module(name: str) -> ModuleType | None:
    """``freezeview.engine.<name>`` if it imports, else None (the stand-in is used)."""
    try:
        return importlib.import_module(f"freezeview.engine.{name}")
    except ImportError:
        return None


@dataclass
class Session:
    """One model opened in the app, and the plan the user is building.

    Args:
        path: the ``.pt`` file (or None when ``loaded`` is given).
        preserved: names for ``preserved_attrs``.
        passes: pass ids to run; None means the engine's default plan.
        inputs_file: sample inputs saved with ``torch.save`` (``--inputs``).
        input_shapes: shapes of random sample inputs (``--input-shape 1,3,224,224``).
        eval_mode: switch a training-mode module to eval mode (``--eval``).
        loaded: an already loaded model (tests, the Python API).
    """

    path: Path | None = None
    preserved: list[str] = field(default_factory=list)
    passes: list[str] | None = None
    inputs_file: Path | None = None
    input_shapes: list[str] = field(default_factory=list)
    eval_mode: bool = False
    loaded: LoadedModel | None = None
    inventory: Any = None
    _pipeline: Any = field(default=None, repr=False)
    _inputs: tuple[Any, ...] | None = field(default=None, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    #: ``.code`` of the frozen module at the end of the last run (None before).
    final_code: str | None = None
    #: Sentences from the last render or export (Graphviz fallbacks, ...).
    last_notes: list[str] = field(default_factory=list)

    # -- loading ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Display name of the model."""
        if self.loaded is not None:
            return self.loaded.name
        return self.path.name if self.path else "model"

    def load(self) -> LoadedModel:
        """Load the model file (blocking: call from a worker)."""
        if self.loaded is None:
            if self.path is None:
                raise BadInputError(
                    "no model given: pass a TorchScript file (freezeview MODEL.pt)."
                )
            self.loaded = load_model(self.path, eval_mode=self.eval_mode)
        elif self.eval_mode and self.loaded.module.training:
            self.loaded.module.eval()
        return self.loaded

    def first_snapshot(self) -> GraphSnapshot:
        """The loaded model's forward graph with calls inlined, before any freezing."""
        module = self._module()
        with _quiet():
            return snapshot_graph(standin.inlined_graph(module), "forward")

    def first_text(self) -> tuple[str, int]:
        """IR text and node count of the inlined forward graph (torch prints it in C++,
        much faster than taking a snapshot: the app shows this first)."""
        graph = standin.inlined_graph(self._module())
        count = sum(1 for _ in _walk_nodes(graph.block()))
        return str(graph), count

    def build_inventory(self) -> Any:
        """The module tree and every attribute (``engine.inventory``)."""
        from ..engine.inventory import build_inventory

        if self.inventory is None:
            self.inventory = build_inventory(self._module())
        return self.inventory

    def _module(self) -> Any:
        if self.loaded is None:
            self.load()
        assert self.loaded is not None
        return self.loaded.module

    # -- explain ---------------------------------------------------------------------
    def explain(self, preserved: Sequence[str] | None = None) -> list[AttrView]:
        """Every attribute's verdict under ``preserved`` (defaults to the session's)."""
        names = list(self.preserved if preserved is None else preserved)
        inventory = self.build_inventory()
        self._check_names(names)
        module = self._module()
        if module.training:
            raise PlanError(
                f"{self.name} holds a module in training mode; freezing needs eval mode: "
                "start freezeview with --eval."
            )
        real = engine_module("verdicts")
        with _quiet():
            if real is not None and hasattr(real, "explain"):
                explanation = real.explain(self.loaded, preserved_attrs=names)
            else:
                explanation = standin.standin_explain(module, names, inventory)
        views = []
        for verdict in explanation.attributes:
            views.append(
                AttrView(
                    path=verdict.path,
                    kind=str(getattr(verdict, "kind", "")),
                    type=str(getattr(verdict, "type", "")),
                    status=str(verdict.status),
                    reasons=tuple(_reason_view(r) for r in getattr(verdict, "reasons", ())),
                    preserved=_is_preserved(verdict.path, names),
                )
            )
        return views

    def _check_names(self, names: Sequence[str]) -> None:
        inventory = self.inventory
        if inventory is None:
            return
        known = set(inventory.names())
        for name in names:
            if name not in known:
                close = inventory.suggest(name) if hasattr(inventory, "suggest") else []
                hint = f" (did you mean {', '.join(close)}?)" if close else ""
                raise PlanError(f"{name!r} is not an attribute or method of the model{hint}.")

    # -- passes and steps ------------------------------------------------------------
    def available_passes(self) -> list[PassView]:
        """The passes the user can toggle, in the order torch runs them."""
        real = engine_module("passes")
        if real is not None:
            with contextlib.suppress(Exception):
                return _pass_views(real)
        return [PassView(pid, desc, on) for pid, desc, on, _b in standin.STANDIN_PASSES]

    def default_passes(self) -> list[str]:
        """Pass ids on by default."""
        return [p.id for p in self.available_passes() if p.default]

    def sample_inputs(self) -> tuple[Any, ...] | None:
        """Sample inputs from ``--inputs`` or ``--input-shape`` (None if neither)."""
        if self._inputs is not None or not (self.inputs_file or self.input_shapes):
            return self._inputs
        real = engine_module("numerics")
        if real is not None and hasattr(real, "load_inputs"):
            if self.inputs_file is not None:
                self._inputs = tuple(real.load_inputs(self.inputs_file))
            else:
                self._inputs = tuple(real.random_inputs(self.input_shapes))
            return self._inputs
        if self.inputs_file is not None:
            try:
                data = torch.load(self.inputs_file, weights_only=True)
            except Exception as exc:
                raise BadInputError(
                    f"{self.inputs_file} cannot be read as sample inputs ({exc})."
                ) from exc
            self._inputs = tuple(data) if isinstance(data, (list, tuple)) else (data,)
        else:
            gen = torch.Generator().manual_seed(0)
            shapes = []
            for text in self.input_shapes:
                try:
                    shapes.append(tuple(int(s) for s in text.split(",") if s.strip()))
                except ValueError as exc:
                    raise BadInputError(
                        f"--input-shape {text!r} is not a list of integers like 1,3,224,224."
                    ) from exc
            self._inputs = tuple(torch.randn(*s, generator=gen) for s in shapes)
        return self._inputs

    def run_steps(
        self,
        preserved: Sequence[str],
        passes: Sequence[str],
        cancel: threading.Event | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> Iterator[StepView]:
        """Freeze with the given plan one step at a time (blocking generator)."""
        module = self._module()
        self._check_names(preserved)
        inputs = self.sample_inputs()
        real = engine_module("pipeline")
        with _quiet():
            if real is not None and hasattr(real, "Pipeline"):
                plan = _engine_plan(real, preserved, passes)
                pipeline = real.Pipeline(self.loaded, plan, inputs=inputs)
                self._pipeline = pipeline
                steps = pipeline.run(progress=progress, cancel=cancel)
            else:
                plan = standin.StandinPlan(tuple(preserved), tuple(passes))
                steps = standin.standin_steps(module, plan, inputs, cancel, progress)
            previous: GraphSnapshot | None = None
            self.final_code = None
            for step in steps:
                if step.snapshot is None and previous is None:
                    continue  # no forward graph to show yet
                view = _step_view(step, previous)
                previous = view.snapshot
                yield view
            frozen = getattr(self._pipeline, "frozen_module", None) if real else None
            if frozen is not None and hasattr(frozen, "code"):
                self.final_code = str(frozen.code)

    # -- text, pictures, files -------------------------------------------------------
    def diff_text(self, before: GraphSnapshot, after: GraphSnapshot, a: str, b: str) -> str:
        """Unified IR diff between two snapshots."""
        real = engine_module("diff")
        if real is not None and hasattr(real, "unified_ir_diff"):
            return str(real.unified_ir_diff(before, after, before_label=a, after_label=b))
        return standin.text_diff(before.text, after.text, a, b)

    def render_step(
        self, before: GraphSnapshot | None, after: GraphSnapshot, out_dir: Path, stem: str
    ) -> list[Path]:
        """Write the step's graph (and its diff against ``before``) as SVG into ``out_dir``."""
        out_dir.mkdir(parents=True, exist_ok=True)
        real = engine_module("render")
        written: list[Path] = []
        with _quiet():
            if real is not None and hasattr(real, "render_snapshot"):
                self.last_notes = []
                written.extend(_render_real(real, before, after, out_dir, stem, self.last_notes))
            else:
                written.append(standin.standin_render(after, out_dir / f"{stem}.svg"))
                if before is not None:
                    written.append(standin.standin_render(before, out_dir / f"{stem}-before.svg"))
        if before is not None:
            from ..engine.atomic import write_text

            diff = self.diff_text(before, after, "before", stem)
            written.append(write_text(out_dir / f"{stem}.diff", diff))
        return written

    def export(self, out_dir: Path, preserved: Sequence[str], passes: Sequence[str]) -> list[Path]:
        """Write everything ``freezeview export`` writes into ``out_dir``."""
        real = engine_module("export")
        out_dir.mkdir(parents=True, exist_ok=True)
        if real is not None and hasattr(real, "export"):
            with _quiet():
                result = _call_export(real, self, out_dir, preserved, passes)
            return (
                sorted(p for p in out_dir.rglob("*") if p.is_file()) if result is None else result
            )
        # Stand-in export: the first and last graphs, their diff and the IR texts.
        steps = list(self.run_steps(preserved, passes))
        if not steps:
            raise PlanError("nothing to export: freezing produced no steps.")
        first, last = steps[0].snapshot, steps[-1].snapshot
        from ..engine.atomic import write_text

        written = [
            write_text(out_dir / "before.ir", first.text),
            write_text(out_dir / "after.ir", last.text),
            write_text(out_dir / "ir.diff", self.diff_text(first, last, "before", "after")),
        ]
        with _quiet():
            written.append(standin.standin_render(first, out_dir / "before.svg"))
            written.append(standin.standin_render(last, out_dir / "after.svg"))
        return written


def _walk_nodes(block: Any) -> Iterator[Any]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _walk_nodes(sub)


def _is_preserved(path: str, names: Sequence[str]) -> bool:
    return any(path == n or path.startswith(n + ".") for n in names)


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, SourceLocation):
        return f"{value.short()}  {value.text}".strip()
    if hasattr(value, "text") and hasattr(value, "kind") and not isinstance(value, str):
        return str(value.text)
    return str(value)


def _reason_view(reason: Any) -> ReasonView:
    return ReasonView(
        code=str(getattr(reason, "code", "")),
        message=str(getattr(reason, "message", reason)),
        node=_text(getattr(reason, "node", None)),
        source=_text(getattr(reason, "source", None)),
        method=_text(getattr(reason, "method", None)),
    )


def _pass_views(real: ModuleType) -> list[PassView]:
    registry = real.REGISTRY
    defaults = set(real.default_passes())
    views = []
    for pid, info in registry.items():
        group = str(getattr(info, "group", ""))
        # The guard step is torch's whole call run as a check, not a user's choice.
        if group == "guard" or not getattr(info, "available", True):
            continue
        label = getattr(info, "title", "") or getattr(info, "description", "")
        views.append(PassView(str(pid), str(label), pid in defaults, group))
    if not views:
        raise LookupError("empty pass registry")
    return views


def _engine_plan(real: ModuleType, preserved: Sequence[str], passes: Sequence[str]) -> Any:
    registry = getattr(engine_module("passes"), "REGISTRY", {})
    # Ticking an optimize_for_inference pass is asking for optimize_for_inference.
    inference = any(getattr(registry.get(p), "group", "") == "inference" for p in passes)
    base = real.Plan.default(tuple(preserved), optimize_for_inference=inference)
    return base.replace(passes=tuple(passes))


def _numerics_text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, (int, float)):
        return f"{value:.2g}"
    if hasattr(value, "max_abs"):
        text = "exact" if getattr(value, "exact", False) else f"{float(value.max_abs):.2g}"
        return text + ("" if getattr(value, "allclose", True) else " ✗")
    return str(value)


def _step_view(step: Any, previous: GraphSnapshot | None) -> StepView:
    added = getattr(step, "nodes_added", getattr(step, "added", None))
    removed = getattr(step, "nodes_removed", getattr(step, "removed", None))
    changed_nodes = getattr(step, "nodes_changed", getattr(step, "changed_nodes", None))
    counts = getattr(step, "counts", None)
    if isinstance(counts, dict):
        added = counts.get("added", added)
        removed = counts.get("removed", removed)
        changed_nodes = counts.get("changed", changed_nodes)
    snapshot = step.snapshot if step.snapshot is not None else previous
    assert snapshot is not None  # run_steps skips steps with nothing to show
    return StepView(
        index=int(step.index),
        name=str(step.name),
        title=str(getattr(step, "title", step.name)),
        snapshot=snapshot,
        changed=bool(getattr(step, "changed", True)),
        added=int(added or 0)
        if not isinstance(added, (list, tuple, set, frozenset))
        else len(added),
        removed=int(removed or 0)
        if not isinstance(removed, (list, tuple, set, frozenset))
        else len(removed),
        changed_nodes=int(changed_nodes or 0)
        if not isinstance(changed_nodes, (list, tuple, set, frozenset, dict))
        else len(changed_nodes),
        seconds=float(getattr(step, "seconds", 0.0) or 0.0),
        notes=tuple(str(n) for n in (getattr(step, "notes", ()) or ())),
        numerics=_numerics_text(getattr(step, "numerics", None)),
        error=str(getattr(step, "error", "") or ""),
        code=getattr(step, "code", None),
        kind=str(getattr(step, "kind", "")),
    )


def _render_real(
    real: ModuleType,
    before: GraphSnapshot | None,
    after: GraphSnapshot,
    out_dir: Path,
    stem: str,
    notes: list[str],
) -> list[Path]:
    written: list[Path] = []
    result = real.render_snapshot(after, out_dir / f"{stem}.svg", title=stem)
    written.append(Path(result.path))
    notes.extend(getattr(result, "notes", []) or [])
    if before is not None:
        from ..engine.diff import diff_snapshots

        diff = diff_snapshots(before, after)
        result = real.render_diff(diff, out_dir / f"{stem}-diff.svg", title=f"{stem} (diff)")
        written.append(Path(result.path))
        notes.extend(getattr(result, "notes", []) or [])
    return written


def _call_export(
    real: ModuleType,
    session: Session,
    out_dir: Path,
    preserved: Sequence[str],
    passes: Sequence[str],
) -> list[Path] | None:
    pipeline = engine_module("pipeline")
    plan = _engine_plan(pipeline, preserved, passes) if pipeline is not None else None
    result = real.export(session.loaded, out_dir, plan=plan, force=True)
    session.last_notes = list(getattr(result, "notes", []) or [])
    files = getattr(result, "files", None)
    return [Path(f) for f in files] if files is not None else None


@contextlib.contextmanager
def _quiet() -> Iterator[None]:
    # torch warns (DeprecationWarning) on freeze and friends. warnings.catch_warnings()
    # is not thread-safe, and these calls run in worker threads, so the app instead
    # routes every warning to its own list (FreezeviewApp.record_warning); this marks
    # the calls that warn.
    yield


def timed(fn: Callable[[], Any]) -> tuple[Any, float]:
    """Run ``fn`` and return (result, seconds)."""
    start = time.perf_counter()
    return fn(), time.perf_counter() - start


# Re-exported for callers that catch engine failures in one place.
EngineError = FreezeviewError
