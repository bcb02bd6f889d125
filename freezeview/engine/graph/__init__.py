"""Graph: torch graphs and modules in, torch-free values out.

:func:`snapshot_graph` takes a value picture of a TorchScript graph
(:class:`GraphSnapshot`: nodes, types, source ranges, module scopes; constants
summarised, never their storage); :func:`build_inventory` lists a model's module tree
and every attribute (:class:`Inventory`). The ``*_values`` modules are torch-free, so
the app's screen process can hold them. Uses plumbing only.

- :mod:`.snapshot`: :func:`snapshot_graph`, by the fast printout path or the torch walk;
- :mod:`.snapshot_parse`: the fast path: a snapshot parsed from torch's IR printout;
- :mod:`.snapshot_walk`: the torch walk, node by node;
- :mod:`.snapshot_sparse`: a few nodes of a printout, parsed when asked for;
- :mod:`.snapshot_values`: a snapshot's values;
- :mod:`.inventory`: the module tree and every attribute of a model;
- :mod:`.inventory_values`: the inventory's values;
- :mod:`.module_slots`: a module's attribute slots, read one by one;
- :mod:`.frozen_contents`: what freezing left in an already-frozen model;
- :mod:`.naming`: TorchScript names as freezeview shows and compares them;
- :mod:`.schema_text`: what an operator schema writes and aliases, read from its text;
- :mod:`.scalar_types`: the names behind TorchScript's enum ints (dtypes, layouts);
- :mod:`.facts`: what the IR pane and the inspector read off a snapshot.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .facts import NodeFacts, attribute_node_ids, line_index, node_facts
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
    from .snapshot_walk import printed_kinds

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
        "NodeFacts": "facts",
        "attribute_node_ids": "facts",
        "line_index": "facts",
        "node_facts": "facts",
        "printed_kinds": "snapshot_walk",
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
    "NodeFacts",
    "NodeSnapshot",
    "ScriptEnum",
    "SourceLocation",
    "SparseReading",
    "ValueInfo",
    "attribute_node_ids",
    "attribute_paths",
    "attribute_values",
    "build_inventory",
    "demangle",
    "frozen_contents",
    "line_index",
    "module_iterators",
    "node_facts",
    "parse_source_range",
    "partial_snapshot",
    "printed_kinds",
    "raw_module",
    "snapshot_graph",
    "tensors_in",
]
