"""Why each attribute is, or is not, inlined by ``torch.jit.freeze``.

freezeview answers, for every attribute of a ScriptModule, what freezing will do with it:

* ``inlined`` - a preserved method reads it and freezing folds it into the graph as a
  constant;
* ``kept`` - it stays a module attribute, with the precise reason (a ``prim::SetAttr``, an
  in-place writer found by alias analysis, a name in ``preserved_attrs``, ...);
* ``dropped`` - it disappears because nothing that survives freezing reads it.

The verdicts follow torch's own algorithm (``AttributePropagator`` in
``torch/csrc/jit/passes/freeze_module.cpp``) step by step on copies of the method
graphs: inline every preserved method; record the attributes that are assigned or
written in place (alias analysis with frozen semantics) across *all* preserved methods
before anything is folded; fold what may be folded; let torch's constant propagation and
dead-code elimination run; then keep exactly the attribute slots that a surviving
``prim::GetAttr``, a mutation or ``preserved_attrs`` asks for, per TorchScript class
type. The model itself is never touched. The test-suite checks every verdict against
what the real ``torch.jit.freeze`` leaves on the frozen module.
"""

from __future__ import annotations

import contextlib
import os
import time
import weakref
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch

from ..graph import (
    Inventory,
    build_inventory,
    frozen_contents,
    raw_module,
)
from ..load import LoadedModel, check_eval, load_model
from ..plumbing import BadInputError, PlanError, collector_paused
from .agreement import settle
from .constant_writes import constant_writes, mark_written_constants
from .module_objects import ModuleView
from .refusals import torch_refusal
from .replay import FreezeReplay
from .torch_freeze import TorchOutcome, release_clone, torch_outcome
from .torch_paths import canonical_paths, statuses_by_path
from .verdict_reasons import VerdictBuilder
from .verdict_values import (
    REASON_CODES,
    STATUSES,
    AttributeVerdict,
    Disagreement,
    Explanation,
    Reason,
)

__all__ = [
    "REASON_CODES",
    "STATUSES",
    "AttributeVerdict",
    "Disagreement",
    "Explanation",
    "Reason",
    "explain",
    "torch_statuses_only",
]


def _as_loaded(model: Any) -> LoadedModel:
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, str | os.PathLike):
        return load_model(Path(model))
    if isinstance(model, torch.jit.ScriptModule):
        return LoadedModel.from_module(model)
    raise BadInputError(
        f"{type(model).__name__} is not a TorchScript module or a path to one: "
        "script or trace it first (torch.jit.script / torch.jit.trace)."
    )


def explain(
    model: Any,
    preserved_attrs: Iterable[str] = (),
    *,
    methods: Iterable[str] = (),
    freeze_interfaces: bool = True,
    outcome: TorchOutcome | None = None,
    release: bool = True,
    pause: Callable[[], None] | None = None,
) -> Explanation:
    """Say, for every attribute, whether ``torch.jit.freeze`` inlines, keeps or drops it.

    Args:
        model: a ``torch.jit.ScriptModule``, a :class:`LoadedModel`, or a path to a
            TorchScript file.
        preserved_attrs: as for ``torch.jit.freeze``: attribute, submodule or method
            names (dotted names reach into submodules).
        methods: more methods to preserve (the same as naming them in preserved_attrs).
        freeze_interfaces: fold through module interfaces, as ``torch.jit.freeze`` does.
        outcome: torch's freeze of this very model and plan, when the caller already ran
            :func:`~freezeview.engine.reasons.torch_freeze.torch_outcome` (the stepwise
            pipeline does); otherwise explain runs it.
        release: empty the graphs of the frozen clone explain made once its statuses
            are read (:func:`~.torch_freeze.release_clone`: torch would keep them as long
            as the model lives). False leaves them to the process's end, for a command
            that exits next.

    Returns:
        An :class:`Explanation` with one :class:`AttributeVerdict` per attribute path.

    Raises:
        PlanError: unknown preserved name (with the closest names), a training-mode
            module, or a module torch cannot freeze.

    Example::

        exp = explain(torch.jit.script(MyModule().eval()), preserved_attrs=["version"])
        for verdict in exp.with_status("kept"):
            print(verdict.path, verdict.reasons[0].message)
    """
    with collector_paused():
        return _explain(model, preserved_attrs, methods, freeze_interfaces, outcome, release, pause)


