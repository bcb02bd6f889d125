"""Textual's caches kept from holding what the screen dropped (freezeview/ui/textual_caches.py).

The module reaches into Textual's private parts; these tests fail when those parts
change under it (a Textual release that renames them, or fixes the cause), so that the
patch is looked at again rather than silently doing nothing.
"""

from __future__ import annotations

import sys
import weakref

import pytest
from rich.segment import Segment
from textual.cache import LRUCache
from textual.color import Color
from textual.strip import Strip

from freezeview.ui import textual_caches


def test_the_private_parts_patched_are_still_there() -> None:
    """What :func:`~freezeview.ui.textual_caches.untie` and
    :func:`~freezeview.ui.textual_caches.forget_removed_widgets_lines` rely on. A
    failure here: Textual changed; read the module's docstring and its upstream issue."""
    strip = Strip([Segment("abc")], 3)
    for name in ("divide", "crop_extend", "cell_length"):
        assert hasattr(Strip, name), name
    for name in ("_divide_cache", "_crop_extend_cache"):  # a strip's own caches
        assert isinstance(getattr(strip, name)._cache, dict), name
    cache: LRUCache[int, int] = LRUCache(4)
    cache[1] = 1
    links = list(cache._cache.values())
    assert links and all(isinstance(link, list) and len(link) == 4 for link in links)
    from textual._styles_cache import StylesCache

    assert callable(StylesCache.get_inner_outer.cache_clear)  # type: ignore[attr-defined]


def test_untied_strips_and_caches_hold_no_cycle_of_their_own() -> None:
    """A strip cut at its end or cropped to its whole length is itself, as in Textual,
    but not kept in its own caches (a cycle: once frozen, only a deep sweep freed it),
    and a cleared LRU cache leaves no ring of entries behind."""
    textual_caches.untie()
    textual_caches.untie()  # idempotent
    strip = Strip([Segment("abc"), Segment("de")], 5)
    assert strip.divide([5]) == [strip] and strip.divide([5])[0] is strip
    assert strip.crop_extend(0, 5, None) is strip
    halves = [Strip([Segment("ab")], 2), Strip([Segment("c"), Segment("de")], 3)]
    assert strip.divide([2, 5]) == halves
    assert strip.crop_extend(1, 7, None).text == "bcde  "
    cached = [v for c in (strip._divide_cache, strip._crop_extend_cache) for v in c._cache.values()]
    assert all(v is not strip and v != [strip] for v in cached)
    cache: LRUCache[int, list[int]] = LRUCache(8)
    for i in range(5):
        cache[i] = [i]
    links = list(cache._cache.values())
    cache.clear()
    assert all(link == [] for link in links) and len(cache) == 0
    cache[1] = [1]
    assert cache.get(1) == [1]


def test_the_styles_caches_of_removed_widgets_are_let_go() -> None:
    """Textual's ``StylesCache.get_inner_outer`` is an ``lru_cache`` on a method: it
    holds up to 1024 widgets' styles caches, with the lines each last drew, long after
    the widgets are gone (https://github.com/Textualize/textual/issues/6665). Emptied,
    they go. A failure of the first assertion: Textual fixed it; the emptying can go."""
    from textual._styles_cache import StylesCache

    cache = StylesCache()
    cache.get_inner_outer(Color(10, 20, 30), Color(40, 50, 60))
    gone = weakref.ref(cache)
    del cache
    assert gone() is not None, "Textual's get_inner_outer no longer holds styles caches"
    textual_caches.forget_removed_widgets_lines()
    assert gone() is None  # freed by reference counting: no collection needed


def test_a_textual_without_that_styles_cache_module_is_left_alone(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``textual._styles_cache`` is private: a Textual release without it leaves nothing
    to empty, and no error reaches the screen's deep sweep."""
    monkeypatch.setitem(sys.modules, "textual._styles_cache", None)  # import fails
    textual_caches.forget_removed_widgets_lines()
