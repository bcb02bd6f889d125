"""Test hook: stall freezeview's first output write, so a test can interrupt it.

Active only when this directory is on PYTHONPATH (Python imports ``sitecustomize`` at
start-up) *and* ``FREEZEVIEW_TEST_SLOW_WRITE`` is set. Every freezeview output ends
with ``os.replace(temporary file, final name)``; the hook wraps the first such call:

* ``mid-write``: cut the temporary file to half its bytes (the state of a file being
  written), say ``FV-TEST: writing`` on stderr, then sleep;
* ``before-rename``: leave the temporary file whole, say the same, then sleep.

The sleep ends with the interrupt the test sends (SIGINT -> KeyboardInterrupt), which
must leave the final name untouched and remove the temporary file.
"""

from __future__ import annotations

import os
import sys
import time

_MODE = os.environ.get("FREEZEVIEW_TEST_SLOW_WRITE", "")
_fired = False

if _MODE in ("mid-write", "before-rename"):
    _replace = os.replace

    def _stalling_replace(src, dst, *args, **kwargs):  # type: ignore[no-untyped-def]
        global _fired
        if not _fired and "freezeview-tmp" in os.fspath(src):
            _fired = True
            if _MODE == "mid-write":
                size = os.path.getsize(src)
                os.truncate(src, size // 2)
            sys.stderr.write(f"FV-TEST: writing {os.fspath(dst)}\n")
            sys.stderr.flush()
            time.sleep(120)
        return _replace(src, dst, *args, **kwargs)

    os.replace = _stalling_replace