# A loaded model's module tree and its attribute lists, by module: the app explains the
# same loaded model again at every toggle of a preserved attribute, and listing the tree
# is linear in the model. Nothing changes a loaded model's tree.
_INVENTORIES: weakref.WeakKeyDictionary[Any, tuple[Inventory, dict[int, Any]]] = (
    weakref.WeakKeyDictionary()
)


# A loaded model's module objects and how its attribute paths are named, by module, for
# torch's statuses alone (torch_statuses_only, at every toggle in the app). Only the
# tree's shape is read from them there, as from the inventory above; explain's replay,
# which reads the attributes' values, makes its own.
_NAMES: weakref.WeakKeyDictionary[Any, tuple[ModuleView, dict[str, bool], dict[str, str]]] = (
    weakref.WeakKeyDictionary()
)


def _names_of(
    module: Any, cmod: Any, inventory: Inventory, iterators: dict[int, Any]
) -> tuple[ModuleView, dict[str, bool], dict[str, str]]:
    """The module objects of ``module``, its attribute paths (whether each is a
    submodule) and each path's canonical name, made once per loaded module."""
    try:
        found = _NAMES.get(module)
    except TypeError:  # not weakly referable: made every time
        found = None
    if found is None:
        view = ModuleView(cmod, iterators)
        paths = inventory_paths(inventory)
        found = (view, paths, canonical_paths(view, paths))
        with contextlib.suppress(TypeError):
            _NAMES[module] = found
    return found


def carry_inventory(fresh: Any, old: Any) -> bool:
    """Let ``fresh``, the model file of ``old`` loaded again, use the module tree listed
    for ``old`` (the same file: the same tree and attributes). Its explains then neither
    list the tree again (linear in the model) nor hold a second copy of it beside the
    explanations made of ``old`` (one more for every reload).

    When torch's statuses were read against ``old`` (:func:`torch_statuses_only`),
    ``fresh``'s module objects and canonical names are made now too: called before
    ``fresh`` is put in use (the app's engine does it in its reload thread), the first
    toggle after a reload then waits for torch's freeze alone.
    Returns False when nothing was listed for ``old``."""
    try:
        found = _INVENTORIES.get(old)
        if found is None:
            return False
        # The attribute lists read while listing are old's modules': fresh reads its own.
        carried = _INVENTORIES[fresh] = (found[0], {})
        named = _NAMES.get(old) is not None
    except TypeError:  # not weakly referable: listed at every explain anyway
        return False
    if named:
        # Never a reason not to reload: what fails here is made (and said) at the toggle.
        with contextlib.suppress(Exception):
            _names_of(fresh, raw_module(fresh), *carried)
    return True


def _inventory_of(module: Any) -> tuple[Inventory, dict[int, Any]]:
    """The module tree of ``module`` and the attribute lists read while listing it,
    listed once per loaded module."""
    try:
        return _INVENTORIES[module]
    except KeyError:
        pass
    except TypeError:  # not weakly referable: list it every time
        iterators: dict[int, Any] = {}
        return build_inventory(module, iterators), iterators
    iterators = {}
    found = _INVENTORIES[module] = (build_inventory(module, iterators), iterators)
    return found


