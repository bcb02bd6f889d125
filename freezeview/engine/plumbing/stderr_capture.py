"""What torch's C++ writes to standard error, captured below Python.

torch's C++ logging and warnings go to ``std::cerr``, file descriptor 2, which
``sys.stderr`` never sees: freezeview reads torch's freezing log (the statuses'
cross-check) and a load's C++ warnings this way, and hands everything else back.
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import threading
from collections.abc import Iterator

__all__ = ["capture_stderr_fd"]

# Redirecting descriptor 2 is process-wide: one capture at a time.
_CAPTURE_LOCK = threading.Lock()


@contextlib.contextmanager
def capture_stderr_fd(keep: re.Pattern[str]) -> Iterator[list[str]]:
    """Capture what is written to file descriptor 2 inside the block.

    torch's C++ logging writes to ``std::cerr``, below Python's ``sys.stderr``, so the
    descriptor itself is pointed at a temporary file. Lines that ``keep`` matches (torch's
    freezing log, a warning's first line) are handed to the caller; the others (a progress
    spinner drawing meanwhile, a warning) are written back to the real standard error
    when the block ends, so nothing a user should see is lost.
    """
    lines: list[str] = []
    with _CAPTURE_LOCK, tempfile.TemporaryFile(mode="w+b") as sink:
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            with contextlib.suppress(OSError, ValueError):
                sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            text = sink.read().decode("utf-8", "replace")
            others: list[str] = []
            for line in text.splitlines(keepends=True):
                (lines if keep.match(line) else others).append(line.rstrip("\n"))
            if others:
                with contextlib.suppress(OSError):
                    os.write(2, "\n".join(others).encode() + b"\n")
