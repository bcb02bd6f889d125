"""Draw: snapshots and diffs in, pictures out (Graphviz SVGs, and layouts for the terminal).

The map, in the order the sub-packages import each other (each uses only those above it):

- :mod:`.dot`: Graphviz's ``dot`` program and its DOT text: the text written as the
  ``graphviz`` package writes it, the program run with a timeout, in the background
  (:class:`DotQueue`), and the ceiling of what it lays out in time (:class:`Overruns`).
- :mod:`.folding`: a snapshot (or a diff) folded to a level of detail: constants folded
  into rows of their users, each op's module scope, the boxes a level would count, the
  level chosen within a budget (:class:`RenderOptions`), and the drawing built from it
  (boxes, edges, clusters).
- :mod:`.pictures`: the pictures written to files (SVG, PNG, DOT): a drawing as DOT, handed
  to Graphviz, coarser levels on an overrun (:func:`render_snapshot`, :func:`render_diff`,
  :func:`render_side_by_side`, and their ``start_*`` forms).
- :mod:`.terminal`: a drawing laid out by Graphviz on a grid of terminal cells, for the
  app's graph view.

Uses diff, graph and plumbing. The names below are the stage's offer to later stages.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .dot.ceiling import Overruns
    from .dot.queue import DotQueue
    from .dot.run import DotFailedError, DotTimeoutError, GraphvizMissingError, find_dot
    from .folding.plan import RenderOptions
    from .folding.prepared import forget_prepared
    from .folding.scopes import module_paths
    from .pictures.overlay import HEAT_SCALE, Overlay, band_label, format_time, heat_band
    from .pictures.render import (
        FORMATS,
        PendingPicture,
        RenderResult,
        render_diff,
        render_side_by_side,
        render_snapshot,
        start_diff,
        start_side_by_side,
        start_snapshot,
    )
    from .terminal.layout import TERMINAL_BUDGET, layout_graph
    from .terminal.values import BoxLayout, GraphLayout

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Overruns": "dot.ceiling",
        "DotQueue": "dot.queue",
        "DotFailedError": "dot.run",
        "DotTimeoutError": "dot.run",
        "GraphvizMissingError": "dot.run",
        "find_dot": "dot.run",
        "RenderOptions": "folding.plan",
        "forget_prepared": "folding.prepared",
        "module_paths": "folding.scopes",
        "HEAT_SCALE": "pictures.overlay",
        "Overlay": "pictures.overlay",
        "heat_band": "pictures.overlay",
        "band_label": "pictures.overlay",
        "format_time": "pictures.overlay",
        "FORMATS": "pictures.render",
        "PendingPicture": "pictures.render",
        "RenderResult": "pictures.render",
        "render_diff": "pictures.render",
        "render_side_by_side": "pictures.render",
        "render_snapshot": "pictures.render",
        "start_diff": "pictures.render",
        "start_side_by_side": "pictures.render",
        "start_snapshot": "pictures.render",
        "TERMINAL_BUDGET": "terminal.layout",
        "layout_graph": "terminal.layout",
        "BoxLayout": "terminal.values",
        "GraphLayout": "terminal.values",
    },
)

__all__ = [
    "FORMATS",
    "HEAT_SCALE",
    "TERMINAL_BUDGET",
    "BoxLayout",
    "DotFailedError",
    "DotQueue",
    "DotTimeoutError",
    "GraphLayout",
    "GraphvizMissingError",
    "Overlay",
    "Overruns",
    "PendingPicture",
    "RenderOptions",
    "RenderResult",
    "band_label",
    "find_dot",
    "forget_prepared",
    "format_time",
    "heat_band",
    "layout_graph",
    "module_paths",
    "render_diff",
    "render_side_by_side",
    "render_snapshot",
    "start_diff",
    "start_side_by_side",
    "start_snapshot",
]
