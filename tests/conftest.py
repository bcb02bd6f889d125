"""Shared pytest set-up for freezeview's tests."""

from __future__ import annotations

import sys
from pathlib import Path

# Test helpers (`oracle`, `corpus`) are imported by name from this directory, whether or
# not pytest puts it on sys.path itself (it does not once tests/ becomes a package).
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)
