"""freezeview's engine: everything that talks to torch, and nothing that draws.

The engine never imports Textual or ``freezeview.ui``; the CLI and the app are thin
layers over these functions (a test checks the boundary in a fresh interpreter).

Example::

    from freezeview.engine import explain, load_model

    result = explain(load_model("model.pt"), preserved_attrs=["version"])
    print(result.summary())
"""

from .errors import BadInputError, FreezeviewError, OutputError, PlanError
from .explain import REASON_CODES, AttributeVerdict, Explanation, Reason, explain
from .inventory import AttributeInfo, Inventory, ModuleInfo, build_inventory
from .loading import LoadedModel, check_eval, load_model
from .snapshot import GraphSnapshot, NodeSnapshot, snapshot_graph

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
