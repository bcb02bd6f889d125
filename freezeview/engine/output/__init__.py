"""Output: a finished stepwise run in, the files and reports users read out.

:mod:`.export` writes pictures, IR diffs and ``index.html`` (:mod:`.review_page`) to a
directory, whole or not at all; the function ``export()`` lives in :mod:`.export` (the
module and the function share the name, so the package offers :class:`ExportResult`
and leaves the function where it is). :mod:`.report` gives freeze's JSON objects and
rich tables. Uses freeze, draw, diff, reasons, graph, load and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .export_values import ExportResult
    from .report import passes_json, passes_table, result_json, step_json, steps_table

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "ExportResult": "export_values",
        "passes_json": "report",
        "passes_table": "report",
        "result_json": "report",
        "step_json": "report",
        "steps_table": "report",
    },
)

__all__ = [
    "ExportResult",
    "passes_json",
    "passes_table",
    "result_json",
    "step_json",
    "steps_table",
]
