"""The freeze plan: what to preserve and which frozen-graph passes run, in which order."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..plumbing import PlanError, unknown_pass
from .passes import REGISTRY, PassInfo, default_passes

__all__ = ["Plan"]


@dataclass(frozen=True)
class Plan:
    """What to freeze and which passes to run.

    Attributes:
        preserved_attrs: attributes, submodules and methods to keep, as in
            ``torch.jit.freeze(preserved_attrs=...)``; dotted names reach submodules.
        passes: pass ids in the order they run (see ``freezeview passes``); consecutive
            loop passes form one repeat-until-nothing-changes loop.
        optimize_numerics: False gives ``torch.jit.freeze(optimize_numerics=False)``:
            the folds that recompute weights are not allowed.
        optimize_for_inference: allow (and by default add) the
            ``torch.jit.optimize_for_inference`` passes.
        freeze_interfaces: inline module interfaces (torch's default).
    """

    preserved_attrs: tuple[str, ...] = ()
    passes: tuple[str, ...] = field(default_factory=default_passes)
    optimize_numerics: bool = True
    optimize_for_inference: bool = False
    freeze_interfaces: bool = True

    @classmethod
    def default(
        cls,
        preserved_attrs: Sequence[str] = (),
        *,
        optimize_numerics: bool = True,
        optimize_for_inference: bool = False,
        freeze_interfaces: bool = True,
    ) -> Plan:
        """torch's own plan for the installed version.

        Args:
            preserved_attrs: what to keep besides ``forward``.
            optimize_numerics: as ``torch.jit.freeze(optimize_numerics=...)``.
            optimize_for_inference: also run ``torch.jit.optimize_for_inference``'s passes.
            freeze_interfaces: inline module interfaces.

        Returns:
            A validated :class:`Plan`.
        """
        return cls(
            preserved_attrs=tuple(preserved_attrs),
            passes=default_passes(optimize_numerics, optimize_for_inference),
            optimize_numerics=optimize_numerics,
            optimize_for_inference=optimize_for_inference,
            freeze_interfaces=freeze_interfaces,
        ).validate()

    def validate(self, registry: Mapping[str, PassInfo] | None = None) -> Plan:
        """Check every pass id; return ``self``.

        Raises:
            PlanError: an unknown, unavailable or repeated pass, a pass that changes
                numerics while ``optimize_numerics`` is False, or an inference pass
                without ``optimize_for_inference``.
        """
        reg = REGISTRY if registry is None else registry
        seen: set[str] = set()
        for pid in self.passes:
            info = reg.get(pid)
            if info is None:
                raise PlanError(unknown_pass(pid, reg))
            if pid in seen:
                raise PlanError(f"pass {pid!r} is listed twice; list each pass once.")
            seen.add(pid)
            if not info.available:
                raise PlanError(
                    f"pass {pid!r} needs torch._C.{info.binding}, which this torch "
                    f"({torch.__version__}) does not have."
                )
            if info.group == "loop" and not self.optimize_numerics:
                raise PlanError(
                    f"pass {pid!r} changes numerics, which --no-optimize "
                    "(optimize_numerics=False) rules out; drop one of them."
                )
            if info.group == "inference" and not self.optimize_for_inference:
                raise PlanError(
                    f"pass {pid!r} is an optimize_for_inference pass; add "
                    "--optimize-for-inference to run it."
                )
        return self

    def replace(self, **changes: Any) -> Plan:
        """A copy with ``changes`` applied, validated."""
        return dataclasses.replace(self, **changes).validate()

    @property
    def freeze_key(self) -> tuple[tuple[str, ...], bool]:
        """What the freeze phase depends on (a change here restarts from step 0)."""
        return (self.preserved_attrs, self.freeze_interfaces)

    @property
    def is_torch_default(self) -> bool:
        """True when the frozen-graph passes are exactly torch's for this version."""
        frozen = tuple(
            p
            for p in self.passes
            if REGISTRY.get(p, None) is None or REGISTRY[p].group != "inference"
        )
        return frozen == default_passes(self.optimize_numerics, False)

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "preserved_attrs": list(self.preserved_attrs),
            "passes": list(self.passes),
            "optimize_numerics": self.optimize_numerics,
            "optimize_for_inference": self.optimize_for_inference,
            "freeze_interfaces": self.freeze_interfaces,
        }
