"""The :class:`Case` record and helpers that build cases' modules reproducibly."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = ["Case", "default_inputs", "image_inputs", "scripted", "seeded", "traced"]

Inputs = tuple[torch.Tensor, ...]


def default_inputs() -> Inputs:
    """One small 2x4 float batch: what most corpus modules take."""
    return (torch.randn(2, 4),)


def image_inputs() -> Inputs:
    """One 1x3x8x8 image batch for the convolution patterns."""
    return (torch.randn(1, 3, 8, 8),)


def seeded(make: Callable[[], nn.Module]) -> nn.Module:
    """Build ``make()`` with a fixed seed, without disturbing the caller's RNG state.

    The corpus is compared with torch in the same run, so seeds are not needed for
    correctness; they make a failing case reproduce identically when rerun alone.
    """
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        return make()


def scripted(make: Callable[[], nn.Module]) -> Callable[[], torch.jit.ScriptModule]:
    """A ``build`` function: a fresh, eval-mode ``torch.jit.script`` of ``make()``."""

    def build() -> torch.jit.ScriptModule:
        return torch.jit.script(seeded(make).eval())

    return build


def traced(
    make: Callable[[], nn.Module], inputs: Callable[[], Inputs] = default_inputs
) -> Callable[[], torch.jit.ScriptModule]:
    """A ``build`` function: a fresh, eval-mode ``torch.jit.trace`` of ``make()``."""

    def build() -> torch.jit.ScriptModule:
        module = seeded(make).eval()
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(1)
            example = inputs()
        # check_trace re-runs and re-traces the module: seconds per build, no insight.
        return torch.jit.trace(module, example, check_trace=False)

    return build


@dataclass(frozen=True)
class Case:
    """One module shape of the corpus and how freezing it is asked for.

    Attributes:
        name: unique id, used as the pytest id.
        build: returns a fresh eval-mode ScriptModule each call (freezing never modifies
            its input, but tests may, so nothing is shared between calls).
        preserved_attrs: passed to ``torch.jit.freeze`` and to freezeview alike.
        inputs: returns example inputs for ``forward``.
        traced: built with ``torch.jit.trace`` rather than ``torch.jit.script``.
        expect_error: a regex of the message torch raises when it refuses to freeze
            this module; None when torch freezes it.
        tags: free-form labels (``"mutation"``, ``"preserve"``, ``"pattern"``, ...).
        method: the method to call with ``inputs()`` (``forward`` except for modules
            without one, such as a scripted ``nn.LSTM``).
    """

    name: str
    build: Callable[[], torch.jit.ScriptModule]
    preserved_attrs: tuple[str, ...] = ()
    inputs: Callable[[], Inputs] = default_inputs
    traced: bool = False
    expect_error: str | None = None
    tags: frozenset[str] = field(default_factory=frozenset)
    method: str = "forward"

    def run(self, module: torch.jit.ScriptModule) -> object:
        """Call :attr:`method` of ``module`` on fresh ``inputs()``, without autograd."""
        with torch.no_grad():
            return getattr(module, self.method)(*self.inputs())
