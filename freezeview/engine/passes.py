"""The registry of frozen-graph passes freezeview can run one at a time.

``torch.jit.freeze`` ends with ``torch._C._jit_pass_optimize_frozen_graph``, which in
torch 2.x runs dropout removal, concat-linear, then repeats conv->batchnorm,
conv->add/sub, conv->mul/div and linear->batchnorm folding until none of them changes
the graph (``torch/csrc/jit/passes/frozen_graph_optimizations.cpp``).
``torch.jit.optimize_for_inference`` then adds conv-add-relu fusion, conversion to
MKLDNN ops and pre-transposed linear weights (``torch/csrc/jit/api/module.cpp``). Each
of those is a separate Python binding; this module names them, says what they do,
whether they keep numerics exact, when they fire, and -- looking at a snapshot -- why
one did not fire on a given graph.

The default order is keyed on the torch version: :data:`VERIFIED_TORCH` lists the
releases whose order freezeview's tests proved equal to torch's own call. On any other
release the pipeline runs the same order and then torch's own
``_jit_pass_optimize_frozen_graph`` once more as a guard step that must change nothing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch

from .snapshot import GraphSnapshot, NodeSnapshot

__all__ = [
    "GROUPS",
    "GUARD_PASS",
    "REGISTRY",
    "VERIFIED_TORCH",
    "PassFunction",
    "PassInfo",
    "default_passes",
    "needs_guard",
    "remove_dropout_in_graph",
    "torch_version",
]

#: Runs ``(graph, method_name, module)`` and returns True/False if it knows whether it
#: changed the graph, None if it cannot tell (the pipeline then compares the IR text).
PassFunction = Callable[[torch._C.Graph, str, torch._C.ScriptModule], "bool | None"]

#: ``once``: runs one time in plan order; ``loop``: consecutive loop passes repeat until
#: a whole round changes nothing (torch's fixed point); ``inference``: the
#: optimize_for_inference extras; ``guard``: torch's whole call, as a check.
GROUPS = ("once", "loop", "inference", "guard")

#: torch releases (major, minor) whose default order freezeview's tests proved equal to
#: ``_jit_pass_optimize_frozen_graph`` (tests/test_pipeline.py, on the installed torch).
VERIFIED_TORCH: frozenset[tuple[int, int]] = frozenset({(2, 13)})

GUARD_PASS = "optimize_frozen_graph"

_DROPOUT_KINDS = frozenset(
    {"aten::dropout", "aten::dropout_", "aten::feature_dropout", "aten::feature_dropout_"}
)
_CONV_KINDS = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution"})
_DEVICE_RE = re.compile(r"device=(\w+)")


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
    diagnose: Callable[[GraphSnapshot], str] | None = None

    @property
    def available(self) -> bool:
        """True if the installed torch has the binding."""
        return hasattr(torch._C, self.binding)

    @property
    def kind(self) -> str:
        """The step kind its steps get: ``inference`` or ``optimize``."""
        return "inference" if self.group == "inference" else "optimize"

    def why_not(self, snapshot: GraphSnapshot | None) -> str:
        """Why the pass did not change ``snapshot`` (a generic sentence if unknown)."""
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


# --- running passes -------------------------------------------------------------------


def _binding(name: str) -> Callable[..., Any]:
    fn = getattr(torch._C, name, None)
    if fn is None:
        raise RuntimeError(f"this torch ({torch.__version__}) has no torch._C.{name}")
    return fn  # type: ignore[no-any-return]


def _graph_pass(name: str) -> PassFunction:
    def apply(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool | None:
        result = _binding(name)(graph)
        return bool(result) if isinstance(result, bool) else None

    return apply


def remove_dropout_in_graph(graph: torch._C.Graph) -> bool:
    """Remove eval-mode dropout nodes from ``graph``; return True if any was removed.

    torch binds dropout removal only for a module's ``forward``
    (``_jit_pass_remove_dropout(module)``), while ``_jit_pass_optimize_frozen_graph``
    also removes dropout from every preserved method. freezeview does the same rewrite
    for those methods here: a dropout whose ``training`` input is the constant False is
    replaced by its input, as in ``torch/csrc/jit/passes/remove_dropout.cpp``.
    """
    doomed: list[torch._C.Node] = []

    def visit(block: torch._C.Block) -> None:
        for node in reversed(list(block.nodes())):
            for sub in node.blocks():
                visit(sub)
            if node.kind() not in _DROPOUT_KINDS:
                continue
            training = list(node.inputs())[2]
            if training.node().kind() != "prim::Constant" or training.toIValue() is not False:
                continue
            node.output().replaceAllUsesWith(next(iter(node.inputs())))
            doomed.append(node)

    visit(graph.block())
    for node in doomed:
        node.destroy()
    return bool(doomed)


def _dropout_count(graph: torch._C.Graph) -> int:
    # Counted by torch in C++ (nested blocks included): printing a 9k-node graph twice
    # to compare would cost more than the pass.
    found: list[list[torch._C.Node]] = [graph.findAllNodes(k) for k in _DROPOUT_KINDS]  # type: ignore[attr-defined]
    return sum(len(nodes) for nodes in found)


def _remove_dropout(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool:
    if method == "forward":
        before = _dropout_count(graph)
        _binding("_jit_pass_remove_dropout")(module)
        return _dropout_count(graph) < before
    return remove_dropout_in_graph(graph)


def _guard(optimize_numerics: bool) -> PassFunction:
    def apply(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool | None:
        _binding("_jit_pass_optimize_frozen_graph")(graph, optimize_numerics)
        return None

    return apply


# --- diagnosing why a pass did not fire ----------------------------------------------


class _Graph:
    """Use counts, producers and constants of a snapshot, computed once."""

    def __init__(self, snap: GraphSnapshot) -> None:
        self.snap = snap
        self.producers = snap.producers()
        self.uses: dict[str, int] = {}
        for node in snap.walk():
            for name in node.inputs:
                self.uses[name] = self.uses.get(name, 0) + 1
        for name in _block_outputs(snap):
            self.uses[name] = self.uses.get(name, 0) + 1

    def nodes(self, kinds: Iterable[str]) -> list[NodeSnapshot]:
        wanted = set(kinds)
        return [n for n in self.snap.walk() if n.kind in wanted]

    def producer(self, value: str) -> NodeSnapshot | None:
        return self.producers.get(value)

    def is_constant(self, value: str) -> bool:
        node = self.producers.get(value)
        return node is not None and node.kind == "prim::Constant"

    def non_constant_inputs(self, node: NodeSnapshot) -> list[str]:
        return [name for name in node.inputs[1:] if not self.is_constant(name)]

    def constant_shape(self, value: str) -> tuple[int, ...] | None:
        node = self.producers.get(value)
        if node is None or node.constant is None:
            return None
        return node.constant.shape

    def constant_dtype(self, value: str) -> str | None:
        node = self.producers.get(value)
        return None if node is None or node.constant is None else node.constant.dtype

    def device(self, value: str) -> str | None:
        # The snapshot's value type is the short form ("Tensor"); the constant's IR line
        # carries the complete type with the device.
        node = self.producers.get(value)
        info = self.snap.value(value)
        for text in (node.line if node is not None else "", info.type if info else ""):
            match = _DEVICE_RE.search(text)
            if match:
                return match.group(1)
        return None


def _block_outputs(snap: GraphSnapshot) -> list[str]:
    names = list(snap.block.outputs)
    for node in snap.walk():
        for block in node.blocks:
            names.extend(block.outputs)
    return names


def _where(node: NodeSnapshot) -> str:
    scope = f" in {node.scope}" if node.scope else ""
    line = f" ({node.source.short()})" if node.source is not None else ""
    return f"{node.kind}{scope}{line}"


def _first(reasons: list[str], noun: str) -> str:
    unique = list(dict.fromkeys(reasons))
    more = f" (and {len(unique) - 2} more)" if len(unique) > 2 else ""
    return f"{len(reasons)} {noun} found but none qualified: " + "; ".join(unique[:2]) + more


def _param_reason(g: _Graph, node: NodeSnapshot, role: str) -> str | None:
    missing = g.non_constant_inputs(node)
    if not missing:
        return None
    producer = g.producer(missing[0])
    what = (
        f"read with prim::GetAttr {producer.attribute('name')!r}, a kept attribute"
        if producer is not None and producer.kind == "prim::GetAttr"
        else "computed at run time"
    )
    return f"the {role}'s parameters are not constants (%{missing[0]} is {what})"


def _diagnose_dropout(snap: GraphSnapshot) -> str:
    g = _Graph(snap)
    drops = g.nodes(_DROPOUT_KINDS)
    if not drops:
        return "no aten::dropout or aten::feature_dropout node in the graph"
    reasons = []
    for node in drops:
        training = node.inputs[2] if len(node.inputs) > 2 else ""
        producer = g.producer(training)
        if producer is None or producer.kind != "prim::Constant":
            reasons.append(
                f"{_where(node)}: its training flag is not a constant (the module's "
                "`training` attribute was kept)"
            )
        else:
            value = producer.constant.text if producer.constant else "?"
            reasons.append(f"{_where(node)}: training is {value}")
    return _first(reasons, "dropout nodes")


def _diagnose_concat_linear(snap: GraphSnapshot) -> str:
    g = _Graph(snap)
    linears = g.nodes({"aten::linear"})
    if not linears:
        return "no aten::linear in the graph"
    by_input: dict[str, list[NodeSnapshot]] = {}
    reasons = []
    for node in linears:
        if len(node.inputs) < 3 or g.producer(node.inputs[2]) is None:
            reasons.append(f"{_where(node)} has no bias")
            continue
        bias = g.producer(node.inputs[2])
        if bias is not None and bias.constant is not None and bias.constant.kind == "none":
            reasons.append(f"{_where(node)} has no bias")
            continue
        param = _param_reason(g, node, "linear")
        if param:
            reasons.append(f"{_where(node)}: {param}")
            continue
        device = g.device(node.inputs[1])
        if device != "cuda":
            reasons.append(
                f"{_where(node)}: its weight is on {device or 'an unknown device'}; "
                "torch merges linear layers only when their weights are on CUDA"
            )
            continue
        by_input.setdefault(node.inputs[0], []).append(node)
    if any(len(group) > 1 for group in by_input.values()):
        return "linear layers share an input but their weights differ in shape, dtype or device"
    if not reasons:
        return "no two linear layers with constant weights read the same input"
    return _first(reasons, "aten::linear nodes")


def _diagnose_after(
    snap: GraphSnapshot,
    op_kinds: set[str],
    op_label: str,
    producer_kinds: frozenset[str],
    producer_label: str,
    extra: Callable[[_Graph, NodeSnapshot, NodeSnapshot], str | None] | None = None,
    *,
    single_use: bool = True,
) -> str:
    g = _Graph(snap)
    ops = g.nodes(op_kinds)
    if not ops:
        return f"no {op_label} node in the graph"
    reasons = []
    for op in ops:
        src = g.producer(op.inputs[0]) if op.inputs else None
        if src is None or src.kind not in producer_kinds:
            made_by = src.kind if src is not None else "a graph input"
            reasons.append(f"{_where(op)} reads {made_by}, not a {producer_label}")
            continue
        if src.kind == "aten::_convolution" and src.attribute("transposed") == "1":
            reasons.append(f"{_where(src)} is a transposed convolution")
            continue
        uses = g.uses.get(src.output_names[0], 0) if src.outputs else 0
        if single_use and uses > 1:
            reasons.append(
                f"{producer_label} output has {uses} uses ({_where(src)}); folding needs it "
                f"to feed only the {op_label}"
            )
            continue
        reason = _param_reason(g, src, producer_label) or _param_reason(g, op, op_label)
        if reason:
            reasons.append(reason)
            continue
        if extra is not None:
            reason = extra(g, src, op)
            if reason:
                reasons.append(reason)
                continue
        reasons.append(f"{_where(op)} looks foldable, yet torch left it (see torch's own checks)")
    return _first(reasons, f"{op_label} nodes")


def _broadcast_reason(g: _Graph, conv: NodeSnapshot, op: NodeSnapshot) -> str | None:
    weight_shape = g.constant_shape(conv.inputs[1])
    weight_dtype = g.constant_dtype(conv.inputs[1]) or ""
    if weight_dtype and not weight_dtype.startswith(("float", "bfloat", "half", "double")):
        return f"the convolution weight is {weight_dtype}; only floating weights are folded"
    if len(op.inputs) < 2:
        return None
    shape = g.constant_shape(op.inputs[1])
    if shape is None or weight_shape is None:
        return None
    out_channels = weight_shape[0]
    if len(shape) > len(weight_shape) or any(
        size != 1 and not (i == 1 and size == out_channels) for i, size in enumerate(shape)
    ):
        return (
            f"the constant operand has shape {list(shape)}: it must be 1 everywhere except "
            f"dimension 1, which may be the {out_channels} output channels"
        )
    op_dtype = g.constant_dtype(op.inputs[1]) or ""
    if op_dtype and not op_dtype.startswith(("float", "bfloat", "half", "double")):
        return f"the constant operand is {op_dtype}; only floating operands are folded"
    return None


def _bn_stats_reason(g: _Graph, src: NodeSnapshot, bn: NodeSnapshot) -> str | None:
    if len(bn.inputs) > 4:
        mean = g.producer(bn.inputs[3])
        if mean is not None and mean.constant is not None and mean.constant.kind == "none":
            return f"{_where(bn)} has no running statistics (track_running_stats=False)"
    return None


def _diagnose_conv_bn(snap: GraphSnapshot) -> str:
    return _diagnose_after(
        snap,
        {"aten::batch_norm"},
        "aten::batch_norm",
        _CONV_KINDS,
        "convolution",
        _bn_stats_reason,
    )


def _diagnose_conv_add(snap: GraphSnapshot) -> str:
    return _diagnose_after(
        snap,
        {"aten::add", "aten::sub"},
        "aten::add/sub",
        _CONV_KINDS,
        "convolution",
        _broadcast_reason,
    )


def _diagnose_conv_mul(snap: GraphSnapshot) -> str:
    return _diagnose_after(
        snap,
        {"aten::mul", "aten::div"},
        "aten::mul/div",
        _CONV_KINDS,
        "convolution",
        _broadcast_reason,
    )


def _diagnose_linear_bn(snap: GraphSnapshot) -> str:
    return _diagnose_after(
        snap,
        {"aten::batch_norm"},
        "aten::batch_norm",
        frozenset({"aten::linear"}),
        "linear",
        _bn_stats_reason,
        # torch's linear-bn fold, unlike the conv folds, does not require a single use.
        single_use=False,
    )


def _diagnose_transpose(snap: GraphSnapshot) -> str:
    g = _Graph(snap)
    linears = g.nodes({"aten::linear"})
    if not linears:
        return "no aten::linear in the graph"
    reasons = [f"{_where(n)}: {_param_reason(g, n, 'linear') or 'unexpected'}" for n in linears]
    return _first(reasons, "aten::linear nodes")


def _diagnose_mkldnn(snap: GraphSnapshot) -> str:
    if not torch.backends.mkldnn.is_available():
        return "this torch was built without MKLDNN (oneDNN)"
    g = _Graph(snap)
    ops = g.nodes(_CONV_KINDS | {"aten::linear"})
    if not ops:
        return "no convolution or aten::linear for MKLDNN to take over"
    reasons = []
    for node in ops:
        reason = _param_reason(g, node, node.kind)
        if reason is None:
            dtype = g.constant_dtype(node.inputs[1]) if len(node.inputs) > 1 else None
            reason = (
                f"{_where(node)}: weight is {dtype}, MKLDNN takes float32 only"
                if dtype and dtype != "float32"
                else f"{_where(node)}: torch judged the conversion not profitable here"
            )
        reasons.append(reason)
    return _first(reasons, "convolution/linear nodes")


def _diagnose_conv_add_relu(snap: GraphSnapshot) -> str:
    if not torch.cuda.is_available():
        return "conv-add-relu fusion only rewrites CUDA graphs (needs cuDNN); nothing to do on CPU"
    return "no convolution followed by add and relu with constant CUDA weights"


def _diagnose_guard(snap: GraphSnapshot) -> str:
    return "torch's own call found nothing left to do: freezeview's steps match it"


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
            _remove_dropout,
            _diagnose_dropout,
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
            _graph_pass("_jit_pass_concat_frozen_linear"),
            _diagnose_concat_linear,
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
            _graph_pass("_jit_pass_fold_frozen_conv_bn"),
            _diagnose_conv_bn,
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
            _graph_pass("_jit_pass_fold_frozen_conv_add_or_sub"),
            _diagnose_conv_add,
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
            _graph_pass("_jit_pass_fold_frozen_conv_mul_or_div"),
            _diagnose_conv_mul,
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
            _graph_pass("_jit_pass_fold_frozen_linear_bn"),
            _diagnose_linear_bn,
        ),
        PassInfo(
            "fuse_conv_add_relu",
            "conv-add-relu fusion",
            "Fuse convolution + add + relu into one cuDNN op (optimize_for_inference).",
            True,
            "inference",
            "a CUDA build with convolution -> add -> relu on constant CUDA weights",
            "_jit_pass_fuse_frozen_conv_add_relu",
            _graph_pass("_jit_pass_fuse_frozen_conv_add_relu"),
            _diagnose_conv_add_relu,
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
            _graph_pass("_jit_pass_convert_frozen_ops_to_mkldnn"),
            _diagnose_mkldnn,
        ),
        PassInfo(
            "transpose_frozen_linear",
            "pre-transpose linear",
            "Replace aten::linear by matmul with a pre-transposed constant weight (+ add bias).",
            False,
            "inference",
            "aten::linear whose weight and bias are constants",
            "_jit_pass_transpose_frozen_linear",
            _graph_pass("_jit_pass_transpose_frozen_linear"),
            _diagnose_transpose,
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
        _guard(optimize_numerics),
        _diagnose_guard,
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
