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

import os
import time
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import torch

from ..graph import (
    AttributeInfo,
    Inventory,
    build_inventory,
    frozen_contents,
    raw_module,
)
from ..load import LoadedModel, check_eval, load_model
from ..plumbing import BadInputError, PlanError, collector_paused
from .agreement import settle
from .module_objects import ModuleObject, ModuleView, is_object, join_path, module_at
from .mutation import Writer
from .refusals import torch_refusal
from .replay import FreezeReplay, WriteFact
from .torch_freeze import TorchOutcome, release_clone, torch_outcome
from .torch_paths import statuses_by_path
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

# ---------------------------------------------------------------------------------------
# Verdicts and reasons.


def _via(writer: Writer) -> str:
    if not writer.written:
        return ""
    name = writer.written[0]
    kind = writer.written_types[0] if writer.written_types else ""
    if kind.startswith(("List[", "Dict(", "Dict[")) or kind.endswith("[]"):
        return f" (on %{name}, a {kind} that holds it)"
    return f" (through %{name})"


def _writer_reason(
    code: str, writer: Writer | None, what: str, method: str, times: int = 1
) -> Reason:
    if writer is None:
        return Reason(
            code,
            f"alias analysis finds a writer of {what} in {method} "
            "(not attributable to a single node)",
            method=method,
        )
    where = f" at {writer.source.short()}" if writer.source else ""
    if code == "set-attr":
        message = f"assigned by prim::SetAttr{where} in {writer.method}"
    elif writer.kind == "prim::fork":
        message = (
            f"handed to torch.jit.fork{where} in {writer.method}{_via(writer)}: alias "
            "analysis takes what a fork is handed as written (it does not follow the "
            "forked body), so freezing keeps it"
        )
    else:
        message = f"written in place by {writer.kind}{where} in {writer.method}{_via(writer)}"
    if times > 1:
        message += f" ({times} such nodes after inlining)"
    return Reason(
        code,
        message,
        node=writer.text,
        source=str(writer.source) if writer.source else None,
        method=writer.method,
        source_text=(writer.source.text or None) if writer.source else None,
    )


