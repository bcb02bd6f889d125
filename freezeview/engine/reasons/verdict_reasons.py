"""Each attribute's verdict and reasons, read off the replay of freeze_module.cpp.

:class:`VerdictBuilder` walks the inventory's attribute paths with a finished
:class:`~.replay.FreezeReplay` (its mutations, surviving reads and kept slots) and says,
per path, ``inlined``, ``kept`` or ``dropped`` with freezeview's reasons (a
``prim::SetAttr``, an in-place writer alias analysis finds, a preserved name, ...).
:func:`~.verdicts.explain` then sets them beside torch's own statuses (:mod:`.agreement`).
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from ..graph import AttributeInfo, Inventory
from .module_objects import ModuleObject, is_object, join_path, module_at
from .mutation import Writer
from .replay import FreezeReplay, WriteFact
from .verdict_values import AttributeVerdict, Reason

__all__ = ["VerdictBuilder"]


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
    elif writer.wildcard:
        message = (
            f"alias analysis puts this tensor in the one set it keeps for every tensor "
            "that entered a list, a tuple or the heap (it, or a view of it, went into a "
            "list or a tuple, an attribute, a fork, or an op whose schema marks it `-> *` "
            f"such as aten::split or aten::chunk); {writer.kind}{where} in {writer.method} "
            f"writes a tensor of that set{_via(writer)}, so torch keeps every tensor of "
            "it. It folds once no preserved method writes a tensor of that set in place "
            "(an out-of-place op instead), or once this tensor no longer enters it"
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


def _removed_write_reason(fact: WriteFact, what: str) -> Reason:
    """A write found in code that freezing removes: a ``dead-code`` reason that names the
    writer, never a kept reason on a dropped attribute."""
    method = fact.writer.method if fact.writer else fact.detail
    found = _writer_reason(fact.code, fact.writer, what, method)
    return replace(
        found,
        code="dead-code",
        message=(
            f"{found.message}, inside that same code: freezing removes the write with "
            "it, so the write keeps nothing"
        ),
    )


class VerdictBuilder:
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
                # By dotted path: a bare name read like a count ("attributes: 0").
                paths = [f"{info.path}.{n}" for n in held[:5]]
                shown = ", ".join(paths) + (", ..." if len(held) > 5 else "")
                reasons.append(Reason("holds-kept", f"holds kept attributes (by path): {shown}"))
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
        if not _is_container(info.type):
            # A write of a list is a write of the list, not of the tensors in it: alias
            # analysis does not count it as a writer of a tensor attribute read.
            direct = {k: f for k, f in grouped.items() if not _writes_containers_only(f[0].writer)}
            grouped = direct or grouped
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
                reasons.append(_removed_write_reason(fact, repr(info.path)))
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


def _is_container(type_name: str) -> bool:
    return type_name.startswith(("List[", "Dict[", "Dict(", "Tuple[")) or type_name.endswith("[]")


def _writes_containers_only(writer: Writer | None) -> bool:
    if writer is None or writer.kind == "prim::fork" or not writer.written_types:
        return False
    return all(_is_container(t) for t in writer.written_types)


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]
