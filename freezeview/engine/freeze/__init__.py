"""Freeze: a loaded model and a :class:`Plan` in, the stepwise freeze out.

:class:`Pipeline` runs ``torch.jit.freeze`` as visible :class:`Step` values (inline,
fold attributes, torch's clean-up, then each frozen-graph pass of :data:`REGISTRY` in
the installed torch's order), each with snapshots before and after, notes, and the
outputs compared on sample inputs (:mod:`.numerics`). Uses reasons, diff, graph, load
and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .numerics import Numerics, compare_outputs, load_inputs, random_inputs
    from .passes import REGISTRY, PassInfo, default_passes, needs_guard
    from .pipeline import Pipeline, freeze
    from .plan import Plan
    from .sandbox import Sandbox, SandboxError
    from .steps import Progress, Step, release_graphs

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "Numerics": "numerics",
        "compare_outputs": "numerics",
        "load_inputs": "numerics",
        "random_inputs": "numerics",
        "PassInfo": "passes",
        "REGISTRY": "passes",
        "default_passes": "passes",
        "needs_guard": "passes",
        "Pipeline": "pipeline",
        "freeze": "pipeline",
        "Plan": "plan",
        "Sandbox": "sandbox",
        "SandboxError": "sandbox",
        "Progress": "steps",
        "Step": "steps",
        "release_graphs": "steps",
    },
)

__all__ = [
    "REGISTRY",
    "Numerics",
    "PassInfo",
    "Pipeline",
    "Plan",
    "Progress",
    "Sandbox",
    "SandboxError",
    "Step",
    "compare_outputs",
    "default_passes",
    "freeze",
    "load_inputs",
    "needs_guard",
    "random_inputs",
    "release_graphs",
]
