"""CI: a model and an expectations file (or two models) in, rules held or broken out.

``check()`` (:mod:`.check`) holds a model against its :class:`Expectations`
(:mod:`.expectations`) and reports for people and CI systems (:mod:`.ci_report`);
``compare()`` (:mod:`.compare`, forked in :mod:`.compare_fork`) says what freezing does
differently to two versions. Both read one gathering of torch's facts
(:func:`gather_facts`). The two functions live in the modules of their names; the
package offers the values. ``[deployment]`` rules (:mod:`.deployment_rules`) read a
measured run; ``[migration]`` rules (:mod:`.migration_rules`) one run of migrate.
:func:`group_paths` writes repeated blocks' paths once (:mod:`.path_ranges`; explain's
titles use it too). Uses migrate, measure, freeze, reasons, load and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .check import CheckReport, expectations_text
    from .compare import Comparison
    from .expectations import Expectations
    from .model_facts import gather_facts
    from .path_ranges import group_paths, is_index

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "CheckReport": "check",
        "expectations_text": "check",
        "Comparison": "compare",
        "Expectations": "expectations",
        "gather_facts": "model_facts",
        "group_paths": "path_ranges",
        "is_index": "path_ranges",
    },
)

__all__ = [
    "CheckReport",
    "Comparison",
    "Expectations",
    "expectations_text",
    "gather_facts",
    "group_paths",
    "is_index",
]
