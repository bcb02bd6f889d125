"""Freeze: a loaded model and a :class:`Plan` in, the stepwise freeze out.

:class:`Pipeline` runs ``torch.jit.freeze`` as visible :class:`Step` values (inline,
fold attributes, torch's clean-up, then each frozen-graph pass of :data:`REGISTRY` in
the installed torch's order), each with snapshots before and after, notes, and the
outputs compared on sample inputs. Uses reasons, diff, graph, load and plumbing.

- :mod:`.plan`: the plan: what to preserve, which passes, in which order;
- :mod:`.passes`: the registry of frozen-graph passes and torch's default order;
- :mod:`.pass_runners`: how each pass is run on one method graph;
- :mod:`.pass_diagnosis`: why a pass did not fire, read off the graph it left unchanged;
- :mod:`.pipeline`: :class:`Pipeline` and :func:`freeze`;
- :mod:`.pipeline_run`: one run of a plan: the passes step by step, torch's fixed-point loop;
- :mod:`.freeze_phase`: the freeze phase of a run: inline, fold attributes, clean-up;
- :mod:`.run_state`: the state one run carries, and what it needs of its pipeline;
- :mod:`.steps`: the steps and the graphs they show, each computed when first read;
- :mod:`.lazy_graph`: one method's graph at one moment: printout, kinds, snapshot on first use;
- :mod:`.fold_picture`: the fold step's picture: attribute reads folded as torch does;
- :mod:`.numerics`: sample inputs, and each step's outputs compared;
- :mod:`.sandbox`: a private copy of a module's state that runs happen on.
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
    from .steps import FreezeResult, Progress, Step, diffed_in_full, release_graphs

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
        "FreezeResult": "steps",
        "Progress": "steps",
        "Step": "steps",
        "release_graphs": "steps",
        "diffed_in_full": "steps",
    },
)

__all__ = [
    "REGISTRY",
    "FreezeResult",
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
    "diffed_in_full",
    "freeze",
    "load_inputs",
    "needs_guard",
    "random_inputs",
    "release_graphs",
]
