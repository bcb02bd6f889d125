"""Reasons: a loaded model and a plan in, every attribute's status and why out.

torch decides: :mod:`.torch_freeze` runs torch's own freeze on a clone and reads what it
kept and folded. freezeview explains: :mod:`.replay` replays freeze_module.cpp's
decisions with alias analysis (:mod:`.mutation`), and :func:`explain` joins the two
into an :class:`Explanation` of :class:`AttributeVerdict` values (:mod:`.agreement`
keeps torch's status where they differ). Uses load, graph and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .constant_writes import constant_writers, frozen_writes_a_constant
    from .refusals import torch_refusal, unknown_name
    from .torch_freeze import TorchOutcome, module_statuses, release_clone, torch_outcome
    from .verdict_values import (
        REASON_CODES,
        WRITTEN_HELP,
        AttributeVerdict,
        Explanation,
        Reason,
        written_warning,
    )
    from .verdicts import carry_inventory, explain, torch_statuses_only

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "constant_writers": "constant_writes",
        "frozen_writes_a_constant": "constant_writes",
        "torch_refusal": "refusals",
        "unknown_name": "refusals",
        "TorchOutcome": "torch_freeze",
        "module_statuses": "torch_freeze",
        "release_clone": "torch_freeze",
        "torch_outcome": "torch_freeze",
        "AttributeVerdict": "verdict_values",
        "Explanation": "verdict_values",
        "REASON_CODES": "verdict_values",
        "Reason": "verdict_values",
        "WRITTEN_HELP": "verdict_values",
        "written_warning": "verdict_values",
        "carry_inventory": "verdicts",
        "explain": "verdicts",
        "torch_statuses_only": "verdicts",
    },
)

__all__ = [
    "REASON_CODES",
    "WRITTEN_HELP",
    "AttributeVerdict",
    "Explanation",
    "Reason",
    "TorchOutcome",
    "carry_inventory",
    "constant_writers",
    "explain",
    "frozen_writes_a_constant",
    "module_statuses",
    "release_clone",
    "torch_outcome",
    "torch_refusal",
    "torch_statuses_only",
    "unknown_name",
    "written_warning",
]
