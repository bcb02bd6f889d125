"""A module's attribute slots, read without turning TorchScript objects into Python ones.

``torch._C._jit_debug_module_iterators`` hands every attribute value back as a Python
object. For an instance of a ``@torch.jit.script`` class that means finding the class's
Python source, which does not exist where someone else's model is inspected: torch then
fails with "classType INTERNAL ASSERT FAILED ... __torch__.X is not found" and nothing
about the model can be listed. freezeview reads such a module slot by slot instead:
names and order from the C++ module's own printout (``Module::dump_to_str``, which prints
values in C++), each value through ``getattr`` where torch can convert it, and an
:class:`OpaqueObject` carrying the TorchScript type name where it cannot (a
:class:`ScriptEnum` for a member of a TorchScript ``Enum``, which torch prints by name).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

import torch

__all__ = [
    "OpaqueObject",
    "ScriptEnum",
    "attribute_paths",
    "attribute_values",
    "module_iterators",
    "tensors_in",
]

# `    name = value` at the first level of the `attributes {` block of the printout.
_SLOT = re.compile(r"^    (?P<name>[A-Za-z_][A-Za-z0-9_]*) = (?P<value>.*)$")
_OBJECT = re.compile(r"<(?P<type>[\w.]+) object at 0x[0-9a-f]+>")
# A TorchScript Enum member as the printout shows it: `Enum<Format.NHWC>`.
_ENUM = re.compile(r"^Enum<(?P<type>[\w.]+)\.(?P<name>\w+)>$")


@dataclass(frozen=True, slots=True)
class OpaqueObject:
    """A TorchScript object whose Python class is not importable here.

    Attributes:
        type_name: its qualified TorchScript type (``__torch__.utils.Counter``), or the
            container type around such objects (``List[__torch__.utils.Counter]``).
        text: how torch prints the value (``<__torch__.utils.Counter object at 0x...>``).
    """

    type_name: str
    text: str

    def __repr__(self) -> str:
        return f"<{self.type_name} object>"


@dataclass(frozen=True, slots=True)
class ScriptEnum:
    """A member of a TorchScript ``Enum`` whose Python class is not importable here.

    Enum members are immutable values: freezing folds them like numbers.

    Attributes:
        type_name: the enum's class name as torch prints it (``Format``).
        name: the member's name (``NHWC``).
    """

    type_name: str
    name: str

    def __str__(self) -> str:
        return f"{self.type_name}.{self.name}"


def _printed_slots(cmod: torch._C.ScriptModule) -> list[tuple[str, str]]:
    """``(name, printed value)`` of the module's own attributes, in slot order."""
    text = cmod.dump_to_str(False, False, False)  # type: ignore[attr-defined]
    slots: list[tuple[str, str]] = []
    inside = False
    for line in text.splitlines():
        if line == "  attributes {":
            inside = True
        elif inside and line == "  }":
            break
        elif (
            inside
            and (found := _SLOT.match(line))
            # A printed string may span lines; hasattr weeds out look-alike lines.
            and cmod.hasattr(found["name"])  # type: ignore[attr-defined]
            and all(found["name"] != name for name, _ in slots)
        ):
            slots.append((found["name"], found["value"]))
    return slots


def _opaque(printed: str) -> OpaqueObject:
    objects = sorted({m["type"] for m in _OBJECT.finditer(printed)})
    inner = objects[0] if len(objects) == 1 else "Object"
    if printed.startswith("["):
        return OpaqueObject(f"List[{inner}]", printed)
    if printed.startswith("{"):
        return OpaqueObject(f"Dict[..., {inner}]", printed)
    if printed.startswith("("):
        return OpaqueObject(f"Tuple[{inner}, ...]", printed)
    return OpaqueObject(inner, printed)


def _slot_by_slot(cmod: torch._C.ScriptModule) -> dict[str, list[tuple[str, Any]]]:
    """The non-recursive iterators of one module, each value converted where torch can."""
    attributes: list[tuple[str, Any]] = []
    for name, printed in _printed_slots(cmod):
        try:
            value = cmod.getattr(name)  # type: ignore[attr-defined]
        except RuntimeError:
            member = _ENUM.match(printed)
            value = ScriptEnum(member["type"], member["name"]) if member else _opaque(printed)
        attributes.append((name, value))
    return {
        "named_attributes": attributes,
        "named_parameters": list(torch._C.ParameterDict(cmod).items()),  # type: ignore[attr-defined]
        "named_buffers": list(torch._C.BufferDict(cmod).items()),  # type: ignore[attr-defined]
    }


def module_iterators(cmod: torch._C.ScriptModule) -> dict[str, list[tuple[str, Any]]]:
    """``named_attributes``, ``named_parameters`` and ``named_buffers`` of one module.

    Args:
        cmod: a C++ module (``module._c``).

    Returns:
        torch's own lists where every value converts to Python; otherwise the same lists
        read slot by slot, with :class:`OpaqueObject` for values that cannot be converted.
    """
    try:
        found = torch._C._jit_debug_module_iterators(cmod)  # type: ignore[attr-defined]
    except RuntimeError:
        return _slot_by_slot(cmod)
    return {
        "named_attributes": found["named_attributes"],
        "named_parameters": found["named_parameters"],
        "named_buffers": found["named_buffers"],
    }


def attribute_values(cmod: torch._C.ScriptModule) -> list[tuple[str, Any]] | None:
    """Every attribute path under ``cmod`` with its value, from one torch call.

    Args:
        cmod: a C++ module (``module._c``).

    Returns:
        ``[(path, value), ...]`` depth first in declaration order (a submodule's own
        attributes right after it; a shared submodule under each of its names), or None
        when torch cannot convert every value to Python (read slot by slot instead).
    """
    try:
        named: list[tuple[str, Any]] = torch._C._jit_debug_module_iterators(cmod)[  # type: ignore[attr-defined]
            "named_attributes_r"
        ]
    except RuntimeError:
        return None
    return named


def attribute_paths(cmod: torch._C.ScriptModule) -> dict[str, bool]:
    """Every attribute path under ``cmod``, mapped to whether it is a submodule.

    Args:
        cmod: a C++ module (``module._c``), e.g. a frozen one.

    Returns:
        ``{"conv": True, "conv.weight": False, "training": False, ...}`` in the order
        torch lists them (a shared submodule under each of its names).
    """
    named = attribute_values(cmod)
    if named is not None:
        return {path: isinstance(value, torch._C.ScriptModule) for path, value in named}
    paths: dict[str, bool] = {}
    stack: list[tuple[str, torch._C.ScriptModule]] = [("", cmod)]
    while stack:
        prefix, module = stack.pop()
        children = []
        for name, value in module_iterators(module)["named_attributes"]:
            path = f"{prefix}.{name}" if prefix else name
            is_module = isinstance(value, torch._C.ScriptModule)
            paths[path] = is_module
            if is_module:
                children.append((path, value))
        stack.extend(reversed(children))
    return paths


def tensors_in(value: object) -> list[torch.Tensor]:
    """Every tensor inside an attribute's or a constant's value, in order.

    Lists, tuples and dict values are looked into, to any depth; anything else (a
    TorchScript object, a submodule) holds no tensor here.
    """
    out: list[torch.Tensor] = []
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, torch.Tensor):
            out.append(item)
        elif isinstance(item, list | tuple):
            stack.extend(reversed(item))
        elif isinstance(item, dict):
            stack.extend(reversed(list(item.values())))
    return out
