"""The module corpus freezeview is checked against torch on.

``CASES`` lists every module shape (scripted and traced) as a :class:`Case`; tests
parametrize over it with ``ids=[case.name for case in CASES]`` and compare freezeview's
answers with what the installed torch does to the same module in the same run.
"""

from __future__ import annotations

from typing import Any

from . import (
    basic,
    custom_ops,
    enums,
    foreign,
    frozen,
    mutation,
    patterns,
    preserve,
    quantized,
    recurrent,
    refused,
    submodule_methods,
    written,
)
from ._case import Case, default_inputs, image_inputs, scripted, seeded, traced

__all__ = [
    "CASES",
    "Case",
    "case_by_name",
    "default_inputs",
    "image_inputs",
    "params",
    "scripted",
    "seeded",
    "traced",
]

CASES: list[Case] = [
    *basic.CASES,
    *mutation.CASES,
    *preserve.CASES,
    *patterns.CASES,
    *refused.CASES,
    *quantized.CASES,
    *recurrent.CASES,
    *foreign.CASES,
    *custom_ops.CASES,
    *submodule_methods.CASES,
    *frozen.CASES,
    *enums.CASES,
    *written.CASES,
]

_names = [case.name for case in CASES]
assert len(_names) == len(set(_names)), "corpus case names must be unique"


def case_by_name(name: str) -> Case:
    """The case called ``name`` (for rerunning one case by hand)."""
    for case in CASES:
        if case.name == name:
            return case
    raise KeyError(name)


def params(cases: list[Case] | None = None) -> list[Any]:
    """``pytest.param`` per case, with the case name as id, for ``parametrize``.

    Cases tagged ``slow`` get the ``slow`` mark, so ``-m "not slow"`` skips them.
    """
    import pytest

    return [
        pytest.param(case, id=case.name, marks=[pytest.mark.slow] if "slow" in case.tags else [])
        for case in (CASES if cases is None else cases)
    ]
