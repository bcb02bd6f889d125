"""The small model the measure tests share with the latency benchmark.

It lives in ``benchmarks/models.py`` with the benchmarks' other models; the tests import
it from here by its short name.
"""

from __future__ import annotations

import sys
from pathlib import Path

_ROOT = str(Path(__file__).resolve().parent.parent)
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)

from benchmarks.models import SMALL_INPUT_SHAPE, SmallConvNet, small_conv_net  # noqa: E402

__all__ = ["SMALL_INPUT_SHAPE", "SmallConvNet", "small_conv_net"]
