"""freezeview's engine: everything that talks to torch, and nothing that draws.

The engine never imports Textual or ``freezeview.ui``; the CLI and the app are thin
layers over these functions (a test checks the boundary in a fresh interpreter).

Example::

    from freezeview.engine import explain, load_model

    result = explain(load_model("model.pt"), preserved_attrs=["version"])
    print(result.summary())
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .errors import BadInputError, FreezeviewError, OutputError, PlanError

if TYPE_CHECKING:
    from .inventory import AttributeInfo, Inventory, ModuleInfo, build_inventory
    from .loading import LoadedModel, check_eval, load_model
    from .snapshot import GraphSnapshot, NodeSnapshot, snapshot_graph
    from .verdicts import REASON_CODES, AttributeVerdict, Explanation, Reason, explain

# Re-exports are resolved on first use (PEP 562): importing freezeview.engine.errors (or
# the app, whose first screen must appear before torch has loaded) does not import torch.
_LAZY = {
    "REASON_CODES": "verdicts",
    "AttributeVerdict": "verdicts",
    "Explanation": "verdicts",
    "Reason": "verdicts",
    "explain": "verdicts",
    "AttributeInfo": "inventory",
    "Inventory": "inventory",
    "ModuleInfo": "inventory",
    "build_inventory": "inventory",
    "LoadedModel": "loading",
    "check_eval": "loading",
    "load_model": "loading",
    "GraphSnapshot": "snapshot",
    "NodeSnapshot": "snapshot",
    "snapshot_graph": "snapshot",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


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
