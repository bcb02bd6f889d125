"""The app's engine side: one model opened, and every torch call the app makes.

What lives here runs where torch runs, plus the screen's half of the wire:

- :mod:`.contract`: what any session offers the screen (:class:`EngineSession`) and the
  options a session is opened with (:class:`SessionOptions`);
- :mod:`.local`: :class:`Session`, the engine in this process (the Python API, tests);
- :mod:`.explain_turns`: explain in two turns, torch's statuses first and freezeview's
  reasons after, with the memo that spares a toggle from explaining again;
- :mod:`.migrations`: the app's ``m``, ``freezeview migrate`` run once per session, its
  program kept and written where the user asks;
- :mod:`.engine_process` and :mod:`.spawn`: the child process ``freezeview MODEL.pt``
  keeps torch in, and how it is started; :mod:`.remote`: :class:`RemoteSession`, the
  screen's handle on it, with the same methods as :class:`Session`;
- the values that cross, each next to its wire format: :mod:`.summaries` and
  :mod:`.summaries_wire` (what the widgets draw), :mod:`.graph_wire` (a step's graph in
  slices), :mod:`.canvas` (a graph drawn with characters) and :mod:`.layouts` (the
  graph view's pictures, laid out where the engine runs);
- :mod:`.collector`: the screen process's garbage-collector policy for what arrives.

The screen (:mod:`freezeview.ui`) imports the engine only through the names below.
Importing this package imports no torch: the names that need it load on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from .contract import ENGINE_CALLS, EngineSession, Preserved, SessionOptions, Written

if TYPE_CHECKING:
    from ..engine.diff import forget_recent
    from ..engine.draw import HEAT_SCALE, BoxLayout, GraphLayout, band_label, format_time, heat_band
    from ..engine.graph import (
        HOUSEKEEPING,
        GraphSnapshot,
        Inventory,
        NodeFacts,
        attribute_node_ids,
        demangle,
        line_index,
        node_facts,
    )
    from ..engine.load import LoadedModel
    from ..engine.measure import change_word
    from ..engine.plumbing import BadInputError, FreezeviewError
    from ..engine.reasons import WRITTEN_HELP
    from .canvas import STYLE_NAMES, Canvas
    from .collector import Handoff
    from .local import Session
    from .remote import EngineError, RemoteSession
    from .summaries import (
        AttrSummary,
        MigrationSummary,
        NodeTime,
        NodeTimes,
        OpenedSummary,
        PassSummary,
        ReasonSummary,
        StepSummary,
    )

    def _both_keep_the_contract(
        local: Session, remote: RemoteSession
    ) -> tuple[EngineSession, EngineSession]:
        """mypy checks here that both sessions satisfy :class:`EngineSession`."""
        return local, remote


# Where each public name lives, imported on first use: the screen's process imports this
# package at start, before torch (which only ``Session`` brings in) and most of the rest.
_HOMES = {
    "Session": ".local",
    "RemoteSession": ".remote",
    "EngineError": ".remote",
    "AttrSummary": ".summaries",
    "MigrationSummary": ".summaries",
    "OpenedSummary": ".summaries",
    "PassSummary": ".summaries",
    "ReasonSummary": ".summaries",
    "StepSummary": ".summaries",
    "NodeTime": ".summaries",
    "NodeTimes": ".summaries",
    "Canvas": ".canvas",
    "STYLE_NAMES": ".canvas",
    "GraphSnapshot": "..engine.graph",
    "Inventory": "..engine.graph",
    "HOUSEKEEPING": "..engine.graph",
    "NodeFacts": "..engine.graph",
    "node_facts": "..engine.graph",
    "attribute_node_ids": "..engine.graph",
    "line_index": "..engine.graph",
    "demangle": "..engine.graph",
    "BoxLayout": "..engine.draw",
    "GraphLayout": "..engine.draw",
    "HEAT_SCALE": "..engine.draw",
    "band_label": "..engine.draw",
    "format_time": "..engine.draw",
    "heat_band": "..engine.draw",
    "FreezeviewError": "..engine.plumbing",
    "BadInputError": "..engine.plumbing",
    "WRITTEN_HELP": "..engine.reasons",
    "LoadedModel": "..engine.load",
    "forget_recent": "..engine.diff",
    "change_word": "..engine.measure",
    "Handoff": ".collector",
}

__all__ = [
    "ENGINE_CALLS",
    "HEAT_SCALE",
    "HOUSEKEEPING",
    "STYLE_NAMES",
    "WRITTEN_HELP",
    "AttrSummary",
    "BadInputError",
    "BoxLayout",
    "Canvas",
    "EngineError",
    "EngineSession",
    "FreezeviewError",
    "GraphLayout",
    "GraphSnapshot",
    "Handoff",
    "Inventory",
    "LoadedModel",
    "MigrationSummary",
    "NodeFacts",
    "NodeTime",
    "NodeTimes",
    "OpenedSummary",
    "PassSummary",
    "Preserved",
    "ReasonSummary",
    "RemoteSession",
    "Session",
    "SessionOptions",
    "StepSummary",
    "Written",
    "attribute_node_ids",
    "band_label",
    "change_word",
    "collector",
    "demangle",
    "forget_recent",
    "format_time",
    "heat_band",
    "line_index",
    "node_facts",
]


def __getattr__(name: str) -> Any:
    home = _HOMES.get(name)
    if home is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(home, __name__), name)
    globals()[name] = value
    return value