def _explain(
    model: Any,
    preserved_attrs: Iterable[str],
    methods: Iterable[str],
    freeze_interfaces: bool,
    outcome: TorchOutcome | None,
    release: bool = True,
    pause: Callable[[], None] | None = None,
) -> Explanation:
    start = time.perf_counter()
    loaded = _as_loaded(model)
    check_eval(loaded)
    names = [n for n in [*preserved_attrs, *methods] if n]
    names = list(dict.fromkeys(names))
    inventory, iterators = _inventory_of(loaded.module)
    display = str(loaded.path) if loaded.path else loaded.name
    cmod = raw_module(loaded.module)
    model_view = ModuleView(cmod, iterators)
    # Names are checked first: an unknown one gets freezeview's sentence with the
    # closest names, which torch's own refusal cannot give.
    prop = FreezeReplay(model_view, names, inventory, freeze_interfaces, display)
    own_outcome = outcome is None
    if outcome is None:
        try:
            outcome = torch_outcome(cmod, names, freeze_interfaces)
        except RuntimeError as exc:
            raise PlanError(torch_refusal(str(exc), display)) from exc
    wait = pause if pause is not None else _no_pause
    prop.pause = wait
    try:
        for stage in (
            prop.prepare_graphs,
            prop.record_other_reads,
            prop.record_mutations,
            prop.propagate,
            prop.cleanup,
        ):
            wait()
            stage()
    except RuntimeError as exc:
        raise PlanError(torch_refusal(str(exc), display)) from exc
    wait()
    verdicts = VerdictBuilder(prop, inventory).build()
    statuses = statuses_by_path(outcome, cmod, model_view, prop, inventory_paths(inventory))
    if own_outcome and release and outcome.frozen is not None:
        # Read in full: torch would keep its frozen graphs as long as the model lives.
        release_clone(outcome.frozen, cmod)
    shown, disagreements = settle(verdicts, statuses, outcome)
    shown = mark_written_constants(shown, prop, constant_writes(prop))
    return Explanation(
        model=display,
        torch_version=torch.__version__,
        preserved_attrs=tuple(n for n in names if n not in [*prop.methods, *prop.sub_methods]),
        methods=(*prop.methods, *prop.sub_methods),
        attributes=shown,
        inventory=inventory,
        seconds=time.perf_counter() - start,
        warnings=list(loaded.warnings),
        torch_seconds=outcome.seconds,
        disagreements=disagreements,
        torch_log=outcome.log,
        frozen=frozen_contents(loaded.module, inventory) if loaded.already_frozen else None,
    )


def _no_pause() -> None:
    """No pause between the replay's stages (explain's default)."""


def inventory_paths(inventory: Inventory) -> dict[str, bool]:
    """Every attribute path the inventory lists, mapped to whether it is a submodule
    (what :func:`~freezeview.engine.graph.attribute_paths` gives, without walking the
    module tree again)."""
    return {info.path: info.kind == "submodule" for info in inventory.attributes}


def torch_statuses_only(
    loaded: LoadedModel, preserved_attrs: Iterable[str], outcome: TorchOutcome
) -> Explanation | None:
    """torch's status for every attribute, without freezeview's reasons (fast).

    What ``freezeview check`` and ``compare`` need when nothing is wrong: the reasons
    (the replay of freeze_module.cpp, about half of explain's time on big models) are
    worked out only for the attributes a rule or a comparison names.

    Args:
        loaded: the model.
        preserved_attrs: as for ``torch.jit.freeze``.
        outcome: torch's freeze of this model with these names.

    Returns:
        An :class:`Explanation` whose verdicts have no reasons, or None when torch's log
        names constants relative to a ``torch.jit.fork`` body (resolving those takes the
        replay: call :func:`explain`).
    """
    names = list(dict.fromkeys(n for n in preserved_attrs if n))
    # Listed once per loaded model, as explain lists it (the app asks at every toggle).
    inventory, iterators = _inventory_of(loaded.module)
    display = str(loaded.path) if loaded.path else loaded.name
    cmod = raw_module(loaded.module)
    view, paths, canonical = _names_of(loaded.module, cmod, inventory, iterators)
    # The replay is not run: it only sorts the names into attributes and methods.
    prop = FreezeReplay(view, names, inventory, True, display)
    if any(name not in paths for name in outcome.folded):
        return None
    statuses = statuses_by_path(outcome, cmod, view, prop, paths, canonical)
    verdicts = [
        AttributeVerdict(info.path, info.kind, info.type, statuses[info.path], (), info)
        for info in inventory.attributes
        if info.path in statuses
    ]
    return Explanation(
        model=display,
        torch_version=torch.__version__,
        preserved_attrs=tuple(n for n in names if n not in [*prop.methods, *prop.sub_methods]),
        methods=(*prop.methods, *prop.sub_methods),
        attributes=verdicts,
        inventory=inventory,
        warnings=list(loaded.warnings),
        torch_seconds=outcome.seconds,
        torch_log=outcome.log,
    )
