"""Draw: snapshots and diffs in, Graphviz pictures out.

:mod:`.collapse` turns a snapshot (or a diff) into the boxes freezeview draws, folded
by module at the level that fits (:mod:`.view_scopes`, :mod:`.view_folding`,
:mod:`.render_plan`, :mod:`.box_ceiling`); :mod:`.render_start` plans and starts each
picture (:func:`render_snapshot`, :func:`render_diff`, :func:`render_side_by_side`) and
:mod:`.render` hands its DOT to Graphviz with timeouts and coarser fallbacks. Uses diff,
graph and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .box_ceiling import Overruns
    from .dot_queue import DotQueue
    from .render import (
        FORMATS,
        DotFailedError,
        DotTimeoutError,
        GraphvizMissingError,
        PendingPicture,
        RenderResult,
        find_dot,
    )
    from .render_plan import RenderOptions
    from .render_start import (
        render_diff,
        render_side_by_side,
        render_snapshot,
        start_diff,
        start_side_by_side,
        start_snapshot,
    )
    from .view_prepared import forget_prepared
    from .view_scopes import module_paths

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Overruns": "box_ceiling",
        "FORMATS": "render",
        "DotFailedError": "render",
        "DotQueue": "dot_queue",
        "PendingPicture": "render",
        "start_diff": "render_start",
        "start_side_by_side": "render_start",
        "start_snapshot": "render_start",
        "DotTimeoutError": "render",
        "GraphvizMissingError": "render",
        "RenderResult": "render",
        "find_dot": "render",
        "render_diff": "render_start",
        "render_side_by_side": "render_start",
        "render_snapshot": "render_start",
        "RenderOptions": "render_plan",
        "forget_prepared": "view_prepared",
        "module_paths": "view_scopes",
    },
)

__all__ = [
    "FORMATS",
    "DotFailedError",
    "DotQueue",
    "DotTimeoutError",
    "GraphvizMissingError",
    "Overruns",
    "PendingPicture",
    "RenderOptions",
    "RenderResult",
    "find_dot",
    "forget_prepared",
    "module_paths",
    "render_diff",
    "render_side_by_side",
    "render_snapshot",
    "start_diff",
    "start_side_by_side",
    "start_snapshot",
]
