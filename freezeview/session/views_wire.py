"""An explain's views as they cross from the engine process to the screen.

Every explain answers with a view of each attribute (10.7k at 512 blocks, 1.5 MB
pickled, 30 ms to pickle and as long again to unpickle), and a toggle changes a few of
them. :class:`ViewsSent` carries the views whole, or only those that differ from the
last views sent of the same kind: torch's statuses with every reason pending (the first
answer of a toggle to names never explained), or the views with freezeview's reasons.
:class:`ViewsEncoder` (engine side) and :class:`ViewsDecoder` (screen side) each keep
the last list of each kind, and stay in step as long as every views message is encoded
in the order it is sent and decoded in the order it arrives, whoever it was for (a
cancelled explain's answer too).

A big model's views, and its module tree, go pickled in slices of :data:`SLICE_ITEMS`
(a 2,048-block stack's 43k views and as many attributes in one ``pickle.loads`` held
the screen's GIL, so every key, for 0.1 s): the screen unpickles them a slice at a
time, and its event loop has its turn between two slices.

Imports no torch (the screen's process uses it).
"""

from __future__ import annotations

import dataclasses
import pickle
from collections.abc import Sequence
from typing import Any

from ..engine.graph.inventory_values import Inventory  # torch-free values
from . import collector
from .graph_wire import yield_turn
from .views import AttrView

__all__ = ["SLICE_ITEMS", "InventorySent", "ViewsDecoder", "ViewsEncoder", "ViewsSent"]

#: Views (or a module tree's entries) a slice holds: a couple of milliseconds of
#: unpickling. Fewer than this many go whole.
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
class ViewsSent:
    """One explain answer on its way: the views (whole, or as changes) and the module
    tree (None when it was sent before)."""

    #: The module tree (an :class:`InventorySent` when big), or None when sent before.
    inventory: Any
    #: Every view, when the last list is no base (the first answer, another length).
    whole: tuple[AttrView, ...] | None = None
    #: Otherwise the views that differ from the last list, by position.
    changes: tuple[tuple[int, AttrView], ...] = ()
    #: True for torch's statuses with every reason pending.
    pending: bool = False
    #: Every view, pickled in slices (instead of ``whole``: more than one slice's worth).
    whole_slices: tuple[bytes, ...] | None = None


class ViewsEncoder:
    """The engine's side: encodes each views message against the last one encoded.

    Not thread-safe on its own: encode and send under one lock, so the messages leave
    in the order they were encoded.
    """

    def __init__(self) -> None:
        self._last: dict[bool, list[AttrView]] = {}

    def encode(self, views: Sequence[AttrView], inventory: Any, pending: bool) -> ViewsSent:
        """``views`` as changes to the last views of their kind encoded, or whole.

        Args:
            views: every attribute's view.
            inventory: the module tree, or None when sent before.
            pending: whether these are torch's statuses with every reason pending.
        """
        last = self._last.get(pending)
        self._last[pending] = list(views)
        inventory = InventorySent.of(inventory)
        if last is None or len(last) != len(views):
            return self._whole(views, inventory, pending)
        # Views shared with the last list (the kept explanations share equal ones) are
        # skipped by identity; the others compare by value.
        changes = tuple(
            (i, view)
            for i, (old, view) in enumerate(zip(last, views, strict=True))
            if view is not old and view != old
        )
        if 2 * len(changes) > len(views):
            return self._whole(views, inventory, pending)
        return ViewsSent(inventory, changes=changes, pending=pending)

    @staticmethod
    def _whole(views: Sequence[AttrView], inventory: Any, pending: bool) -> ViewsSent:
        if len(views) > SLICE_ITEMS:
            return ViewsSent(inventory, whole_slices=_slices(views), pending=pending)
        return ViewsSent(inventory, whole=tuple(views), pending=pending)


class ViewsDecoder:
    """The screen's side: the views each message carries, from the last list decoded.

    Decode every message of one engine process, in arrival order (a new engine process
    starts a new decoder).
    """

    def __init__(self) -> None:
        self._last: dict[bool, list[AttrView]] = {}

    def decode(self, sent: ViewsSent) -> tuple[list[AttrView], Any]:
        """The views and the module tree (None when unchanged) of ``sent``."""
        if sent.whole_slices is not None:
            views = _joined(sent.whole_slices)
        elif sent.whole is not None:
            views = list(sent.whole)
        else:
            views = list(self._last[sent.pending])
            for i, view in sent.changes:
                views[i] = view
        self._last[sent.pending] = views
        inventory = sent.inventory
        if isinstance(inventory, InventorySent):
            inventory = inventory.received()
        return list(views), inventory