class _Verdicts:
    """Turns the propagator's state into per-path verdicts with reasons."""

    def __init__(self, prop: FreezeReplay, inventory: Inventory) -> None:
        self.prop = prop
        self.model = prop.model
        self.inventory = inventory
        self.preserved_methods = set(prop.methods)
        self._written: dict[Any, list[tuple[int, tuple[int, str]]]] | None = None

    def build(self) -> list[AttributeVerdict]:
        verdicts: list[AttributeVerdict] = []
        present: dict[str, bool] = {}
        for info in self.inventory.attributes:
            owner = self._module_at(info.owner)
            if owner is None:
                continue
            parent_present = info.owner == "" or present.get(info.owner, False)
            survives = parent_present and self.prop.slot_survives(owner, info.name)
            present[info.path] = survives
            verdicts.append(self._verdict(info, owner, survives))
        return verdicts

    def _module_at(self, path: str) -> ModuleObject | None:
        return module_at(self.model, path)

    def _verdict(self, info: AttributeInfo, owner: ModuleObject, present: bool) -> AttributeVerdict:
        slot = (owner.key, info.name)
        if present:
            status = "kept"
            reasons = self._kept_reasons(info, owner, slot)
        elif slot in self.prop.folded or (
            info.kind == "submodule" and self._inlined_module(owner.children[info.name])
        ):
            status = "inlined"
            reasons = self._inlined_reasons(info, owner, slot)
        else:
            status = "dropped"
            reasons = self._dropped_reasons(info, owner, slot)
        if any(p and (info.path == p or info.path.startswith(p + ".")) for p in self._iface()):
            reasons.append(
                Reason(
                    "interface",
                    "reached through a module interface attribute; freezing "
                    "inlines the concrete module's code",
                )
            )
        return AttributeVerdict(info.path, info.kind, info.type, status, tuple(reasons), info)

    def _iface(self) -> set[str]:
        return self.prop.interface_paths

    def _inlined_module(self, mod: ModuleObject) -> bool:
        """A removed submodule counts as inlined when freezing folded something in it."""
        if any((mod.key, name) in self.prop.folded for name in mod.order):
            return True
        return any(self._inlined_module(c) for c in mod.children.values())

    # -- kept ---------------------------------------------------------------------------------

    def _kept_reasons(
        self, info: AttributeInfo, owner: ModuleObject, slot: tuple[int, str]
    ) -> list[Reason]:
        prop = self.prop
        reasons: list[Reason] = []
        user = prop.user_names.get(slot)
        holder = prop.method_holders.get(slot)
        if user is not None:
            reasons.append(Reason("preserved", f"named in preserved attributes ({user!r})"))
        elif holder is not None:
            reasons.append(
                Reason("preserved", f"holds the preserved method {holder!r}, so freezing keeps it")
            )
        else:
            for ancestor in _ancestors(info.path):
                mod = self._module_at(ancestor)
                if mod is not None and mod.key in prop.preserved_submodules:
                    reasons.append(
                        Reason("preserved", f"under submodule {ancestor!r}, which is preserved")
                    )
                    break
        for ancestor in [info.owner, *_ancestors(info.owner)]:
            mod = self._module_at(ancestor)
            if (
                mod is not None
                and mod.key in prop.escaping
                and mod.key not in prop.preserved_submodules
            ):
                label = ancestor or "the model"
                reasons.append(
                    Reason(
                        "module-kept",
                        f"module {label!r} is returned by a preserved method, "
                        "so freezing keeps it whole",
                    )
                )
                break
        reasons.extend(self._mutation_reasons(slot, info))
        if not any(r.code in ("set-attr", "in-place-write") for r in reasons):
            alias = self._alias_reason(owner, info.name)
            if alias is not None:
                reasons.append(alias)
        if slot in prop.not_materializable and info.kind != "submodule":
            reasons.append(
                Reason(
                    "not-materializable",
                    f"a {info.type} value has no constant form in "
                    "TorchScript IR, so its reads stay prim::GetAttr",
                )
            )
        if info.kind == "submodule":
            child = owner.children[info.name]
            held = [
                n
                for n in child.order
                if prop.slot_survives(child, n) and n not in ("training", "_is_full_backward_hook")
            ] or [n for n in child.order if prop.slot_survives(child, n)]
            if held and not any(r.code in ("preserved", "module-kept") for r in reasons):
                shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
                reasons.append(Reason("holds-kept", f"holds kept attributes: {shown}"))
        if not reasons and not prop.methods:
            reasons.append(
                Reason(
                    "module-kept",
                    "the model has no forward and no preserved method, so "
                    "freezing analyses nothing and keeps every attribute (preserve a method, "
                    "e.g. --preserve forward__0, to freeze it)",
                )
            )
        fork = prop.forked.get(slot)
        if fork is not None and not reasons:
            where = f" at {fork.source.short()}" if fork.source else ""
            reasons.append(
                Reason(
                    "forked",
                    f"torch.jit.fork{where} in {fork.method} runs its body on this module, "
                    "and the body still reads it after folding (a submodule has no constant "
                    "form), so freezing keeps the module; the attributes folded into the "
                    "body's constants are removed from it",
                    node=fork.text,
                    source=str(fork.source) if fork.source else None,
                    method=fork.method,
                    source_text=(fork.source.text or None) if fork.source else None,
                )
            )
        if not reasons:
            source = prop.type_keep_source.get((owner.type_name, info.name))
            if source is not None and source != slot:
                other = self.model.modules[source[0]]
                reasons.append(
                    Reason(
                        "shared-type",
                        f"{join_path(other.paths[0], info.name)!r} has the same "
                        f"TorchScript class ({owner.type_name.rsplit('.', 1)[-1]}) and keeps "
                        "this attribute, so every instance keeps it",
                    )
                )
            elif slot in prop.referenced:
                reasons.append(
                    Reason(
                        "referenced", "a prim::GetAttr that reads it survives freezing's clean-up"
                    )
                )
            elif prop.keep.get(owner.type_name, set()) is None or owner.key in prop.escaping:
                reasons.append(Reason("module-kept", "its module is kept whole"))
            else:
                reasons.append(Reason("referenced", "freezing keeps this slot of its module"))
        return reasons

    def _mutation_reasons(self, slot: tuple[int, str], info: AttributeInfo) -> list[Reason]:
        # One reason per (kind, source line, method): a helper inlined twenty times
        # writes from twenty nodes, but the user has one line to look at.
        grouped: dict[tuple[Any, ...], list[WriteFact]] = {}
        for fact in self.prop.facts.get(slot, []):
            if fact.writer is not None and fact.writer.method not in self.preserved_methods:
                continue
            w = fact.writer
            key = (fact.code, w.kind, str(w.source), w.method) if w else (fact.code, fact.detail)
            grouped.setdefault(key, []).append(fact)
        reasons: list[Reason] = []
        for facts in grouped.values():
            fact = facts[0]
            method = fact.writer.method if fact.writer else fact.detail
            reasons.append(
                _writer_reason(fact.code, fact.writer, repr(info.path), method, len(facts))
            )
        return reasons

    def _written_values(self) -> dict[Any, list[tuple[int, tuple[int, str]]]]:
        """The slots written in a preserved method, by each value inside them, in the
        order of the replay's facts (asked once per kept attribute: built once)."""
        if self._written is None:
            self._written = {}
            for order, (slot, facts) in enumerate(self.prop.facts.items()):
                if not any(f.code in ("set-attr", "in-place-write") for f in facts):
                    continue
                other = self.model.modules[slot[0]]
                if slot[1] not in other.attrs or is_object(other.attrs[slot[1]]):
                    continue
                for key in self.model.sub_keys(other, slot[1]):
                    self._written.setdefault(key, []).append((order, slot))
        return self._written

    def _alias_reason(self, owner: ModuleObject, name: str) -> Reason | None:
        mine = self.model.sub_keys(owner, name)
        written = self._written_values()
        first: tuple[int, tuple[int, str]] | None = None
        for key in mine:
            # The first written slot other than this one that shares a value with it.
            for order, slot in written.get(key, ()):
                if slot != (owner.key, name):
                    if first is None or order < first[0]:
                        first = (order, slot)
                    break
        if first is not None:
            other_slot = first[1]
            other = self.model.modules[other_slot[0]]
            other_path = join_path(other.paths[0], other_slot[1])
            return Reason(
                "aliases-mutable",
                f"shares memory with {other_path!r}, which is written in a preserved "
                "method, so it cannot be a constant either",
            )
        for key in self.prop.user_names:
            other = self.model.modules[key[0]]
            if key == (owner.key, name) or is_object(other.attrs[key[1]]):
                continue
            if mine & self.model.sub_keys(other, key[1]):
                return Reason(
                    "aliases-mutable",
                    f"shares memory with preserved attribute {self.prop.user_names[key]!r}",
                )
        return None

    # -- inlined / dropped ------------------------------------------------------------------

    def _inlined_reasons(
        self, info: AttributeInfo, owner: ModuleObject, slot: tuple[int, str]
    ) -> list[Reason]:
        if info.kind == "submodule":
            return [
                Reason(
                    "folded",
                    "its methods were inlined and its attributes folded; "
                    "the submodule itself is removed",
                )
            ]
        methods = sorted(self.prop.folded.get(slot, set()))
        where = ", ".join(methods) if methods else "a preserved method"
        return [
            Reason(
                "folded",
                f"read in {where} and folded into the graph as a constant",
                method=methods[0] if methods else None,
            )
        ]

    def _dropped_reasons(
        self, info: AttributeInfo, owner: ModuleObject, slot: tuple[int, str]
    ) -> list[Reason]:
        prop = self.prop
        if info.kind == "submodule" and slot in prop.read:
            return [
                Reason(
                    "unused",
                    "its code was inlined but reads none of its attributes, so freezing removes it",
                )
            ]
        if slot in prop.read:
            reasons = [
                Reason(
                    "dead-code",
                    "only read in code that freezing removes once "
                    "attributes are folded (for example an `if self.training:` "
                    "branch), so it disappears with its module",
                )
            ]
            for fact in prop.facts.get(slot, []):
                reasons.append(
                    _writer_reason(
                        fact.code,
                        fact.writer,
                        repr(info.path),
                        fact.writer.method if fact.writer else fact.detail,
                    )
                )
            return reasons
        other = sorted(set(self._other_readers(info, owner)))
        if other:
            names = ", ".join(other[:3])
            msg = (
                f"read only by {names}, which freezing does not preserve "
                f"(--preserve {other[0]} keeps it)"
            )
        else:
            msg = "no preserved method reads it"
        return [Reason("unused", msg)]

    def _other_readers(self, info: AttributeInfo, owner: ModuleObject) -> list[str]:
        reads = self.prop.other_reads
        found = list(reads.get((owner.key, info.name), []))
        if info.kind == "submodule":
            stack = [owner.children[info.name]]
            while stack and not found:
                mod = stack.pop()
                for name in mod.order:
                    found.extend(reads.get((mod.key, name), []))
                stack.extend(mod.children.values())
        return found


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


