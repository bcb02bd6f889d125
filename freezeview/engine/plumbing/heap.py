"""Memory a stage freed, given back to the system before the next stage builds its own.

torch's graphs and modules live on the C heap; Python's small objects (snapshots, views,
diffs) come from arenas mapped apart from it. When an export lets go of a 70k-node
model's graphs and tensors, the C heap keeps the freed pages (glibc returns only the
free top of the heap), and the snapshots built next take new pages: the process's peak
is both together. :func:`give_back_freed_memory` asks glibc to return every free page
(``malloc_trim(0)``); elsewhere (musl, macOS, Windows) it does nothing.
:func:`resident_bytes` is the process's size as the system counts it (its resident set).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import sys
from collections.abc import Callable

__all__ = ["give_back_freed_memory", "resident_bytes"]


@functools.cache
def _malloc_trim() -> Callable[[int], int] | None:
    if not sys.platform.startswith("linux"):
        return None
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        trim = libc.malloc_trim
    except (OSError, AttributeError):
        return None  # not glibc
    trim.argtypes = [ctypes.c_size_t]
    trim.restype = ctypes.c_int
    return trim  # type: ignore[no-any-return]


def give_back_freed_memory() -> bool:
    """Return the C heap's free pages to the system (glibc); a no-op elsewhere.

    Call it after letting go of large torch objects (graphs, modules, tensors), before
    building the next big thing, so that the freed memory and the new objects are not
    counted together.

    Returns:
        True if glibc was asked (and returned some memory or none), False where there
        is no ``malloc_trim``.
    """
    trim = _malloc_trim()
    if trim is None:
        return False
    trim(0)
    return True


def resident_bytes() -> int | None:
    """This process's resident set size in bytes (Linux), or None where it is not known.

    Read from ``/proc/self/statm``: a few microseconds, no walk of any heap.
    """
    try:
        with open("/proc/self/statm", "rb") as f:
            pages = int(f.read().split()[1])
    except (OSError, ValueError, IndexError):
        return None
    return pages * os.sysconf("SC_PAGE_SIZE")
