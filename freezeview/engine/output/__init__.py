"""Output: a finished stepwise run in, the files and reports users read out.

The function ``export()`` lives in :mod:`.export` (the module and the function share the
name, so the package offers :class:`ExportResult` and leaves the function where it is).
Uses freeze, draw, diff, reasons, graph, load and plumbing.

- :mod:`.export`: ``export()``: every file of an export, written whole or not at all;
- :mod:`.export_run`: the torch side of an export: the stepwise freeze read once, let go;
- :mod:`.export_pictures`: an export's pictures started in the background, in order;
- :mod:`.export_page`: what an export wrote, handed to the review page;
- :mod:`.export_values`: what an export wrote: :class:`ExportResult` and its entries;
- :mod:`.export_profile`: per-node times and bisections read during the run, as overlays;
- :mod:`.review_page`: ``index.html``, the interactive review page;
- :mod:`.migration_section`: the review page's migration section (``export --migrate``);
- :mod:`.profile_section`: the page's time per node and where the numbers move sections;
- :mod:`.report`: step and plan reports: JSON objects and rich tables.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .export import export as export_model
    from .export_values import ExportResult
    from .migration_section import add_migration_section
    from .report import (
        measurement_lines,
        passes_json,
        passes_table,
        result_json,
        step_json,
        step_row,
        steps_table,
    )


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        # Under names of their own: a function that shares its module's name would be
        # hidden by the module once imported (see lazy_exports).
        "export_model": ("export", "export"),
        "ExportResult": "export_values",
        "passes_json": "report",
        "passes_table": "report",
        "result_json": "report",
        "step_json": "report",
        "steps_table": "report",
        "measurement_lines": "report",
        "step_row": "report",
        "add_migration_section": "migration_section",
    },
)


__all__ = [
    "ExportResult",
    "add_migration_section",
    "export_model",
    "measurement_lines",
    "passes_json",
    "passes_table",
    "result_json",
    "step_json",
    "step_row",
    "steps_table",
]
