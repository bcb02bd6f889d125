"""The cyclic garbage collector, paused while freezeview builds many long-lived objects.

Explaining, checking or drawing a big model builds hundreds of thousands of small objects
(verdicts, snapshots, diffs), none of them cyclic garbage; the collector's passes over
them can cost more than the work itself (a ResNet-50's ``check``: 0.65 s with it, 0.43 s
without). :func:`collector_paused` pauses it and puts it back as the caller had it.
"""

from __future__ import annotations

import contextlib
import gc
import time
from collections.abc import Iterator
from dataclasses import dataclass

__all__ = ["CatchUp", "collector_paused"]


@dataclass
class CatchUp:
    """How long the collector's catch-up took when the block ended (seconds)."""

    seconds: float = 0.0


@contextlib.contextmanager
def collector_paused(frozen_kept: bool | None = None) -> Iterator[CatchUp]:
    """Pause the cyclic garbage collector inside the block.

    What the block built and still holds is long-lived by then: it joins the oldest
    generation at once (``gc.freeze()`` then ``gc.unfreeze()``, two list splices) instead
    of being scanned by a young collection now and a middle one later; a cycle among it
    is still found by the next full collection. When the caller keeps objects frozen
    itself (the app's screen does, session/collector.py), unfreezing would undo that, and a
    young collection would walk all the block built (a 70k-node snapshot: 0.2-0.4 s
    holding the GIL), so what the block built is frozen with them. Such a caller says so
    (``frozen_kept=True``); else whether anything is frozen is asked of ``gc``, which
    walks every frozen object to count them (25 ms on the app's screen, nothing where
    nothing is frozen). Errors put the collector back as it was, without a catch-up.
    """
    catch_up = CatchUp()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        yield catch_up
    except BaseException:
        if was_enabled:
            gc.enable()
        raise
    if was_enabled:
        start = time.perf_counter()
        if frozen_kept is None:
            frozen_kept = gc.get_freeze_count() > 0
        if not frozen_kept:
            gc.freeze()
            gc.unfreeze()
            gc.enable()
        else:
            gc.freeze()
            gc.enable()
        catch_up.seconds = time.perf_counter() - start
