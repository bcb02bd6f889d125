"""freezeview's engine: the torch-facing library the CLI and the app are thin layers over.

One sub-package per stage; a stage imports only the stages listed before it (each
stage's ``__init__.py`` names its modules and the stages it uses):

- :mod:`.plumbing`: errors users see, files written whole, forked helpers, Ctrl-C.
- :mod:`.load`: a ``.pt`` path in, a checked TorchScript module out.
- :mod:`.graph`: torch graphs and modules in, torch-free snapshots and inventories out.
- :mod:`.reasons`: a model and a plan in, every attribute's status and why out.
- :mod:`.diff`: two graph snapshots in, what was added, removed and changed out.
- :mod:`.freeze`: a model and a plan in, ``torch.jit.freeze`` as visible steps out.
- :mod:`.measure`: a stepwise freeze in, its effect on speed, size, portability, each
  node's time and the first node whose value moves out.
- :mod:`.migrate`: a TorchScript model in, whether it moves to ``torch.export`` out.
- :mod:`.draw`: snapshots and diffs in, Graphviz pictures and terminal layouts out.
- :mod:`.output`: a finished run in, the files and reports users read out.
- :mod:`.ci`: a model and its expectations (or two models) in, rules held or broken out.

The engine never imports Textual, ``freezeview.ui``, ``freezeview.cli`` or
``freezeview.session`` (tests/test_import_hygiene.py checks in a fresh interpreter,
tests/test_rooms.py finds no import circle).

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
# torch. The engine's stages are its sub-packages, in the order the docstring lists.
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
