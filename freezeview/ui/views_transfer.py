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

Imports no torch (the screen's process uses it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

from .views import AttrView

__all__ = ["ViewsDecoder", "ViewsEncoder", "ViewsSent"]


@dataclasses.dataclass(frozen=True)
class ViewsSent:
    """One explain answer on its way: the views (whole, or as changes) and the module
    tree (None when it was sent before)."""

    inventory: Any
    #: Every view, when the last list is no base (the first answer, another length).
    whole: tuple[AttrView, ...] | None = None
    #: Otherwise the views that differ from the last list, by position.
    changes: tuple[tuple[int, AttrView], ...] = ()
    #: True for torch's statuses with every reason pending.
    pending: bool = False


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
        if last is None or len(last) != len(views):
            return ViewsSent(inventory, whole=tuple(views), pending=pending)
        # Views shared with the last list (the kept explanations share equal ones) are
        # skipped by identity; the others compare by value.
        changes = tuple(
            (i, view)
            for i, (old, view) in enumerate(zip(last, views, strict=True))
            if view is not old and view != old
        )
        if 2 * len(changes) > len(views):
            return ViewsSent(inventory, whole=tuple(views), pending=pending)
        return ViewsSent(inventory, changes=changes, pending=pending)


class ViewsDecoder:
    """The screen's side: the views each message carries, from the last list decoded.

    Decode every message of one engine process, in arrival order (a new engine process
    starts a new decoder).
    """

    def __init__(self) -> None:
        self._last: dict[bool, list[AttrView]] = {}

    def decode(self, sent: ViewsSent) -> tuple[list[AttrView], Any]:
        """The views and the module tree (None when unchanged) of ``sent``."""
        if sent.whole is not None:
            views = list(sent.whole)
        else:
            views = list(self._last[sent.pending])
            for i, view in sent.changes:
                views[i] = view
        self._last[sent.pending] = views
        return list(views), sent.inventory
