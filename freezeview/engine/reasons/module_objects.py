"""The module objects of a model, and what freezing asks of their attribute values.

freeze_module.cpp works on C++ module objects (a module shared under two names is one
object) and on attribute values: is it an object or plain data, is it mutable, can it be
a graph constant, which values alias each other. :class:`ModuleView` lists a model's
module objects once each, with the keys the replay (:mod:`.replay`) compares values by.
"""

from __future__ import annotations

import enum
from typing import Any

import torch

from ..graph import ScriptEnum, module_iterators

__all__ = [
    "ModuleObject",
    "ModuleView",
    "is_enum",
    "is_mutable",
    "is_object",
    "join_path",
    "materializable",
    "module_at",
]


class ModuleObject:
    """One C++ module object of the model (a module shared under two names is one)."""

    __slots__ = ("attrs", "children", "cmod", "key", "methods", "order", "paths", "type_name")

    def __init__(self, key: int, cmod: torch._C.ScriptModule) -> None:
        self.key = key
        self.cmod = cmod
        self.paths: list[str] = []
        self.type_name: str = cmod._type().qualified_name()
        self.attrs: dict[str, Any] = {}
        self.order: list[str] = []
        self.children: dict[str, ModuleObject] = {}
        self.methods: set[str] = set(cmod._method_names())


_SCALARS = (bool, int, float, complex, str, torch.device, torch.dtype, type(None))


# Values torch's tryInsertConstant has no constant form for.
_NOT_CONSTANT_TYPES: tuple[type, ...] = tuple(
    t for t in (getattr(torch, "Generator", None), getattr(torch._C, "Future", None)) if t
)


def is_enum(value: Any) -> bool:
    """A member of a TorchScript ``Enum`` (its Python class importable here or not).

    torch's alias analysis calls an enum immutable, and tryInsertConstant makes a constant
    of it: freezing treats enum members like numbers, never like objects.
    """
    return isinstance(value, enum.Enum | ScriptEnum)


def is_object(value: Any) -> bool:
    """An object (module, TorchScript class instance, custom class), not plain data.

    TorchScript class instances come back to Python as instances of their Python class,
    so anything that is not a tensor, container, scalar or enum member counts.
    """
    if isinstance(value, torch._C.ScriptModule | torch.ScriptObject):
        return True
    if is_enum(value):
        return False
    return not isinstance(value, (torch.Tensor, list, dict, tuple, *_SCALARS, *_NOT_CONSTANT_TYPES))


def is_mutable(value: Any) -> bool:
    """AliasDb::isMutableType on the value's runtime type."""
    if isinstance(value, torch.Tensor | list | dict) or is_object(value):
        return True
    if isinstance(value, tuple):
        return any(is_mutable(v) for v in value)
    return False


def materializable(value: Any) -> bool:
    """Whether torch's tryInsertConstant can turn ``value`` into a graph constant."""
    if isinstance(value, list | tuple | dict) or _opaque_container(value):
        return _insertable(value)
    if isinstance(value, (torch._C.ScriptModule, *_NOT_CONSTANT_TYPES)):
        return False
    # Non-module TorchScript objects are copied to weak compilation references.
    return is_object(value) or _insertable(value)


def _insertable(value: Any) -> bool:
    """constants.cpp's insertableIValue: what a constant (or a constant list) may hold.

    An object is a constant only on its own, never inside a list, tuple or dict.
    """
    if isinstance(value, torch.Tensor):
        return not (value.is_sparse or value.is_mkldnn or value.is_nested)
    if isinstance(value, _SCALARS) or is_enum(value):
        return True
    if isinstance(value, list | tuple):
        return all(_insertable(v) for v in value)
    if isinstance(value, dict):
        return all(_insertable(k) and _insertable(v) for k, v in value.items())
    return False


def _opaque_container(value: Any) -> bool:
    # module_slots.OpaqueObject standing for a container of objects (List[__torch__.X]).
    name = getattr(value, "type_name", "")
    return type(value).__name__ == "OpaqueObject" and name.startswith(("List[", "Dict[", "Tuple["))


def _tensor_key(t: torch.Tensor) -> tuple[str, int]:
    # IValue alias identity for tensors is the storage (freeze_module.cpp uses
    # HashAliasedIValues), so views and tied weights share a key.
    try:
        return ("storage", int(t.untyped_storage()._cdata))
    except (RuntimeError, NotImplementedError):
        return ("tensor", id(t))


class ModuleView:
    """Module objects of a model and helpers to name and compare attribute values."""

    def __init__(self, root: torch._C.ScriptModule, cache: dict[int, Any] | None = None) -> None:
        self._cache = cache
        self.modules: list[ModuleObject] = []
        self.by_type: dict[str, list[ModuleObject]] = {}
        # By the C++ object's hash (wrappers differ per access): a module shared under
        # several names is found in one step, not by a scan of its type's modules.
        self._by_object: dict[int, ModuleObject] = {}
        self.root = self._visit(root, "")

    def _visit(self, cmod: torch._C.ScriptModule, path: str) -> ModuleObject:
        known = self._by_object.get(hash(cmod))
        if known is not None and known.cmod == cmod:
            known.paths.append(path)
            return known
        mod = ModuleObject(len(self.modules), cmod)
        self._by_object[hash(cmod)] = mod
        mod.paths.append(path)
        self.modules.append(mod)
        self.by_type.setdefault(mod.type_name, []).append(mod)
        for name, value in module_iterators(cmod, self._cache)["named_attributes"]:
            mod.order.append(name)
            if isinstance(value, torch._C.ScriptModule):
                child_path = f"{path}.{name}" if path else name
                child = self._visit(value, child_path)
                mod.children[name] = child
                mod.attrs[name] = value
            else:
                mod.attrs[name] = value
        return mod

    @property
    def module_types(self) -> frozenset[str]:
        return frozenset(self.by_type)

    def value_key(self, mod: ModuleObject, name: str) -> tuple[Any, ...]:
        value = mod.attrs[name]
        if isinstance(value, torch.Tensor):
            return _tensor_key(value)
        if name in mod.children:
            return ("module", mod.children[name].key)
        return ("slot", mod.key, name)

    def sub_keys(self, mod: ModuleObject, name: str) -> set[tuple[Any, ...]]:
        """IValue::getSubValues: the value itself and every tensor inside it."""
        keys = {self.value_key(mod, name)}
        stack = [mod.attrs[name]]
        while stack:
            value = stack.pop()
            if isinstance(value, torch.Tensor):
                keys.add(_tensor_key(value))
            elif isinstance(value, list | tuple):
                stack.extend(value)
            elif isinstance(value, dict):
                stack.extend(value.values())
        return keys


def join_path(prefix: str, name: str) -> str:
    """``prefix.name``, or ``name`` at the root (``prefix`` empty)."""
    return f"{prefix}.{name}" if prefix else name


def module_at(view: ModuleView, path: str) -> ModuleObject | None:
    """The module object at a dotted path of ``view`` (``""`` is the root), or None."""
    mod = view.root
    for part in path.split(".") if path else ():
        child = mod.children.get(part)
        if child is None:
            return None
        mod = child
    return mod
