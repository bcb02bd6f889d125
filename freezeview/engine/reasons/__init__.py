"""Reasons: a loaded model and a plan in, every attribute's status and why out.

torch decides, freezeview explains: torch's real freeze gives each status, the replay
of ``freeze_module.cpp`` the reasons, and :func:`explain` joins the two into an
:class:`Explanation` of :class:`AttributeVerdict` values. Uses load, graph and plumbing.

- :mod:`.torch_freeze`: torch's real freeze on a clone and its freezing log: the statuses;
- :mod:`.torch_paths`: torch's statuses by attribute path;
- :mod:`.replay_graphs`: the graphs freezing analyses, prepared as torch prepares them;
- :mod:`.replay`: ``freeze_module.cpp``'s decisions replayed on copies of the graphs;
- :mod:`.mutation`: alias-analysis facts with frozen semantics: who writes what, where;
- :mod:`.module_objects`: the module objects and what freezing asks of their values;
- :mod:`.constant_writes`: folded constants the frozen graph still writes;
- :mod:`.verdict_reasons`: each attribute's verdict and reasons, read off the replay;
- :mod:`.agreement`: torch's status over the replay's; ``undetermined`` where they differ;
- :mod:`.verdicts`: :func:`explain`, per-attribute verdicts with reasons;
- :mod:`.verdict_values`: verdicts, reasons, :class:`Explanation`, the reason codes;
- :mod:`.explanation_memo`: the last few explanations of a model, kept by preserved names;
- :mod:`.refusals`: why torch refuses to freeze a model, in one sentence with the fix.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .constant_writes import constant_writers, frozen_writes_a_constant
    from .explanation_memo import ExplanationMemo
    from .mutation import inline_method_graph
    from .refusals import torch_refusal, unknown_name
    from .torch_freeze import TorchOutcome, module_statuses, release_clone, torch_outcome
    from .verdict_values import (
        REASON_CODES,
        WRITTEN_HELP,
        AttributeVerdict,
        ConstantWrite,
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
        "ConstantWrite": "verdict_values",
        "ExplanationMemo": "explanation_memo",
        "inline_method_graph": "mutation",
    },
)

__all__ = [
    "REASON_CODES",
    "WRITTEN_HELP",
    "AttributeVerdict",
    "ConstantWrite",
    "Explanation",
    "ExplanationMemo",
    "Reason",
    "TorchOutcome",
    "carry_inventory",
    "constant_writers",
    "explain",
    "frozen_writes_a_constant",
    "inline_method_graph",
    "module_statuses",
    "release_clone",
    "torch_outcome",
    "torch_refusal",
    "torch_statuses_only",
    "unknown_name",
    "written_warning",
]
