"""The graph view's pictures, made where the engine runs and kept per step and level.

:meth:`freezeview.session.local.Session.graph_canvas` hands its calls here: a step's graph,
or its diff against the step before, laid out by Graphviz on a grid of terminal cells
(:func:`freezeview.engine.draw.terminal.layout.layout_graph`) and drawn with characters
(:class:`~freezeview.session.canvas.Canvas`). They are kept by the snapshots they were
made from, the level, the opened boxes and the kept attributes, so stepping back and
forth or zooming out and in again asks dot nothing. In ``freezeview MODEL.pt`` this
runs in the engine process (``RemoteSession.graph_canvas`` names the snapshots by key),
so the diff, dot's run and the drawing never hold the screen's process: it unpickles
rows of text.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..engine.draw import TERMINAL_BUDGET, Overruns, RenderOptions, layout_graph
from ..engine.graph import GraphSnapshot
from . import collector
from .canvas import Canvas

__all__ = ["VIEW_BUDGET", "VIEW_TIMEOUT", "StepLayouts"]

#: Boxes at the view's automatic level: about one screen of a 160x48 terminal.
VIEW_BUDGET = min(TERMINAL_BUDGET, 60)
#: Seconds one dot run of the view may take before it falls back to a coarser level
#: (the SVGs wait longer: they are files, the view is a key press).
VIEW_TIMEOUT = 4.0
# Layouts kept: a few steps, each at a few levels, both plain and as a diff.
_KEPT = 24


class _Superseded(Exception):
    """Another layout was asked for while this one was being made."""


class StepLayouts:
    """Layouts of a model's steps, kept by what they were made from.

    Args:
        modules: the model's module paths (``module_paths``), for the box names.
    """

    def __init__(self, modules: frozenset[str] | None) -> None:
        self.modules = modules
        self.overruns = Overruns()
        self._kept: OrderedDict[tuple[Any, ...], tuple[Any, Canvas]] = OrderedDict()
        self._lock = threading.Lock()
        # Layouts being made now (the view shown while the same one is made ahead).
        self._busy: dict[tuple[Any, ...], threading.Event] = {}
        # The layout asked for last: one asked for before it gives way (_Superseded).
        self._latest: tuple[Any, ...] | None = None

    def canvas(
        self,
        before: GraphSnapshot | None,
        after: GraphSnapshot,
        *,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
        title: str = "",
        rows: int | None = None,
    ) -> Canvas | None:
        """``after`` laid out and drawn (coloured by its diff against ``before`` when
        given); its ``layout`` says where each box is. None when another layout was
        asked for before this one was made (the newer call is the one that counts:
        the view asks again for what it shows).

        Args:
            before: the step before, for the diff; None for the graph alone.
            after: the step's graph.
            level: ``"auto"``, a box depth, or None for every op.
            expand: modules opened down to their ops.
            reasons: kept attribute path -> why it was kept (marked in the view).
            title: the caption.
            rows: the view's pane height, which a module level is fitted to.
        """
        reasons = dict(reasons or {})
        key = (
            id(before),
            id(after),
            level,
            tuple(expand),
            tuple(sorted(reasons.items())),
            rows,
        )
        while True:
            with self._lock:
                self._latest = key
                hit = self._kept.get(key)
                if hit is not None:
                    self._kept.move_to_end(key)
                    return hit[1]
                busy = self._busy.get(key)
                if busy is None:  # this call makes it; a second one waits for it
                    self._busy[key] = threading.Event()
                    break
            busy.wait()
        try:
            # The diff and the layout build many small objects, none of them garbage: the
            # collector's passes over them (and over the engine's big heap) were a large
            # part of a big diff's first frame.
            with collector.paused():
                return self._make(key, before, after, level, expand, reasons, title, rows)
        except _Superseded:
            return None
        finally:
            with self._lock:
                self._busy.pop(key).set()

    def _make(
        self,
        key: tuple[Any, ...],
        before: GraphSnapshot | None,
        after: GraphSnapshot,
        level: int | str | None,
        expand: Sequence[str],
        reasons: dict[str, str],
        title: str,
        rows: int | None,
    ) -> Canvas:
        diff = None
        if before is not None:
            from ..engine.diff import diff_snapshots, index_nodes

            # The diff's parts, each checked for a newer call between them: a layout
            # made ahead for a step the user has left gives way at once (it would
            # share the engine's one core with the layout now wanted).
            index_nodes(before)
            self._still_wanted(key)
            index_nodes(after)
            self._still_wanted(key)
            diff = diff_snapshots(before, after)
        self._still_wanted(key)
        options = RenderOptions(
            budget=VIEW_BUDGET,
            expand=tuple(expand),
            reasons=reasons or None,
            timeout=VIEW_TIMEOUT,
            modules=self.modules,
            overruns=self.overruns,
            edge_labels=False,
        )
        layout = layout_graph(
            after, diff=diff, level=level, options=options, title=title, rows=rows
        )
        result = Canvas(layout)
        with self._lock:
            # The snapshots are held with the layout so their ids stay theirs.
            self._kept[key] = ((before, after), result)
            while len(self._kept) > _KEPT:
                self._kept.popitem(last=False)
        return result

    def _still_wanted(self, key: tuple[Any, ...]) -> None:
        """Raise :class:`_Superseded` when a call for another layout came since."""
        if self._latest != key:
            raise _Superseded

    def picture(
        self,
        before: GraphSnapshot | None,
        after: GraphSnapshot,
        out_dir: Path,
        *,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
    ) -> Path:
        """The view's picture drawn by Graphviz as a PNG in ``out_dir`` (for terminals
        that show pictures): the same boxes, level and opened modules as the view."""
        from ..engine.draw import render_diff, render_snapshot

        options = RenderOptions(
            level=level,
            budget=VIEW_BUDGET,
            expand=tuple(expand),
            reasons=dict(reasons or {}) or None,
            modules=self.modules,
            overruns=self.overruns,
        )
        out_dir.mkdir(parents=True, exist_ok=True)
        name = "diff" if before is not None else "graph"
        path = out_dir / f"{name}-{id(after):x}-{level}-{abs(hash(tuple(expand))):x}.png"
        if path.exists():
            return path
        if before is not None:
            from ..engine.diff import diff_snapshots

            render_diff(diff_snapshots(before, after), path, fmt="png", options=options)
        else:
            render_snapshot(after, path, fmt="png", options=options)
        return path
