"""An explain's summaries as they cross from the engine process to the screen.

Every explain answers with a summary of each attribute (on a big model, megabytes
pickled, and as long again to unpickle as to pickle), and a toggle changes a few of
them. :class:`SummariesSent` carries the summaries whole, or only those that differ from the
last summaries sent of the same kind: torch's statuses with every reason pending (the first
answer of a toggle to names never explained), or the summaries with freezeview's reasons.
:class:`SummariesEncoder` (engine side) and :class:`SummariesDecoder` (screen side) each keep
the last list of each kind, and stay in step as long as every summaries message is encoded
in the order it is sent and decoded in the order it arrives, whoever it was for (a
cancelled explain's answer too).

A big model's summaries, and its module tree, go pickled in slices of :data:`SLICE_ITEMS`
(all of them in one ``pickle.loads`` would hold the screen's GIL, so every key, for as
long as it takes): the screen unpickles them a slice at a time, and its event loop has
its turn between two slices.

Imports no torch (the screen's process uses it).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from typing import Any

from ..engine.graph import Inventory  # torch-free values
from . import collector
from .graph_wire import yield_turn
from .summaries import AttrSummary

__all__ = ["SLICE_ITEMS", "InventorySent", "SummariesDecoder", "SummariesEncoder", "SummariesSent"]

#: Summaries (or a module tree's entries) a slice holds: few enough that a key waits
#: for one slice's unpickling at most. Fewer than this many go whole.
SLICE_ITEMS = 1000


def _slices(items: Sequence[Any]) -> tuple[bytes, ...]:
    """``items`` pickled :data:`SLICE_ITEMS` at a time."""
    return tuple(
        pickle.dumps(list(items[i : i + SLICE_ITEMS]), protocol=pickle.HIGHEST_PROTOCOL)
        for i in range(0, len(items), SLICE_ITEMS)
    )


def _joined(slices: Sequence[bytes]) -> list[Any]:
    """What :func:`_slices` pickled, a slice at a time, with other threads' turn at the
    GIL between two."""
    items: list[Any] = []
    for i, data in enumerate(slices):
        if i:
            yield_turn(0.0005)
        with collector.paused():
            items.extend(pickle.loads(data))
    return items


@dataclasses.dataclass(frozen=True)
class InventorySent:
    """A big model's module tree on its way, its lists in slices."""

    modules: tuple[bytes, ...]
    attributes: tuple[bytes, ...]

    @classmethod
    def of(cls, inventory: Any) -> Any:
        """``inventory`` as it is sent: in slices if it is big, else itself."""
        attributes = getattr(inventory, "attributes", None)
        if not isinstance(attributes, list) or len(attributes) <= SLICE_ITEMS:
            return inventory
        return cls(_slices(inventory.modules), _slices(attributes))

    def received(self) -> Any:
        """The module tree, unpickled a slice at a time."""
        return Inventory(modules=_joined(self.modules), attributes=_joined(self.attributes))


@dataclasses.dataclass(frozen=True)
class SummariesSent:
    """One explain answer on its way: the summaries (whole, or as changes) and the module
    tree (None when it was sent before)."""

    #: The module tree (an :class:`InventorySent` when big), or None when sent before.
    inventory: Any
    #: Every view, when the last list is no base (the first answer, another length).
    whole: tuple[AttrSummary, ...] | None = None
    #: Otherwise the summaries that differ from the last list, by position.
    changes: tuple[tuple[int, AttrSummary], ...] = ()
    #: True for torch's statuses with every reason pending.
    pending: bool = False
    #: Every view, pickled in slices (instead of ``whole``: more than one slice's worth).
    whole_slices: tuple[bytes, ...] | None = None


class SummariesEncoder:
    """The engine's side: encodes each summaries message against the last one encoded.

    Not thread-safe on its own: encode and send under one lock, so the messages leave
    in the order they were encoded.
    """

    def __init__(self) -> None:
        self._last: dict[bool, list[AttrSummary]] = {}

    def encode(
        self, summaries: Sequence[AttrSummary], inventory: Any, pending: bool
    ) -> SummariesSent:
        """``summaries`` as changes to the last summaries of their kind encoded, or whole.

        Args:
            summaries: every attribute's view.
            inventory: the module tree, or None when sent before.
            pending: whether these are torch's statuses with every reason pending.
        """
        last = self._last.get(pending)
        self._last[pending] = list(summaries)
        inventory = InventorySent.of(inventory)
        if last is None or len(last) != len(summaries):
            return self._whole(summaries, inventory, pending)
        # Summaries shared with the last list (the kept explanations share equal ones) are
        # skipped by identity; the others compare by value.
        changes = tuple(
            (i, view)
            for i, (old, view) in enumerate(zip(last, summaries, strict=True))
            if view is not old and view != old
        )
        if 2 * len(changes) > len(summaries):
            return self._whole(summaries, inventory, pending)
        return SummariesSent(inventory, changes=changes, pending=pending)

    @staticmethod
    def _whole(summaries: Sequence[AttrSummary], inventory: Any, pending: bool) -> SummariesSent:
        if len(summaries) > SLICE_ITEMS:
            return SummariesSent(inventory, whole_slices=_slices(summaries), pending=pending)
        return SummariesSent(inventory, whole=tuple(summaries), pending=pending)


class SummariesDecoder:
    """The screen's side: the summaries each message carries, from the last list decoded.

    Decode every message of one engine process, in arrival order (a new engine process
    starts a new decoder).
    """

    def __init__(self) -> None:
        self._last: dict[bool, list[AttrSummary]] = {}

    def decode(self, sent: SummariesSent) -> tuple[list[AttrSummary], Any]:
        """The summaries and the module tree (None when unchanged) of ``sent``."""
        if sent.whole_slices is not None:
            summaries = _joined(sent.whole_slices)
        elif sent.whole is not None:
            summaries = list(sent.whole)
        else:
            summaries = list(self._last[sent.pending])
            for i, view in sent.changes:
                summaries[i] = view
        self._last[sent.pending] = summaries
        inventory = sent.inventory
        if isinstance(inventory, InventorySent):
            inventory = inventory.received()
        return list(summaries), inventory
