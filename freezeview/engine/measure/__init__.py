"""Measure: a stepwise freeze in, what it did to speed, size and portability out.

The values (the ``*_values`` modules) are torch-free. Uses freeze, diff, graph and
plumbing.

- :mod:`.measured_run`: :class:`MeasuredRun`, a pipeline's run measured step by step;
- :mod:`.latency`: one forward timed as torch's benchmark utilities do, and two in pairs;
- :mod:`.final_figure`: :func:`final_figure`, the unfrozen forward against the frozen one;
- :mod:`.constants`: the tensors baked into graphs: bytes, duplicates, devices, dtypes;
- :mod:`.portability`: backend-only nodes, and a save and load in a fresh process;
- :mod:`.fresh_process`: the round trip's fresh processes, forked from one torch import;
- :mod:`.measure_values`: latency, changes, sizes, portability and the verdict line;
- :mod:`.node_time`: each node's and node kind's time, the unfrozen module and each step;
- :mod:`.node_clocks`: its two clocks: Static Runtime's and torch.profiler's;
- :mod:`.node_time_values`: the per-node times' values;
- :mod:`.value_bisect`: the first node whose value differs after a step;
- :mod:`.value_exposure`: a graph that also returns chosen values, and two runs' compared;
- :mod:`.value_bisect_values`: the bisection's values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .constants import backend_only_nodes, constant_bytes, constant_tensors
    from .final_figure import final_figure
    from .fresh_process import Finished, run_fresh
    from .latency import (
        DEFAULT_BUDGET,
        DEFAULT_THREADS,
        Timing,
        fixed_threads,
        time_forward,
        time_pair,
    )
    from .measure_values import (
        Change,
        Latency,
        Measurement,
        Portability,
        SecondCall,
        Sizes,
        compare_latency,
        format_ms,
        latency_cell,
        stability_note,
        verdict_text,
    )
    from .measured_run import MeasuredRun
    from .node_time import NodeTimer
    from .node_time_values import change_word
    from .portability import roundtrip, unsaveable_reason
    from .value_bisect import ValueBisector
    from .value_bisect_values import Bisection

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "backend_only_nodes": "constants",
        "constant_bytes": "constants",
        "constant_tensors": "constants",
        "final_figure": "final_figure",
        "DEFAULT_BUDGET": "latency",
        "DEFAULT_THREADS": "latency",
        "Timing": "latency",
        "fixed_threads": "latency",
        "time_forward": "latency",
        "time_pair": "latency",
        "Change": "measure_values",
        "Latency": "measure_values",
        "Measurement": "measure_values",
        "Portability": "measure_values",
        "SecondCall": "measure_values",
        "Sizes": "measure_values",
        "compare_latency": "measure_values",
        "format_ms": "measure_values",
        "latency_cell": "measure_values",
        "stability_note": "measure_values",
        "verdict_text": "measure_values",
        "MeasuredRun": "measured_run",
        "Finished": "fresh_process",
        "run_fresh": "fresh_process",
        "roundtrip": "portability",
        "unsaveable_reason": "portability",
        "NodeTimer": "node_time",
        "change_word": "node_time_values",
        "ValueBisector": "value_bisect",
        "Bisection": "value_bisect_values",
    },
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_THREADS",
    "Bisection",
    "Change",
    "Finished",
    "Latency",
    "MeasuredRun",
    "Measurement",
    "NodeTimer",
    "Portability",
    "SecondCall",
    "Sizes",
    "Timing",
    "ValueBisector",
    "backend_only_nodes",
    "change_word",
    "compare_latency",
    "constant_bytes",
    "constant_tensors",
    "final_figure",
    "fixed_threads",
    "format_ms",
    "latency_cell",
    "roundtrip",
    "run_fresh",
    "stability_note",
    "time_forward",
    "time_pair",
    "unsaveable_reason",
    "verdict_text",
]
