"""freezeview: see what ``torch.jit.freeze`` does to a TorchScript model.

The Python API mirrors the command line:

* :func:`explain` - for every attribute, whether freezing inlines, keeps or drops it, and why;
* :func:`freeze` - freezing step by step, the frozen module equal to ``torch.jit.freeze``'s;
* :func:`export` - pictures, graph diffs, IR diffs and the review page of a freeze;
* :func:`check` - hold a model against an expectations file (``freezeview check``);
* :func:`compare` - what freezing does differently to two versions of a model;
* :func:`load_model` - load a ``.pt`` file with one clear sentence for every bad input.

Importing freezeview does not import torch: each function imports the engine when first
called (the app's first screen appears while torch is still loading).

Example::

    import freezeview

    result = freezeview.explain("model.pt", preserved_attrs=["version"])
    print(result.summary())

The rooms (docs/architecture.md is the map; each package's docstring names its modules):

- :mod:`.engine`: the torch-facing library, one package per stage;
- :mod:`.cli`: the command line, one module per subcommand;
- :mod:`.session`: the app's engine side: the session contract, the engine process, the
  values that cross to the screen;
- :mod:`.ui`: the Textual app, the screen's process only (no torch);
- :mod:`.__main__`: ``python -m freezeview``, the same as the console script.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from .engine import REASON_CODES, Explanation, explain, load_model
    from .engine.ci import CheckReport, Comparison, Expectations
    from .engine.draw import RenderOptions
    from .engine.freeze import FreezeResult, Plan
    from .engine.load import LoadedModel
    from .engine.output import ExportResult

    #: What every function takes as a model: a path, a ScriptModule or a loaded model.
    Model = str | os.PathLike[str] | torch.jit.ScriptModule | LoadedModel


def __getattr__(name: str) -> Any:
    # Resolved on first use (PEP 562) so that `import freezeview.<anything>` does not
    # import torch.
    if name in ("REASON_CODES", "Explanation", "explain", "load_model"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "REASON_CODES",
    "Explanation",
    "__version__",
    "check",
    "compare",
    "explain",
    "export",
    "freeze",
    "load_model",
]


def freeze(
    model: Model,
    preserved_attrs: Sequence[str] = (),
    passes: Sequence[str] | None = None,
    *,
    optimize_numerics: bool = True,
    optimize_for_inference: bool = False,
    freeze_interfaces: bool = True,
    inputs: Sequence[Any] | None = None,
    eval_mode: bool = False,
) -> FreezeResult:
    """Freeze a TorchScript model step by step; the result equals ``torch.jit.freeze``'s.

    Args:
        model: a ``.pt`` path, a ScriptModule or a loaded model (never modified).
        preserved_attrs: as ``torch.jit.freeze(preserved_attrs=...)``; dotted names
            reach into submodules.
        passes: pass ids to run (default: torch's passes for the installed release;
            ``freezeview passes`` lists them).
        optimize_numerics: as ``torch.jit.freeze(optimize_numerics=...)``.
        optimize_for_inference: also run ``torch.jit.optimize_for_inference``'s passes.
        freeze_interfaces: inline module interfaces (torch's default).
        inputs: sample inputs; each step then reports how far the outputs moved.
        eval_mode: switch a training-mode model loaded from a path to eval mode.

    Returns:
        The steps (``result.steps``) and the frozen module (``result.module``).

    Raises:
        BadInputError: the file cannot be loaded, or the inputs do not fit the model.
        PlanError: a bad plan, a training-mode model, or a step failed (its message).

    Example::

        result = freezeview.freeze("model.pt", preserved_attrs=["version"])
        print([step.title for step in result.steps if step.changed])
        torch.jit.save(result.module, "model-frozen.pt")
    """
    from .engine.freeze import freeze as run

    return run(
        model,
        preserved_attrs,
        passes,
        optimize_numerics=optimize_numerics,
        optimize_for_inference=optimize_for_inference,
        freeze_interfaces=freeze_interfaces,
        inputs=inputs,
        eval_mode=eval_mode,
    )


def export(
    model: Model,
    directory: str | os.PathLike[str],
    *,
    plan: Plan | None = None,
    fmt: str = "svg",
    per_step: bool = False,
    options: RenderOptions | None = None,
    force: bool = False,
    side_by_side: bool = True,
    progress: Callable[[str], None] | None = None,
    parallel: bool | None = None,
    inputs: Sequence[object] | None = None,
    measure: tuple[int, float] | tuple[int, float, bool] = (1, 0.25),
    profile: bool = False,
) -> ExportResult:
    """Freeze ``model`` step by step and write its pictures and diffs into ``directory``.

    Args:
        model: a ``.pt`` path, a ScriptModule or a loaded model (never modified).
        directory: where to write; created if missing (its parent must exist).
        plan: what to preserve and which passes to run (default: torch's plan).
        fmt: ``svg``, ``png`` or ``dot`` (DOT text only, no Graphviz needed).
        per_step: also write one picture and one IR diff per step that changed the graph.
        options: drawing options (level, expand, box budget, Graphviz timeout).
        force: overwrite output files that already exist.
        side_by_side: also write ``side-by-side.<fmt>``.
        progress: called with a short text before each picture is drawn.
        parallel: let a forked helper make the diffs while this process draws (None:
            only when this process runs no other thread). The files are the same.
        inputs: sample inputs: the review page's timeline then shows each step's
            numerics and forward latency against the unfrozen module, and the verdict.
        measure: ``(threads, seconds per step)`` for that timing, under
            ``torch.inference_mode()``; ``(threads, seconds, True)`` times with autograd
            on instead.
        profile: with ``inputs``, time each node of every forward (as ``freeze
            --profile``): each picture's boxes are filled by their share of the time,
            and the page lists the dearest kinds and nodes of each step.

    Returns:
        What was written: the pictures, the IR diffs and ``result.index``, the page.

    Raises:
        BadInputError: the model cannot be read.
        PlanError: the model cannot be frozen with ``plan``.
        OutputError: the directory cannot be written, or holds outputs and not ``force``.
        GraphvizMissingError: ``dot`` is missing; the text outputs were written first.

    Example::

        result = freezeview.export("model.pt", "model-export", per_step=True)
        print(result.index)  # model-export/index.html
    """
    from .engine.output import export_model as run

    return run(
        model,
        directory,
        plan=plan,
        fmt=fmt,
        per_step=per_step,
        options=options,
        force=force,
        side_by_side=side_by_side,
        progress=progress,
        parallel=parallel,
        inputs=inputs,
        measure=measure,
        profile=profile,
    )


def check(model: Model, expectations: str | Path | Expectations) -> CheckReport:
    """Hold a model against an expectations file (``freezeview check``).

    Args:
        model: a ``.pt`` path, a ScriptModule or a loaded model.
        expectations: the TOML file (``freezeview check --write-expect`` writes one), or
            one already read.

    Returns:
        The report; ``report.ok`` is False when a rule is broken, and each of
        ``report.violations`` names its rule, its line and why.

    Raises:
        ExpectationsError: the file is wrong (one sentence naming its line).
        BadInputError: the model cannot be loaded, or its sample inputs cannot.
        PlanError: torch cannot freeze the model as the file's plan asks.

    Example::

        report = freezeview.check("model.pt", "model.freeze.toml")
        for violation in report.violations:
            print(violation.message)
    """
    from .engine.ci import check_model as run

    return run(model, expectations)


def compare(
    old: Model,
    new: Model,
    plan: Plan | None = None,
    *,
    inputs: Sequence[Any] | None = None,
    eval_mode: bool = False,
    measure: tuple[int, float] | tuple[int, float, bool] | None = None,
) -> Comparison:
    """Freeze two versions of a model with one plan and say what freezing does differently.

    Args:
        old: the earlier model (a path, a ScriptModule or a loaded model).
        new: the later one.
        plan: the plan for both (default: torch's, nothing preserved).
        inputs: sample inputs for both models' numerics, or None.
        eval_mode: switch training-mode modules to eval mode.
        measure: ``(threads, seconds per step)``: with ``inputs``, also time both frozen
            forwards under ``torch.inference_mode()`` (``(threads, seconds, True)``: with
            autograd on) (``comparison.latency_change``, shown, never a regression).

    Returns:
        The comparison: status changes, kept bytes, passes that fire differently, and
        ``comparison.regressions``, one sentence each.

    Raises:
        BadInputError: a model cannot be loaded.
        PlanError: torch cannot freeze one of them as asked.

    Example::

        comparison = freezeview.compare("model-v1.pt", "model-v2.pt")
        for sentence in comparison.regressions:
            print(sentence)
    """
    from .engine.ci import compare_models as run

    return run(old, new, plan, inputs=inputs, eval_mode=eval_mode, measure=measure)
