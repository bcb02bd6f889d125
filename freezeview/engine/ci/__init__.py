"""CI: a model and an expectations file (or two models) in, rules held or broken out.

``check()`` and ``compare()`` read one gathering of torch's facts (:func:`gather_facts`);
each lives in the module of its name, and the package offers the values. Uses migrate,
measure, freeze, reasons, load and plumbing.

- :mod:`.model_facts`: everything freezing does to one model under one plan, gathered once;
- :mod:`.expectations`: the expectations file of ``check``: parsing, rules, line numbers;
- :mod:`.check`: ``check()``, the rules held against the model's facts;
- :mod:`.deployment_rules`: the ``[deployment]`` rules, held against a measured run;
- :mod:`.migration_rules`: the ``[migration]`` rules, held against one run of migrate;
- :mod:`.ci_report`: ``check``'s reports: text, JSON, GitHub, JUnit XML;
- :mod:`.compare`: ``compare()``, what freezing does differently to two versions;
- :mod:`.compare_fork`: both models of a ``compare`` frozen at once, one in a fork;
- :mod:`.path_ranges`: repeated blocks' paths written once (:func:`group_paths`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .check import CheckReport, expectations_text
    from .check import check as check_model
    from .ci_report import render_github, render_json, render_junit
    from .ci_report import render_text as render_check_text
    from .compare import Comparison, render_markdown
    from .compare import compare as compare_models
    from .compare import render_text as render_comparison_text
    from .expectations import Expectations
    from .model_facts import gather_facts
    from .path_ranges import group_paths, is_index


__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        # Under names of their own: a function that shares its module's name would be
        # hidden by the module once imported (see lazy_exports); both reports have a
        # render_text.
        "check_model": ("check", "check"),
        "compare_models": ("compare", "compare"),
        "render_check_text": ("ci_report", "render_text"),
        "render_comparison_text": ("compare", "render_text"),
        "CheckReport": "check",
        "expectations_text": "check",
        "Comparison": "compare",
        "Expectations": "expectations",
        "gather_facts": "model_facts",
        "group_paths": "path_ranges",
        "is_index": "path_ranges",
        "render_github": "ci_report",
        "render_json": "ci_report",
        "render_junit": "ci_report",
        "render_markdown": "compare",
    },
)


__all__ = [
    "CheckReport",
    "Comparison",
    "Expectations",
    "check_model",
    "compare_models",
    "expectations_text",
    "gather_facts",
    "group_paths",
    "is_index",
    "render_check_text",
    "render_comparison_text",
    "render_github",
    "render_json",
    "render_junit",
    "render_markdown",
]
