"""Measure: a stepwise freeze in, what it did to speed, size and portability out.

:class:`MeasuredRun` (:mod:`.measured_run`) follows a pipeline's run and, for every step
that changed the graph, counts the bytes of tensor constants (:mod:`.constants`) and,
with sample inputs, times the step's forward as torch's benchmark utilities do
(:mod:`.latency`: warm-up, fixed threads, blocks until the median is stable within a
time budget). After the run it adds the result's sizes and portability
(:mod:`.portability`: constants' devices and dtypes, backend-only nodes, a save and load
in a fresh process). :func:`final_figure` times only the unfrozen and the frozen forward
(explain's figure). The values (:mod:`.measure_values`) are torch-free. Uses freeze,
graph and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .constants import backend_only_nodes, constant_bytes, constant_tensors
    from .final_figure import final_figure
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
    from .portability import roundtrip, unsaveable_reason

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
        "roundtrip": "portability",
        "unsaveable_reason": "portability",
    },
)

__all__ = [
    "DEFAULT_BUDGET",
    "DEFAULT_THREADS",
    "Change",
    "Latency",
    "MeasuredRun",
    "Measurement",
    "Portability",
    "SecondCall",
    "Sizes",
    "Timing",
    "backend_only_nodes",
    "compare_latency",
    "constant_bytes",
    "constant_tensors",
    "final_figure",
    "fixed_threads",
    "format_ms",
    "latency_cell",
    "roundtrip",
    "stability_note",
    "time_forward",
    "time_pair",
    "unsaveable_reason",
    "verdict_text",
]
