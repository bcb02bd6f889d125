"""Graph: torch graphs and modules in, torch-free values out.

:func:`snapshot_graph` takes a value picture of a TorchScript graph
(:class:`GraphSnapshot`: nodes, types, source ranges, module scopes; constants
summarised, never their storage); :func:`build_inventory` lists a model's module tree
and every attribute (:class:`Inventory`). The ``*_values`` modules are torch-free, so
the app's screen process can hold them. Uses plumbing only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .frozen_contents import frozen_contents
    from .inventory import build_inventory, module_iterators, raw_module
    from .inventory_values import (
        HOUSEKEEPING,
        AttributeInfo,
        FrozenConstant,
        FrozenContents,
        Inventory,
        ModuleInfo,
    )
    from .module_slots import ScriptEnum, attribute_paths, attribute_values, tensors_in
    from .naming import demangle
    from .snapshot import partial_snapshot, snapshot_graph
    from .snapshot_parse import RECENT_LINES
    from .snapshot_sparse import SparseReading
    from .snapshot_values import (
        GraphSnapshot,
        NodeSnapshot,
        SourceLocation,
        ValueInfo,
        parse_source_range,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "frozen_contents": "frozen_contents",
        "build_inventory": "inventory",
        "module_iterators": "inventory",
        "raw_module": "inventory",
        "HOUSEKEEPING": "inventory_values",
        "AttributeInfo": "inventory_values",
        "FrozenConstant": "inventory_values",
        "FrozenContents": "inventory_values",
        "Inventory": "inventory_values",
        "ModuleInfo": "inventory_values",
        "ScriptEnum": "module_slots",
        "attribute_paths": "module_slots",
        "attribute_values": "module_slots",
        "tensors_in": "module_slots",
        "demangle": "naming",
        "snapshot_graph": "snapshot",
        "partial_snapshot": "snapshot",
        "RECENT_LINES": "snapshot_parse",
        "SparseReading": "snapshot_sparse",
        "ValueInfo": "snapshot_values",
        "GraphSnapshot": "snapshot_values",
        "NodeSnapshot": "snapshot_values",
        "SourceLocation": "snapshot_values",
        "parse_source_range": "snapshot_values",
    },
)

__all__ = [
    "HOUSEKEEPING",
    "RECENT_LINES",
    "AttributeInfo",
    "FrozenConstant",
    "FrozenContents",
    "GraphSnapshot",
    "Inventory",
    "ModuleInfo",
    "NodeSnapshot",
    "ScriptEnum",
    "SourceLocation",
    "SparseReading",
    "ValueInfo",
    "attribute_paths",
    "attribute_values",
    "build_inventory",
    "demangle",
    "frozen_contents",
    "module_iterators",
    "parse_source_range",
    "partial_snapshot",
    "raw_module",
    "snapshot_graph",
    "tensors_in",
]
