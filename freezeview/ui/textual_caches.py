"""Textual's caches, kept from holding what the screen dropped: the one place that
reaches into Textual's private parts for memory.

The screen freezes what it holds (session/collector.py: no full collection walks it), so
an object it drops must be freed by reference counting; what a cycle or a global cache
keeps stays until a deep sweep, or for good. Three of Textual's caches did that, and
Textual has no public way to stop them:

- ``Strip.divide`` and ``Strip.crop_extend`` keep their result in a cache of the strip
  they were called on; when the result is the strip itself (a cut at its end, a crop to
  its whole length: what the compositor asks of most lines) that is a cycle. No upstream
  issue was found.
- ``LRUCache.clear()`` leaves its ring of links (``[prev, next, key, value]``) as
  cyclic garbage, and every value it held with it (the steps table clears its row caches
  at every new row). No upstream issue was found.
- ``StylesCache.get_inner_outer`` (in the private ``textual._styles_cache``) is an
  ``functools.lru_cache`` on a method: it keys its entries by the styles cache it was
  called on, so it holds up to 1024 removed widgets' styles caches with the lines each
  last drew. Upstream: https://github.com/Textualize/textual/issues/6665 (open).

:func:`untie` patches the first two at the app's start (idempotent);
:func:`forget_removed_widgets_lines` empties the third, and the app hands it to the
collector to call before each deep sweep
(``collector.install(before_deep_sweep=...)``). A Textual without these names leaves
nothing to patch or empty, silently at run time; tests/ui/test_textual_caches.py fails
when any of them changes, so that the patch is looked at again (or dropped, once Textual
fixes the cause).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

__all__ = ["forget_removed_widgets_lines", "untie"]

# Set on Strip once patched: untie() is idempotent.
_UNTIED = "_freezeview_untied"


def untie() -> None:
    """Textual's strips and LRU caches no longer hold themselves in reference cycles:
    what the screen drops is freed at once, frozen or not.

    - ``Strip.divide`` and ``Strip.crop_extend`` return the strip itself, when that is
      their result, before reaching the strip's cache (as they would from it); every
      other result is computed and cached as before.
    - ``LRUCache.clear`` empties its links before clearing, so no ring is left.

    A strip or a ring frozen while in use and dropped later stayed, with all it held,
    until a deep sweep: nine in ten of the objects a deep sweep freed. Idempotent.
    """
    from textual.cache import LRUCache
    from textual.strip import Strip

    if getattr(Strip, _UNTIED, False):
        return
    if not all(hasattr(Strip, name) for name in ("divide", "crop_extend", "cell_length")):
        return  # a Textual without these: nothing of ours to patch
    divide, crop_extend, clear = Strip.divide, Strip.crop_extend, LRUCache.clear

    def divide_untied(self: Strip, cuts: Iterable[int]) -> Sequence[Strip]:
        cuts = list(cuts)
        length = self.cell_length
        if [cut for cut in cuts if cut <= length] == [length]:
            return [self]
        return divide(self, cuts)

    def crop_extend_untied(self: Strip, start: int, end: int, style: Any) -> Strip:
        if start <= 0 and end == self.cell_length:
            return self
        return crop_extend(self, start, end, style)

    def clear_untied(self: LRUCache[Any, Any]) -> None:
        for link in getattr(self, "_cache", {}).values():
            if isinstance(link, list):  # Textual's links: [prev, next, key, value]
                link.clear()
        clear(self)

    Strip.divide = divide_untied  # type: ignore[method-assign]
    Strip.crop_extend = crop_extend_untied  # type: ignore[method-assign]
    LRUCache.clear = clear_untied  # type: ignore[method-assign]
    setattr(Strip, _UNTIED, True)


def forget_removed_widgets_lines() -> None:
    """Empty the cache of Textual's ``StylesCache.get_inner_outer``, and with it the
    styles caches (and the lines they last drew) of widgets long removed. Its values are
    two colours, made again at once. Nothing to empty on a Textual without it."""
    try:  # a private module of Textual's
        from textual._styles_cache import StylesCache
    except ImportError:
        return
    clear = getattr(getattr(StylesCache, "get_inner_outer", None), "cache_clear", None)
    if clear is not None:
        clear()
