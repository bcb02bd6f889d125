"""One object for equal values: lists of per-path values kept side by side share them.

The app keeps the verdicts of the last few sets of preserved names (and its views of
them); a toggle changes a few of thousands. Python has no structural sharing for such
lists (``sys.intern`` is for strings only), so :func:`reuse_equal` puts the kept list's
object in each slot whose value equals it, path by path.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, Protocol, TypeVar

__all__ = ["reuse_equal"]


class _ByPath(Protocol):
    @property
    def path(self) -> str: ...


T = TypeVar("T", bound=_ByPath)


def reuse_equal(items: list[T], kept: Iterable[Any]) -> None:
    """Replace, in place, each of ``items`` by ``kept``'s item of the same ``path`` when
    the two are equal: the same values, one copy of each in memory."""
    same = {item.path: item for item in kept}
    for i, item in enumerate(items):
        old = same.get(item.path)
        if old is not None and old is not item and old == item:
            items[i] = old
