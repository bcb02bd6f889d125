"""What a picture can carry over its boxes: the forward's time (a heat fill) and a mark.

An :class:`Overlay` is handed to the ``start_*`` / ``render_*`` functions with the
pictures' usual arguments: each box whose nodes were timed is filled by its share of the
forward's time (:data:`HEAT_SCALE`, fixed bands, so the pictures of two steps compare at a
glance), a module box at a folded level adding up its ops' times; its tooltip says the
time, the share and the clock that measured it. Boxes showing an outlined node get a thick
outline (``where the numbers move``). Without an overlay nothing of this is written: the
DOT text, and so the picture, is what it always was.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field

from ..folding.drawing import Box

__all__ = ["HEAT_SCALE", "OUTLINE", "Overlay", "format_time", "heat_band"]

#: (upper bound of the share, fill, text colour): the heat scale, lowest band first. A
#: share at or above the last bound falls in the last band.
HEAT_SCALE: tuple[tuple[float, str, str], ...] = (
    (0.005, "#fff5eb", "#1f2328"),
    (0.01, "#fee6ce", "#1f2328"),
    (0.02, "#fdd0a2", "#1f2328"),
    (0.05, "#fdae6b", "#1f2328"),
    (0.10, "#fd8d3c", "#1f2328"),
    (0.20, "#e6550d", "#ffffff"),
    (float("inf"), "#a63603", "#ffffff"),
)

#: The outline of a box whose node is where the numbers move: (colour, pen width).
OUTLINE = ("#0a3069", "5")


def heat_band(share: float) -> int:
    """The index in :data:`HEAT_SCALE` of the band ``share`` (0..1) falls in."""
    for index, (upper, _fill, _text) in enumerate(HEAT_SCALE):
        if share < upper:
            return index
    return len(HEAT_SCALE) - 1


def band_label(index: int) -> str:
    """``0.5-1 %``, ``< 0.5 %``, ``>= 20 %``: a band of :data:`HEAT_SCALE` in words."""
    upper = HEAT_SCALE[index][0]
    lower = HEAT_SCALE[index - 1][0] if index else 0.0
    if index == 0:
        return f"< {100 * upper:g} %"
    if upper == float("inf"):
        return f">= {100 * lower:g} %"
    return f"{100 * lower:g}-{100 * upper:g} %"


def format_time(ms: float) -> str:
    """``0.123 ms``, ``12.3 us``: a node's time, short."""
    return f"{ms:.3g} ms" if ms >= 0.1 else f"{1000 * ms:.3g} us"


@dataclass(frozen=True)
class Overlay:
    """The per-node facts a picture shows over its boxes.

    Attributes:
        times: milliseconds per forward, by node id of the drawn graph (the snapshot's).
        total_ms: what a share is of: the forward's timed nodes together.
        clock: which tool measured the times, for the tooltip and legend
            (``Static Runtime``, ``torch.profiler``).
        ghost_times: milliseconds by node id of the graph before (a diff's removed ops).
        outlined: node ids of the drawn graph whose box is outlined.
    """

    times: Mapping[int, float] = field(default_factory=dict)
    total_ms: float = 0.0
    clock: str = ""
    ghost_times: Mapping[int, float] = field(default_factory=dict)
    outlined: frozenset[int] = frozenset()

    @property
    def heat(self) -> bool:
        """True when boxes are filled by their time."""
        return bool(self.times) and self.total_ms > 0

    def box_ms(self, box: Box) -> float | None:
        """The time of the nodes ``box`` shows (a module box: its ops together), or None
        when none of them was timed. A removed op (a ghost) is read in ``ghost_times``."""
        if box.role == "ghost":
            found = [self.ghost_times[i] for i in box.node_ids if i in self.ghost_times]
        else:
            found = [self.times[i] for i in box.node_ids if i in self.times]
        return sum(found) if found else None

    def share(self, box: Box) -> float | None:
        """``box``'s time over the forward's (0..1), or None when it was not timed."""
        ms = self.box_ms(box)
        if ms is None or self.total_ms <= 0:
            return None
        return ms / self.total_ms

    def time_text(self, box: Box) -> str:
        """``time 0.12 ms, 4.5 % of the forward (Static Runtime)``, or ``""``."""
        ms = self.box_ms(box)
        if ms is None or self.total_ms <= 0:
            return ""
        clock = f" ({self.clock})" if self.clock else ""
        if box.role == "ghost":
            return f"time before this step {format_time(ms)}{clock}"
        return f"time {format_time(ms)}, {100 * ms / self.total_ms:.1f} % of the forward{clock}"

    def marks(self, box: Box) -> bool:
        """True when ``box`` shows an outlined node."""
        return box.role != "ghost" and any(i in self.outlined for i in box.node_ids)