# ---------------------------------------------------------------------------------------


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
        return _explain(model, preserved_attrs, methods, freeze_interfaces, outcome, release)


# A loaded model's module tree and its attribute lists, by module: the app explains the
# same loaded model again at every toggle of a preserved attribute, and listing the tree
# is linear in the model (0.3 s at 512 blocks). Nothing changes a loaded model's tree.
_INVENTORIES: weakref.WeakKeyDictionary[Any, tuple[Inventory, dict[int, Any]]] = (
    weakref.WeakKeyDictionary()
)


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
    try:
        prop.prepare_graphs()
        prop.record_other_reads()
        prop.record_mutations()
        prop.propagate()
        prop.cleanup()
    except RuntimeError as exc:
        raise PlanError(torch_refusal(str(exc), display)) from exc
    verdicts = _Verdicts(prop, inventory).build()
    statuses = statuses_by_path(outcome, cmod, model_view, prop, inventory_paths(inventory))
    if own_outcome and release and outcome.frozen is not None:
        # Read in full: torch would keep its frozen graphs as long as the model lives.
        release_clone(outcome.frozen, cmod)
    shown, disagreements = settle(verdicts, statuses, outcome)
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
    iterators: dict[int, Any] = {}
    inventory = build_inventory(loaded.module, iterators)
    display = str(loaded.path) if loaded.path else loaded.name
    cmod = raw_module(loaded.module)
    view = ModuleView(cmod, iterators)
    prop = FreezeReplay(view, names, inventory, True, display)
    known = {info.path for info in inventory.attributes}
    if any(name not in known for name in outcome.folded):
        return None
    statuses = statuses_by_path(outcome, cmod, view, prop, inventory_paths(inventory))
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
