"""The :class:`Case` record and helpers that build cases' modules reproducibly."""

from __future__ import annotations

import copy
import os
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
from torch import nn

__all__ = [
    "Case",
    "default_inputs",
    "fresh_copy",
    "image_inputs",
    "scripted",
    "seeded",
    "traced",
]

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


# FREEZEVIEW_TEST_FRESH_BUILDS=1 scripts (or traces) every build from scratch, as before
# builds were copied: to check that a failure does not come from the copying itself.
_FRESH_BUILDS = os.environ.get("FREEZEVIEW_TEST_FRESH_BUILDS", "") not in ("", "0")


def _copy_slots(
    source: torch._C.ScriptModule,
    target: torch._C.ScriptModule,
    memo: dict[int, torch.Tensor],
) -> None:
    """Give ``target`` (a deep copy made under no_grad) ``source``'s tensors' autograd state.

    The copy's tensors are fresh leaves without ``requires_grad``: an ``nn.Parameter`` of
    the source becomes one again with its flag (one object per source tensor, so tied
    weights stay tied), any other parameter or buffer gets its flag back.
    """
    slots = [
        *torch._C.ParameterDict(source).items(),
        *torch._C.BufferDict(source).items(),
    ]
    for name, value in slots:
        copied = target.getattr(name)
        if isinstance(value, nn.Parameter):
            key = id(value)
            if key not in memo:
                memo[key] = nn.Parameter(copied, requires_grad=value.requires_grad)
            target.setattr(name, memo[key])
        elif value is not None and value.requires_grad:
            copied.requires_grad_(True)
    targets = dict(torch._C.ModuleDict(target).items())
    for name, sub in torch._C.ModuleDict(source).items():
        _copy_slots(sub, targets[name], memo)


def _tensors(value: object) -> list[torch.Tensor]:
    """Every tensor in an attribute value (lists, tuples and dicts walked)."""
    if isinstance(value, torch.Tensor):
        return [value]
    if isinstance(value, list | tuple):
        return [t for item in value for t in _tensors(item)]
    if isinstance(value, dict):
        return [t for item in value.values() for t in _tensors(item)]
    return []


def _has_views(module: torch.jit.ScriptModule) -> bool:
    """Whether two different tensors of ``module`` share memory (a buffer viewing another).

    A deep copy gives each tensor its own memory, so such a module is built afresh.
    """
    try:
        values = torch._C._jit_debug_module_iterators(module._c)["named_attributes_r"]
    except RuntimeError:
        # An instance of a TorchScript class without importable source: parameters and
        # buffers are what can be read.
        values = [
            (name, getattr(module, name, None))
            for name in dict(module.named_parameters()) | dict(module.named_buffers())
        ]
    owners: dict[int, int] = {}
    for _, value in values:
        for tensor in _tensors(value):
            if tensor.is_sparse or tensor.is_quantized or tensor.layout != torch.strided:
                continue
            storage = tensor.untyped_storage().data_ptr()
            if storage and owners.setdefault(storage, id(tensor)) != id(tensor):
                return True
    return False


def fresh_copy(prototype: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    """An independent ScriptModule equal to ``prototype``: same TorchScript types, copied state.

    This is what a second ``torch.jit.script`` of the same eval-mode module gives (torch
    reuses the compiled types of a module class it has scripted before), without
    compiling again: every tensor is a new copy, submodules reachable by two paths stay
    one object, and parameters are leaf ``nn.Parameter`` objects as scripting leaves them.
    Tensors sharing memory are not kept sharing it (see :func:`_has_views`).
    """
    # A deep copy with autograd on would make each parameter a non-leaf clone.
    with torch.no_grad():
        cmod = copy.deepcopy(prototype._c)
    _copy_slots(prototype._c, cmod, {})
    return torch.jit._recursive.wrap_cpp_module(cmod)


class _CopiedBuilds:
    """A ``build`` function that compiles once per process and hands out fresh copies.

    Scripting, tracing and quantizing a corpus module costs 0.02-0.5 s, and the corpus
    tests call ``build()`` a dozen times per case; a deep copy costs about 1 ms. The
    prototype itself is never handed out, so no test can change what the next one gets.
    """

    def __init__(self, build: Callable[[], torch.jit.ScriptModule]) -> None:
        self._build = build
        self._prototype: torch.jit.ScriptModule | None = None
        #: The module's tensors share memory: every call builds afresh.
        self._fresh = False
        self._lock = threading.Lock()

    def __call__(self) -> torch.jit.ScriptModule:
        if _FRESH_BUILDS or self._fresh:
            return self._build()
        with self._lock:
            if self._prototype is None:
                built = self._build()
                if _has_views(built):
                    self._fresh = True
                    return built
                self._prototype = built
            return fresh_copy(self._prototype)


@dataclass(frozen=True)
class Case:
    """One module shape of the corpus and how freezing it is asked for.

    Attributes:
        name: unique id, used as the pytest id.
        build: returns a fresh eval-mode ScriptModule each call (freezing never modifies
            its input, but tests may, so nothing is shared between calls). The given
            function runs once per process; later calls get a :func:`fresh_copy` of it.
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

    def __post_init__(self) -> None:
        if not isinstance(self.build, _CopiedBuilds):
            object.__setattr__(self, "build", _CopiedBuilds(self.build))

    def run(self, module: torch.jit.ScriptModule) -> object:
        """Call :attr:`method` of ``module`` on fresh ``inputs()``, without autograd."""
        with torch.no_grad():
            return getattr(module, self.method)(*self.inputs())
