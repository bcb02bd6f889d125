"""The registry of frozen-graph passes freezeview can run one at a time.

``torch.jit.freeze`` ends with ``torch._C._jit_pass_optimize_frozen_graph``, which in
torch 2.x runs dropout removal, concat-linear, then repeats conv->batchnorm,
conv->add/sub, conv->mul/div and linear->batchnorm folding until none of them changes
the graph (``torch/csrc/jit/passes/frozen_graph_optimizations.cpp``).
``torch.jit.optimize_for_inference`` then adds conv-add-relu fusion, conversion to
MKLDNN ops and pre-transposed linear weights (``torch/csrc/jit/api/module.cpp``). Each
of those is a separate Python binding; this module names them, says what they do,
whether they keep numerics exact and when they fire. How each is run lives in
:mod:`.pass_runners`; why one did not fire on a given graph, in :mod:`.pass_diagnosis`.

The default order is keyed on the torch version: :data:`VERIFIED_TORCH` lists the
releases whose order freezeview read from torch itself and found equal to its own (2.4 to
2.14: the same order, unchanged). On any other release the pipeline runs the same order
and then torch's own ``_jit_pass_optimize_frozen_graph`` once more as a guard step that
must change nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .pass_diagnosis import (
    Diagnosed,
    diagnose_concat_linear,
    diagnose_conv_add,
    diagnose_conv_add_relu,
    diagnose_conv_bn,
    diagnose_conv_mul,
    diagnose_dropout,
    diagnose_guard,
    diagnose_linear_bn,
    diagnose_mkldnn,
    diagnose_transpose,
)
from .pass_runners import PassFunction, graph_pass, guard, remove_dropout

__all__ = [
    "GROUPS",
    "GUARD_PASS",
    "REGISTRY",
    "VERIFIED_RELEASES",
    "VERIFIED_TORCH",
    "PassFunction",
    "PassInfo",
    "default_passes",
    "guard_info",
    "needs_guard",
    "torch_version",
]


#: ``once``: runs one time in plan order; ``loop``: consecutive loop passes repeat until
#: a whole round changes nothing (torch's fixed point); ``inference``: the
#: optimize_for_inference extras; ``guard``: torch's whole call, as a check.
GROUPS = ("once", "loop", "inference", "guard")

#: torch releases (major, minor) whose pass order freezeview verified equal to its default
#: order, with the patch release read: its ``torch/jit/_freeze.py`` and the machine code of
#: ``OptimizeFrozenGraph`` and ``optimize_for_inference`` in its ``libtorch_cpu.so``
#: (``scripts/torch_pass_order.py``), then the whole suite on it (``make test-torch``),
#: whose tests compare every step with torch's own call on that release.
#: docs/torch-releases.md has the measured table. On any other release the guard runs.
VERIFIED_RELEASES: Mapping[tuple[int, int], str] = {
    (2, 4): "2.4.1",
    (2, 5): "2.5.1",
    (2, 6): "2.6.0",
    (2, 7): "2.7.1",
    (2, 8): "2.8.0",
    (2, 9): "2.9.1",
    (2, 10): "2.10.0",
    (2, 11): "2.11.0",
    (2, 12): "2.12.1",
    (2, 13): "2.13.0",
    (2, 14): "2.14.1",
}
VERIFIED_TORCH: frozenset[tuple[int, int]] = frozenset(VERIFIED_RELEASES)

GUARD_PASS = "optimize_frozen_graph"


def torch_version(version: str | None = None) -> tuple[int, int]:
    """``(major, minor)`` of ``version`` (default: the installed torch)."""
    text = version or torch.__version__
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match.group(1)), int(match.group(2))) if match else (0, 0)


@dataclass(frozen=True)
class PassInfo:
    """One pass freezeview can run.

    Attributes:
        id: the name used in plans and on the command line (``fold_conv_bn``).
        title: a short label (``conv -> batchnorm``).
        description: one line on what it does.
        exact: True if it keeps numerics bit-for-bit (False: it recomputes weights).
        group: ``once``, ``loop``, ``inference`` or ``guard`` (see :data:`GROUPS`).
        fires_when: the conditions under which torch rewrites something.
        binding: the ``torch._C`` function behind it.
        apply: runs it on one method graph.
        diagnose: given the graph it did not change, says why (one sentence).
    """

    id: str
    title: str
    description: str
    exact: bool
    group: str
    fires_when: str
    binding: str
    apply: PassFunction
    diagnose: Callable[[Diagnosed], str] | None = None

    @property
    def available(self) -> bool:
        """True if the installed torch has the binding."""
        return hasattr(torch._C, self.binding)

    @property
    def kind(self) -> str:
        """The step kind its steps get: ``inference`` or ``optimize``."""
        return "inference" if self.group == "inference" else "optimize"

    def why_not(self, snapshot: Diagnosed | None) -> str:
        """Why the pass did not change ``snapshot`` (a generic sentence if unknown).

        ``snapshot`` may be a :class:`~.pass_diagnosis.Reading`: then the snapshot is
        taken only if the sentence needs more than the graph's node kinds.
        """
        if not self.available:
            return f"this torch ({torch.__version__}) has no {self.binding}"
        if self.diagnose is not None and snapshot is not None:
            try:
                return self.diagnose(snapshot)
            except Exception as exc:
                return f"nothing matched its pattern ({type(exc).__name__} while explaining why)"
        return "nothing in the graph matched its pattern"

    def to_json(self, default: Iterable[str] = ()) -> dict[str, Any]:
        """Plain JSON form (for ``freezeview passes --json``)."""
        return {
            "id": self.id,
            "title": self.title,
            "description": self.description,
            "exact": self.exact,
            "group": self.group,
            "fires_when": self.fires_when,
            "binding": self.binding,
            "available": self.available,
            "default": self.id in set(default),
        }


REGISTRY: dict[str, PassInfo] = {
    info.id: info
    for info in (
        PassInfo(
            "remove_dropout",
            "remove dropout",
            "Replace eval-mode dropout (training=False) by its input.",
            True,
            "once",
            "an aten::dropout / feature_dropout whose training flag is the constant False",
            "_jit_pass_remove_dropout",
            remove_dropout,
            diagnose_dropout,
        ),
        PassInfo(
            "concat_frozen_linear",
            "concat linear",
            "Merge linear layers that read the same input into one wider linear plus slices.",
            True,
            "once",
            "two or more aten::linear with constant weight and bias on CUDA, same input, "
            "same dtype/device and trailing shape",
            "_jit_pass_concat_frozen_linear",
            graph_pass("_jit_pass_concat_frozen_linear"),
            diagnose_concat_linear,
        ),
        PassInfo(
            "fold_conv_bn",
            "conv -> batchnorm",
            "Fold an eval-mode batch_norm into the preceding convolution's weight and bias.",
            False,
            "loop",
            "aten::batch_norm reading a (non-transposed) convolution whose output has no other "
            "use, all parameters constant",
            "_jit_pass_fold_frozen_conv_bn",
            graph_pass("_jit_pass_fold_frozen_conv_bn"),
            diagnose_conv_bn,
        ),
        PassInfo(
            "fold_conv_add_or_sub",
            "conv -> add/sub",
            "Fold adding/subtracting a constant into the preceding convolution's bias.",
            False,
            "loop",
            "aten::add/sub of a constant (scalar or per-output-channel) on a convolution "
            "output with no other use, floating weights",
            "_jit_pass_fold_frozen_conv_add_or_sub",
            graph_pass("_jit_pass_fold_frozen_conv_add_or_sub"),
            diagnose_conv_add,
        ),
        PassInfo(
            "fold_conv_mul_or_div",
            "conv -> mul/div",
            "Fold multiplying/dividing by a constant into the convolution's weight and bias.",
            False,
            "loop",
            "aten::mul/div by a constant (scalar or per-output-channel) on a convolution "
            "output with no other use, floating weights",
            "_jit_pass_fold_frozen_conv_mul_or_div",
            graph_pass("_jit_pass_fold_frozen_conv_mul_or_div"),
            diagnose_conv_mul,
        ),
        PassInfo(
            "fold_linear_bn",
            "linear -> batchnorm",
            "Fold an eval-mode batch_norm into the preceding linear layer's weight and bias.",
            False,
            "loop",
            "aten::batch_norm with running statistics reading an aten::linear, all "
            "parameters constant",
            "_jit_pass_fold_frozen_linear_bn",
            graph_pass("_jit_pass_fold_frozen_linear_bn"),
            diagnose_linear_bn,
        ),
        PassInfo(
            "fuse_conv_add_relu",
            "conv-add-relu fusion",
            "Fuse convolution + add + relu into one cuDNN op (optimize_for_inference).",
            True,
            "inference",
            "a CUDA build with convolution -> add -> relu on constant CUDA weights",
            "_jit_pass_fuse_frozen_conv_add_relu",
            graph_pass("_jit_pass_fuse_frozen_conv_add_relu"),
            diagnose_conv_add_relu,
        ),
        PassInfo(
            "convert_to_mkldnn",
            "to MKLDNN",
            "Run convolutions/linears (and the ops around them) on MKLDNN tensors "
            "(optimize_for_inference; the result cannot be saved and reloaded).",
            False,
            "inference",
            "an MKLDNN build and conv/linear with constant float32 CPU weights that torch "
            "judges profitable",
            "_jit_pass_convert_frozen_ops_to_mkldnn",
            graph_pass("_jit_pass_convert_frozen_ops_to_mkldnn"),
            diagnose_mkldnn,
        ),
        PassInfo(
            "transpose_frozen_linear",
            "pre-transpose linear",
            "Replace aten::linear by matmul with a pre-transposed constant weight (+ add bias).",
            False,
            "inference",
            "aten::linear whose weight and bias are constants",
            "_jit_pass_transpose_frozen_linear",
            graph_pass("_jit_pass_transpose_frozen_linear"),
            diagnose_transpose,
        ),
    )
}

_FROZEN_ORDER = (
    "remove_dropout",
    "concat_frozen_linear",
    "fold_conv_bn",
    "fold_conv_add_or_sub",
    "fold_conv_mul_or_div",
    "fold_linear_bn",
)
_INFERENCE_ORDER = ("fuse_conv_add_relu", "convert_to_mkldnn", "transpose_frozen_linear")


def guard_info(optimize_numerics: bool) -> PassInfo:
    """The guard step: torch's own ``_jit_pass_optimize_frozen_graph``, run once more."""
    return PassInfo(
        GUARD_PASS,
        "torch's optimize_frozen_graph (guard)",
        "Run torch's whole frozen-graph optimization once more; it must change nothing.",
        optimize_numerics is False,
        "guard",
        "freezeview's order differs from this torch release's",
        "_jit_pass_optimize_frozen_graph",
        guard(optimize_numerics),
        diagnose_guard,
    )


def default_passes(
    optimize_numerics: bool = True,
    optimize_for_inference: bool = False,
    registry: Mapping[str, PassInfo] | None = None,
) -> tuple[str, ...]:
    """What ``torch.jit.freeze`` (and ``optimize_for_inference``) run, in torch's order.

    Args:
        optimize_numerics: include the folds that recompute weights (torch's default).
        optimize_for_inference: append the optimize_for_inference passes.
        registry: the registry to draw from (passes missing from it are left out).

    Returns:
        Pass ids; the loop passes are consecutive so they form one fixed-point loop.
    """
    reg = REGISTRY if registry is None else registry
    ids = [
        pid
        for pid in _FROZEN_ORDER
        if pid in reg and (optimize_numerics or reg[pid].group != "loop")
    ]
    if optimize_for_inference:
        ids.extend(pid for pid in _INFERENCE_ORDER if pid in reg)
    return tuple(pid for pid in ids if reg[pid].available)


def needs_guard(version: str | None = None) -> bool:
    """True unless freezeview's default order was verified on this torch release."""
    return torch_version(version) not in VERIFIED_TORCH
