"""Freed memory given back to the system (freezeview/engine/plumbing/heap.py)."""

from __future__ import annotations

import ctypes.util
import sys

import pytest

from freezeview.engine.plumbing import give_back_freed_memory, heap


def test_glibc_is_asked_and_elsewhere_nothing_happens(monkeypatch: pytest.MonkeyPatch) -> None:
    glibc = sys.platform.startswith("linux") and ctypes.util.find_library("c") is not None
    asked = give_back_freed_memory()
    assert asked is True or not glibc
    # Without malloc_trim (musl, macOS, Windows) it is a no-op that says so.
    heap._malloc_trim.cache_clear()
    monkeypatch.setattr(heap.sys, "platform", "darwin")
    try:
        assert give_back_freed_memory() is False
    finally:
        heap._malloc_trim.cache_clear()
