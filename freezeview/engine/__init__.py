"""freezeview's engine: everything that talks to torch, and nothing that draws.

The engine never imports Textual or ``freezeview.ui``; the CLI and the app are thin
layers over these functions (a test checks the boundary in a fresh interpreter).

Example::

    from freezeview.engine import explain, load_model

    result = explain(load_model("model.pt"), preserved_attrs=["version"])
    print(result.summary())
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .plumbing.errors import BadInputError, FreezeviewError, OutputError, PlanError
from .plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .graph import (
        AttributeInfo,
        GraphSnapshot,
        Inventory,
        ModuleInfo,
        NodeSnapshot,
        build_inventory,
        snapshot_graph,
    )
    from .load import LoadedModel, check_eval, load_model
    from .reasons import REASON_CODES, AttributeVerdict, Explanation, Reason, explain

# Re-exports are resolved on first use (PEP 562): importing freezeview.engine.plumbing
# (or the app, whose first screen must appear before torch has loaded) does not import
# torch. The engine's stages are its sub-packages, in the order their imports flow:
# plumbing, load, graph, reasons, diff, freeze, draw, output, ci.
__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "REASON_CODES": "reasons",
        "AttributeVerdict": "reasons",
        "Explanation": "reasons",
        "Reason": "reasons",
        "explain": "reasons",
        "AttributeInfo": "graph",
        "Inventory": "graph",
        "ModuleInfo": "graph",
        "build_inventory": "graph",
        "LoadedModel": "load",
        "check_eval": "load",
        "load_model": "load",
        "GraphSnapshot": "graph",
        "NodeSnapshot": "graph",
        "snapshot_graph": "graph",
    },
)

__all__ = [
    "REASON_CODES",
    "AttributeInfo",
    "AttributeVerdict",
    "BadInputError",
    "Explanation",
    "FreezeviewError",
    "GraphSnapshot",
    "Inventory",
    "LoadedModel",
    "ModuleInfo",
    "NodeSnapshot",
    "OutputError",
    "PlanError",
    "Reason",
    "build_inventory",
    "check_eval",
    "explain",
    "load_model",
    "snapshot_graph",
]
