"""Where the suite's files are, for tests in any directory of tests/."""

from __future__ import annotations

from pathlib import Path

#: The tests/ directory (its helpers, models and data).
TESTS = Path(__file__).resolve().parent
#: The checkout: freezeview/, docs/, examples/, scripts/.
ROOT = TESTS.parent
