"""The final figure alone: the unfrozen forward against ``torch.jit.freeze``'s, timed.

``freezeview explain`` says what freezing does to each attribute; with sample inputs it
also says what freezing does to the forward's latency, without the stepwise run: torch's
own ``torch.jit.freeze`` (plus ``optimize_for_inference`` when asked) on the same
preserved names, both forwards timed as :mod:`.latency` times every step.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable, Sequence
from typing import Any

import torch

from ..freeze import Sandbox
from ..plumbing import PlanError, torch_cause
from .latency import DEFAULT_BUDGET, DEFAULT_THREADS, time_pair
from .measure_values import Measurement

__all__ = ["final_figure"]


def _caller(module: Any, inputs: Sequence[Any]) -> Callable[[], Any]:
    """One forward on ``inputs``, run on a private copy of ``module`` (a
    :class:`~freezeview.engine.freeze.Sandbox`): a forward that writes its state or its
    folded constants leaves the user's model, and what is frozen from it later, alone."""
    run = Sandbox(module).function(module._c._get_method("forward").graph)
    return lambda: run(*inputs)


def final_figure(
    module: torch.jit.ScriptModule,
    inputs: Sequence[Any],
    *,
    preserved_attrs: Sequence[str] = (),
    optimize_for_inference: bool = False,
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    autograd: bool = False,
) -> Measurement:
    """Time the unfrozen and the frozen forward on ``inputs``.

    Args:
        module: the scripted module (eval mode); it is not changed.
        inputs: the sample inputs of ``forward``.
        preserved_attrs: as ``torch.jit.freeze(preserved_attrs=...)``.
        optimize_for_inference: run ``torch.jit.optimize_for_inference`` after freezing.
        threads: torch's intra-op threads while timing.
        budget: seconds of timing per forward.
        autograd: time with autograd on instead of under ``torch.inference_mode()``.

    Returns:
        A :class:`Measurement` with the unfrozen latency and one step, ``freeze``.

    Raises:
        PlanError: torch cannot freeze the module with these names.
        RuntimeError: a forward fails on the inputs.
    """
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frozen = torch.jit.freeze(module, preserved_attrs=list(preserved_attrs))
            if optimize_for_inference:
                frozen = torch.jit.optimize_for_inference(frozen)
    except Exception as exc:
        said = torch_cause(exc)
        raise PlanError(
            f"latency not measured: torch could not freeze the model ({said})."
        ) from exc
    # Blocks alternating between the two: a busy machine slows both alike.
    first, second = time_pair(
        _caller(module, inputs),
        _caller(frozen, inputs),
        threads=threads,
        budget=2 * budget,
        autograd=autograd,
    )
    unfrozen, after = first.latency, second.latency
    title = "torch.jit.freeze" + (" + optimize_for_inference" if optimize_for_inference else "")
    return Measurement(
        threads=threads,
        budget=budget,
        unfrozen=unfrozen,
        steps={0: after},
        titles={0: title},
        names={0: "freeze"},
        interleaved=True,
    )
