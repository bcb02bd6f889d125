"""What is in a TorchScript model: its module tree and every attribute.

Each attribute is listed under its dotted path from the root (``layer1.0.bn.running_mean``)
with its kind (parameter, buffer, submodule or plain attribute), its TorchScript type,
tensor facts (dtype, shape, device, requires_grad) and the methods that read or write
it directly (``prim::GetAttr`` / ``prim::SetAttr`` on ``self`` in that module's own
methods, before inlining).
"""

from __future__ import annotations

from typing import Any

import torch

from .inventory_values import AttributeInfo, Inventory, ModuleInfo
from .module_slots import OpaqueObject, ScriptEnum
from .module_slots import module_iterators as _slots
from .snapshot_walk import summarize_value

__all__ = [
    "AttributeInfo",
    "Inventory",
    "ModuleInfo",
    "attribute_type",
    "build_inventory",
    "module_iterators",
    "raw_module",
]


def raw_module(module: Any) -> torch._C.ScriptModule:
    """The C++ module object behind a ScriptModule (or the object itself)."""
    return module._c if hasattr(module, "_c") else module


def attribute_type(value: Any) -> str:
    """TorchScript type of an attribute value (as torch would infer it)."""
    if isinstance(value, torch._C.ScriptModule):
        return value._type().qualified_name()
    if isinstance(value, OpaqueObject):
        return value.type_name
    if isinstance(value, ScriptEnum):
        return value.type_name
    if isinstance(value, torch.ScriptObject):
        try:
            return str(value._type().qualified_name())
        except (AttributeError, RuntimeError):
            return "Object"
    result = torch._C._jit_try_infer_type(value)
    return str(result.type()) if result.success() else type(value).__name__


_Uses = tuple[dict[str, str], dict[str, list[str]], dict[str, list[str]]]


def _declared_types_and_uses(
    cmod: torch._C.ScriptModule, path: str, by_type: dict[str, _Uses] | None = None
) -> _Uses:
    """Scan the module's own methods for GetAttr/SetAttr on ``self``.

    Modules of one class type share their methods: with ``by_type``, each type's
    methods are scanned once (uses are kept by method name and labelled per module).
    """
    if by_type is None:
        return _label_uses(_methods_uses(cmod), path)
    qualified = cmod._type().qualified_name()
    uses = by_type.get(qualified)
    if uses is None:
        uses = by_type[qualified] = _methods_uses(cmod)
    return _label_uses(uses, path)


def _label_uses(uses: _Uses, path: str) -> _Uses:
    types, readers, writers = uses
    if not path:
        return types, readers, writers
    return (
        types,
        {name: [f"{path}.{m}" for m in methods] for name, methods in readers.items()},
        {name: [f"{path}.{m}" for m in methods] for name, methods in writers.items()},
    )


def _methods_uses(cmod: torch._C.ScriptModule) -> _Uses:
    """Attribute types and the methods reading / writing each, by method name."""
    types: dict[str, str] = {}
    readers: dict[str, list[str]] = {}
    writers: dict[str, list[str]] = {}
    for method in cmod._method_names():
        try:
            graph = cmod._get_method(method).graph
        except RuntimeError:
            continue
        label = method
        self_value = next(iter(graph.inputs()), None)
        if self_value is None:
            continue
        for kind, table in (("prim::GetAttr", readers), ("prim::SetAttr", writers)):
            for node in graph.findAllNodes(kind, True):  # type: ignore[attr-defined]
                if node.inputsAt(0).unique() != self_value.unique():
                    continue
                name = node.s("name")
                uses = table.setdefault(name, [])
                if label not in uses:
                    uses.append(label)
                if kind == "prim::GetAttr":
                    types.setdefault(name, str(node.output().type()))
                else:
                    types.setdefault(name, str(node.inputsAt(1).type()))
    return types, readers, writers


def _attribute_info(
    path: str,
    owner: str,
    name: str,
    kind: str,
    declared: str | None,
    value: Any,
    readers: list[str],
    writers: list[str],
) -> AttributeInfo:
    tensor = value if isinstance(value, torch.Tensor) else None
    summary = None if kind == "submodule" else summarize_value(value)
    return AttributeInfo(
        path=path,
        name=name,
        owner=owner,
        kind=kind,
        type=declared or attribute_type(value),
        value=summary.text if summary is not None else "module",
        value_kind=summary.kind if summary is not None else "module",
        dtype=str(tensor.dtype).removeprefix("torch.") if tensor is not None else None,
        shape=tuple(int(s) for s in tensor.shape) if tensor is not None else None,
        device=str(tensor.device) if tensor is not None else None,
        requires_grad=bool(tensor.requires_grad) if tensor is not None else None,
        readers=tuple(readers),
        writers=tuple(writers),
    )


def module_iterators(cmod: torch._C.ScriptModule, cache: dict[int, Any] | None = None) -> Any:
    """One module's attribute lists (:func:`module_slots.module_iterators`), memoised.

    Walking a model twice (inventory, then explain's module listing) would otherwise list
    every module's attributes twice. Entries are keyed by ``hash(cmod)``, the underlying
    C++ object's (Python wrappers differ per access), and hold the module, so the key
    stays its own; ``==`` confirms the match.
    """
    if cache is None:
        return _slots(cmod)
    hit = cache.get(hash(cmod))
    if hit is not None and hit[0] == cmod:
        return hit[1]
    result = _slots(cmod)
    cache[hash(cmod)] = (cmod, result)
    return result


def build_inventory(module: Any, _cache: dict[int, Any] | None = None) -> Inventory:
    """List the module tree of ``module`` with every attribute.

    Args:
        module: a ``torch.jit.ScriptModule`` (or its ``_c``).

    Returns:
        An :class:`Inventory`. A submodule reachable under two names (shared) is listed
        under both paths, as ``preserved_attrs`` can name either.

    Example::

        inv = build_inventory(torch.jit.script(torch.nn.Linear(2, 3)))
        assert inv.by_path("weight").kind == "parameter"
    """
    inventory = Inventory()
    uses_by_type: dict[str, _Uses] = {}
    root = raw_module(module)
    stack: list[tuple[str, torch._C.ScriptModule]] = [("", root)]
    while stack:
        path, cmod = stack.pop()
        iters = module_iterators(cmod, _cache)
        params = {n for n, _ in iters["named_parameters"]}
        buffers = {n for n, _ in iters["named_buffers"]}
        types, readers, writers = _declared_types_and_uses(cmod, path, uses_by_type)
        children: list[tuple[str, torch._C.ScriptModule]] = []
        qualified = cmod._type().qualified_name()
        for name, value in iters["named_attributes"]:
            full = f"{path}.{name}" if path else name
            if isinstance(value, torch._C.ScriptModule):
                kind = "submodule"
                children.append((full, value))
            elif name in params:
                kind = "parameter"
            elif name in buffers:
                kind = "buffer"
            else:
                kind = "attribute"
            inventory.attributes.append(
                _attribute_info(
                    full,
                    path,
                    name,
                    kind,
                    types.get(name) if kind != "submodule" else None,
                    value,
                    readers.get(name, []),
                    writers.get(name, []),
                )
            )
        inventory.modules.append(
            ModuleInfo(
                path=path,
                type_name=qualified.rsplit(".", 1)[-1],
                qualified_type=qualified,
                methods=tuple(cmod._method_names()),
                children=tuple(c for c, _ in children),
            )
        )
        # Depth-first in declaration order: push children reversed.
        stack.extend(reversed(children))
    return inventory
