"""torch's statuses by attribute path, named as the replay names a model's modules.

torch's freezing log and the frozen module say what torch did per module object and per
constant; explain and check show it per attribute path. This joins the two: a module
shared under two names gets one status for its slots, and constants folded inside a
``torch.jit.fork`` body are credited to the body's module (:func:`fork_bodies`).
"""

from __future__ import annotations

from collections.abc import Mapping

import torch

from ..graph import attribute_paths
from .module_objects import ModuleView, join_path, module_at
from .replay import FreezeReplay
from .torch_freeze import ForkBody, TorchOutcome, torch_statuses

__all__ = ["canonical_paths", "fork_bodies", "statuses_by_path"]


def statuses_by_path(
    outcome: TorchOutcome,
    cmod: torch._C.ScriptModule,
    view: ModuleView,
    prop: FreezeReplay,
    paths: Mapping[str, bool] | None = None,
    canonical: Mapping[str, str] | None = None,
) -> dict[str, str]:
    """torch's status for every attribute path, a shared submodule's slots named one way.

    Args:
        outcome: torch's freeze of the model.
        cmod: the model's C++ module.
        view: the replay's module objects (a module shared under two names is one).
        prop: the replay, for the ``torch.jit.fork`` bodies torch's log names.
        paths: every attribute path of ``cmod``, mapped to whether it is a submodule,
            if listed already (the inventory's; :func:`attribute_paths` otherwise).
        canonical: :func:`canonical_paths` of ``view`` and ``paths``, if made already.

    Returns:
        ``{path: "inlined" | "kept" | "dropped"}`` for every attribute and submodule path.
    """
    if paths is None:
        paths = attribute_paths(cmod)
    if canonical is None:
        canonical = canonical_paths(view, paths)
    return torch_statuses(outcome, paths, canonical, fork_bodies(prop))


def canonical_paths(view: ModuleView, paths: Mapping[str, bool]) -> dict[str, str]:
    """Each attribute path to the one name :func:`statuses_by_path` gives its slot: a
    submodule shared under two names, and every attribute under it, by its first name.

    A function of the loaded model alone (``view`` and ``paths`` are its own).
    """
    canonical: dict[str, str] = {}
    for path, is_module in paths.items():
        if is_module and (mod := module_at(view, path)) is not None:
            canonical[path] = mod.paths[0]
            continue
        owner_path, _, name = path.rpartition(".")
        owner = module_at(view, owner_path)
        canonical[path] = join_path(owner.paths[0], name) if owner is not None else path
    return canonical


def fork_bodies(prop: FreezeReplay) -> list[ForkBody]:
    """The replay's ``torch.jit.fork`` bodies, as reading torch's freezing log needs them."""
    index = {id(ctx): i for i, ctx in enumerate(c for c in prop.contexts if c.is_fork)}
    bodies: list[ForkBody] = []
    for ctx in prop.contexts:
        if not ctx.is_fork:
            continue
        first = ctx.fork_node.inputsAt(0) if ctx.fork_node is not None else None
        feeder = first.node() if first is not None else None
        handed = feeder.s("name") if feeder is not None and feeder.kind() == "prim::GetAttr" else ""
        parent = prop.contexts[ctx.parent_index] if ctx.parent_index >= 0 else None
        bodies.append(
            ForkBody(
                path=ctx.base.paths[0],
                type_name=ctx.base.type_name.rsplit(".", 1)[-1],
                attr=handed,
                module_reads=ctx.module_reads,
                parent=index.get(id(parent), -1) if parent is not None else -1,
            )
        )
    return bodies
