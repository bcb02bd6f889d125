"""Ctrl-C that waits for torch's C++ to hand control back.

Python raises KeyboardInterrupt between bytecodes of the main thread. When that
bytecode belongs to a Python function libtorch is calling from C++ (while ``import
torch`` initialises the library, while ``torch.jit.load`` resolves classes), the
exception cannot unwind through the C++ frames: pybind11 turns it into
``terminate called after throwing an instance of 'pybind11::error_already_set'`` and
the process aborts, or Python prints an "Exception ignored" traceback and goes on.
freezeview holds Ctrl-C across those calls and raises it as soon as they return, so an
interrupted command always ends with its usual one line and exit code 130.
"""

from __future__ import annotations

import contextlib
import signal
import threading
from collections.abc import Iterator

__all__ = ["interrupts_deferred"]


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Hold SIGINT inside the block; raise KeyboardInterrupt after it if one came.

    Only the main thread can install signal handlers, and a handler someone else
    installed (not Python's default) is left alone: elsewhere this does nothing.
    """
    if (
        threading.current_thread() is not threading.main_thread()
        or signal.getsignal(signal.SIGINT) is not signal.default_int_handler
    ):
        yield
        return
    pending: list[int] = []

    def hold(signum: int, frame: object) -> None:
        pending.append(signum)

    signal.signal(signal.SIGINT, hold)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, signal.default_int_handler)
    if pending:
        raise KeyboardInterrupt
