"""Why a frozen-graph pass did not fire, read off the graph it left unchanged.

Each ``diagnose_*`` function takes the snapshot of a graph a pass did not change and
says in one sentence what kept the pass's pattern from matching: torch's own condition
(as its C++ pass checks it: frozen_conv_folding.cpp, frozen_linear_folding.cpp,
remove_dropout.cpp, frozen_concat_linear.cpp, frozen_ops_to_mkldnn.cpp), then the
nearest candidate node and every condition it fails, in torch's order (an in-place
``aten::add_``, a dropout whose ``training`` flag was kept, a convolution output with
two uses, weights read from a kept attribute, ...); with none of the nodes the pass
rewrites, just that. :mod:`.passes` hangs one on each pass of its registry.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping

import torch

from ..graph import GraphSnapshot, NodeSnapshot, SparseReading, ValueInfo
from .pass_runners import DROPOUT_KINDS

__all__ = [
    "SCOPED_KINDS",
    "Diagnosed",
    "Reading",
    "diagnose_concat_linear",
    "diagnose_conv_add",
    "diagnose_conv_add_relu",
    "diagnose_conv_bn",
    "diagnose_conv_mul",
    "diagnose_dropout",
    "diagnose_guard",
    "diagnose_linear_bn",
    "diagnose_mkldnn",
    "diagnose_transpose",
]

_CONV_KINDS = frozenset({"aten::conv1d", "aten::conv2d", "aten::conv3d", "aten::_convolution"})
#: The kinds whose module scope a diagnosis may name (``_where``); the others' scopes
#: are never read, so the pipeline's diagnoses use a partial snapshot.
_ADD_KINDS = frozenset({"aten::add", "aten::sub"})
_MUL_KINDS = frozenset({"aten::mul", "aten::div"})
# The in-place forms torch's folds never take: the nearest candidates in many graphs
# (a ResNet's ``out += identity`` is an aten::add_).
_INPLACE = {kind + "_": kind for kind in _ADD_KINDS | _MUL_KINDS}
# Dropouts torch's removal does not take (it removes dropout and feature_dropout only).
_OTHER_DROPOUTS = frozenset(
    {"aten::alpha_dropout", "aten::alpha_dropout_", "aten::feature_alpha_dropout"}
)
SCOPED_KINDS = (
    DROPOUT_KINDS
    | _OTHER_DROPOUTS
    | _CONV_KINDS
    | _ADD_KINDS
    | _MUL_KINDS
    | frozenset(_INPLACE)
    | frozenset({"aten::linear", "aten::batch_norm"})
)
_DEVICE_RE = re.compile(r"device=(\w+)")


class Reading:
    """A graph a diagnosis reads: its node kinds now, its nodes when first needed.

    Most diagnoses start by looking for the nodes their pass rewrites; when the kind
    tally (a step's node counts have it already) holds none of them, the answer ("no
    aten::batch_norm node in the graph") needs nothing else. Otherwise ``build`` gives
    the nodes: a :class:`~freezeview.engine.graph.snapshot_sparse.SparseReading` (the
    lines asked for, parsed when asked) or a snapshot.
    """

    __slots__ = ("_build", "_kinds", "_nodes")

    def __init__(
        self, kinds: Mapping[str, int], build: Callable[[], GraphSnapshot | SparseReading]
    ) -> None:
        self._kinds = kinds
        self._build: Callable[[], GraphSnapshot | SparseReading] | None = build
        self._nodes: GraphSnapshot | SparseReading | None = None

    def has_any(self, kinds: Iterable[str]) -> bool:
        """True if the graph holds a node of one of ``kinds`` (nested blocks included)."""
        return any(self._kinds.get(kind, 0) > 0 for kind in kinds)

    def nodes(self) -> GraphSnapshot | SparseReading:
        """The graph's nodes (read on the first call)."""
        if self._nodes is None:
            assert self._build is not None
            self._nodes = self._build()
            self._build = None
        return self._nodes


#: What a diagnosis reads: a snapshot, or a :class:`Reading` of a graph.
Diagnosed = GraphSnapshot | Reading


class _Graph:
    """Producers, use counts and constants of the graph a diagnosis reads, computed once
    (and only when the diagnosis reads past the nodes of its pass's kinds)."""

    def __init__(self, source: Diagnosed) -> None:
        self._reading = source if isinstance(source, Reading) else None
        self._read: GraphSnapshot | SparseReading | None = (
            source if isinstance(source, GraphSnapshot) else None
        )
        self._producers: dict[str, NodeSnapshot] | None = None
        self._uses: dict[str, int] | None = None

    @property
    def _source(self) -> GraphSnapshot | SparseReading:
        if self._read is None:
            assert self._reading is not None
            self._read = self._reading.nodes()
        return self._read

    def _snapshot_producers(self, snap: GraphSnapshot) -> dict[str, NodeSnapshot]:
        if self._producers is None:
            self._producers = snap.producers()
        return self._producers

    def use_count(self, value: str) -> int:
        source = self._source
        if isinstance(source, SparseReading):
            return source.use_count(value)
        if self._uses is None:
            uses: dict[str, int] = {}
            for node in source.walk():
                for name in node.inputs:
                    uses[name] = uses.get(name, 0) + 1
            for name in _block_outputs(source):
                uses[name] = uses.get(name, 0) + 1
            self._uses = uses
        return self._uses.get(value, 0)

    def nodes(self, kinds: Iterable[str]) -> list[NodeSnapshot]:
        wanted = set(kinds)
        if self._read is None and self._reading is not None and not self._reading.has_any(wanted):
            return []  # the tally says none: nothing else to read for that answer
        source = self._source
        if isinstance(source, SparseReading):
            return source.nodes(wanted)
        return [n for n in source.walk() if n.kind in wanted]

    def producer(self, value: str) -> NodeSnapshot | None:
        source = self._source
        if isinstance(source, SparseReading):
            return source.producer(value)
        return self._snapshot_producers(source).get(value)

    def value(self, name: str) -> ValueInfo | None:
        return self._source.value(name)

    def is_constant(self, value: str) -> bool:
        node = self.producer(value)
        return node is not None and node.kind == "prim::Constant"

    def non_constant_inputs(self, node: NodeSnapshot) -> list[str]:
        return [name for name in node.inputs[1:] if not self.is_constant(name)]

    def constant_shape(self, value: str) -> tuple[int, ...] | None:
        node = self.producer(value)
        if node is None or node.constant is None:
            return None
        return node.constant.shape

    def constant_dtype(self, value: str) -> str | None:
        node = self.producer(value)
        return None if node is None or node.constant is None else node.constant.dtype

    def device(self, value: str) -> str | None:
        # The snapshot's value type is the short form ("Tensor"); the constant's IR line
        # carries the complete type with the device.
        node = self.producer(value)
        info = self.value(value)
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


_DROPOUT_RULE = (
    "torch removes an aten::dropout or aten::feature_dropout (or their in-place forms) "
    "whose training flag is the constant False"
)
_CONCAT_RULE = (
    "torch merges aten::linear layers that read the same input, in the same block, "
    "with constant weight and bias on CUDA, of one dtype and one trailing shape"
)


def diagnose_dropout(snap: Diagnosed) -> str:
    """Why dropout removal left ``snap`` unchanged."""
    g = _Graph(snap)
    drops = g.nodes(DROPOUT_KINDS)
    if not drops:
        others = g.nodes(_OTHER_DROPOUTS)
        if others:
            return (
                f"no aten::dropout or aten::feature_dropout node in the graph ({_DROPOUT_RULE}); "
                f"{_where(others[0])} is another kind of dropout, which the pass never removes"
            )
        return f"no aten::dropout or aten::feature_dropout node in the graph ({_DROPOUT_RULE})"
    found = []
    for node in drops:
        training = node.inputs[2] if len(node.inputs) > 2 else ""
        producer = g.producer(training)
        if producer is None or producer.kind != "prim::Constant":
            why = (
                f"its training flag is not a constant ({_made_by(g, training)}: the "
                "module's `training` attribute was kept)"
            )
        else:
            value = producer.constant.text if producer.constant else "?"
            why = f"its training flag is the constant {value}"
        found.append((node, [why]))
    return _none_qualifies(_DROPOUT_RULE, found)


def diagnose_concat_linear(snap: Diagnosed) -> str:
    """Why concat-linear merged no linear layers of ``snap``."""
    g = _Graph(snap)
    linears = g.nodes({"aten::linear"})
    if not linears:
        return f"no aten::linear in the graph ({_CONCAT_RULE})"
    by_input: dict[str, list[NodeSnapshot]] = {}
    found: list[tuple[NodeSnapshot, list[str]]] = []
    for node in linears:
        bias = g.producer(node.inputs[2]) if len(node.inputs) > 2 else None
        if bias is None or (bias.constant is not None and bias.constant.kind == "none"):
            found.append((node, ["it has no bias"]))
            continue
        param = _param_reason(g, node, "linear")
        if param:
            found.append((node, [param]))
            continue
        device = g.device(node.inputs[1])
        if device != "cuda":
            found.append((node, [f"its weight is on {device or 'an unknown device'}, not CUDA"]))
            continue
        by_input.setdefault(node.inputs[0], []).append(node)
    for group in by_input.values():
        for node in group:
            why = (
                "no other qualifying aten::linear reads its input"
                if len(group) == 1
                else "the linear layers reading its input differ in dtype, device or "
                "trailing shape, or one cannot move before the other"
            )
            found.append((node, [why]))
    return _none_qualifies(_CONCAT_RULE, found)


def _made_by(g: _Graph, value: str) -> str:
    """``computed at run time by aten::relu_``, ``read with prim::GetAttr 'w', a kept
    attribute`` or ``a graph input``: where a value that is not a constant comes from."""
    producer = g.producer(value)
    if producer is None:
        return "a graph input"
    if producer.kind == "prim::GetAttr":
        return f"read with prim::GetAttr {producer.attribute('name')!r}, a kept attribute"
    return f"computed at run time by {producer.kind}"


def _operand_reason(g: _Graph, op: NodeSnapshot, label: str) -> str | None:
    """Why ``op``'s own inputs after the first are not all constants (torch's
    ``nonConstantParameters``), naming the first one that is not."""
    missing = g.non_constant_inputs(op)
    if not missing:
        return None
    name = missing[0]
    if op.kind in _ADD_KINDS | _MUL_KINDS | frozenset(_INPLACE) and tuple(op.inputs[1:2]) == (
        name,
    ):
        return f"its other operand %{name} is not a constant ({_made_by(g, name)})"
    return f"the {label}'s parameters are not constants (%{name} is {_made_by(g, name)})"


def _transposed(g: _Graph, conv: NodeSnapshot) -> bool:
    """torch's ``supportedConvNode``: an ``aten::_convolution`` whose ``transposed`` input
    (its seventh) is not the constant False counts as transposed."""
    if conv.kind != "aten::_convolution":
        return False
    flag = g.producer(conv.inputs[6]) if len(conv.inputs) > 6 else None
    if flag is None or flag.kind != "prim::Constant" or flag.constant is None:
        return True
    return flag.constant.text not in ("0", "False", "false")


def _fold_reasons(
    g: _Graph,
    op: NodeSnapshot,
    op_label: str,
    producer_kinds: frozenset[str],
    producer_label: str,
    extra: Callable[[_Graph, NodeSnapshot, NodeSnapshot], str | None] | None,
    single_use: bool,
) -> list[str]:
    """Every condition of torch's fold that ``op`` fails, in the order torch checks them."""
    reasons: list[str] = []
    if op.kind in _INPLACE:
        reasons.append(f"in-place (torch folds only the out-of-place {op_label})")
    src = g.producer(op.inputs[0]) if op.inputs else None
    if src is None or src.kind not in producer_kinds:
        made_by = src.kind if src is not None else "a graph input"
        reasons.append(f"its first input comes from {made_by}, not a {producer_label}")
    elif _transposed(g, src):
        reasons.append(f"its first input is a transposed convolution's ({_where(src)})")
    else:
        uses = g.use_count(src.output_names[0]) if src.outputs else 0
        if single_use and uses > 1:
            reasons.append(
                f"the {producer_label}'s output ({_where(src)}) has {uses} uses; it must "
                "feed only this node"
            )
        param = _param_reason(g, src, producer_label)
        if param:
            reasons.append(param)
    operand = _operand_reason(g, op, op_label)
    if operand:
        reasons.append(operand)
    if not reasons and src is not None and extra is not None:
        reason = extra(g, src, op)
        if reason:
            reasons.append(reason)
    return reasons


_VALUE_NAME = re.compile(r"%[\w.]+")


def _none_qualifies(rule: str, found: list[tuple[NodeSnapshot, list[str]]]) -> str:
    """torch's rule, then the nearest candidates (fewest failed conditions) and why.

    Candidates that fail alike (the same kind and conditions, value names aside) are
    told once, with how many more there are.
    """
    groups: dict[str, list[tuple[NodeSnapshot, str]]] = {}
    for node, reasons in sorted(found, key=lambda item: len(item[1])):
        why = "; ".join(reasons) or "torch left it all the same (see torch's own checks)"
        key = f"{node.kind}: {_VALUE_NAME.sub('%', why)}"
        groups.setdefault(key, []).append((node, why))
    shown = []
    for members in list(groups.values())[:2]:
        node, why = members[0]
        more = f" ({len(members) - 1} more alike)" if len(members) > 1 else ""
        shown.append(f"{_where(node)}{more}: {why}")
    count = len(found)
    if count == 1:
        return f"{rule}; the only candidate: {shown[0]}"
    text = f"{rule}; none of the {count} candidates qualifies; nearest: {shown[0]}"
    if len(shown) > 1:
        text += f"; next: {shown[1]}"
    return text


def _diagnose_after(
    snap: Diagnosed,
    op_kinds: frozenset[str],
    op_label: str,
    producer_kinds: frozenset[str],
    producer_label: str,
    rule: str,
    extra: Callable[[_Graph, NodeSnapshot, NodeSnapshot], str | None] | None = None,
    *,
    single_use: bool = True,
) -> str:
    g = _Graph(snap)
    near = frozenset(k for k, base in _INPLACE.items() if base in op_kinds)
    ops = g.nodes(op_kinds | near)
    if not ops:
        return f"no {op_label} node in the graph ({rule})"
    found = [
        (op, _fold_reasons(g, op, op_label, producer_kinds, producer_label, extra, single_use))
        for op in ops
    ]
    return _none_qualifies(rule, found)


def _broadcast_reason(g: _Graph, conv: NodeSnapshot, op: NodeSnapshot) -> str | None:
    """torch's ``checkConvAndBroadcastingOpPreConditions`` past the constants and uses:
    floating weights, an operand tensor of 1s but for the output channels in dimension 1."""
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
    return None


def _bn_stats_reason(g: _Graph, src: NodeSnapshot, bn: NodeSnapshot) -> str | None:
    if len(bn.inputs) > 4:
        mean = g.producer(bn.inputs[3])
        if mean is not None and mean.constant is not None and mean.constant.kind == "none":
            return "it has no running statistics (track_running_stats=False)"
    return None


_CONV_BN_RULE = (
    "torch folds an aten::batch_norm whose first input is a (non-transposed) "
    "convolution's output used only there, every parameter of both a constant"
)
_CONV_ADD_RULE = (
    "torch folds an out-of-place aten::add/aten::sub whose first input is a "
    "(non-transposed) convolution's output used only there, with constant convolution "
    "parameters and a constant other operand (a scalar, or a tensor of 1s but for the "
    "output channels in dimension 1)"
)
_CONV_MUL_RULE = (
    "torch folds an out-of-place aten::mul/aten::div whose first input is a "
    "(non-transposed) convolution's output used only there, with constant convolution "
    "parameters and a constant other operand (a scalar, or a tensor of 1s but for the "
    "output channels in dimension 1)"
)
_LINEAR_BN_RULE = (
    "torch folds an aten::batch_norm with running statistics whose first input is an "
    "aten::linear's output, every parameter of both a constant"
)


def diagnose_conv_bn(snap: Diagnosed) -> str:
    """Why no batch_norm of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        frozenset({"aten::batch_norm"}),
        "aten::batch_norm",
        _CONV_KINDS,
        "convolution",
        _CONV_BN_RULE,
        _bn_stats_reason,
    )


def diagnose_conv_add(snap: Diagnosed) -> str:
    """Why no add/sub of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        _ADD_KINDS,
        "aten::add/sub",
        _CONV_KINDS,
        "convolution",
        _CONV_ADD_RULE,
        _broadcast_reason,
    )


def diagnose_conv_mul(snap: Diagnosed) -> str:
    """Why no mul/div of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        _MUL_KINDS,
        "aten::mul/div",
        _CONV_KINDS,
        "convolution",
        _CONV_MUL_RULE,
        _broadcast_reason,
    )


def diagnose_linear_bn(snap: Diagnosed) -> str:
    """Why no batch_norm of ``snap`` folded into its linear layer."""
    return _diagnose_after(
        snap,
        frozenset({"aten::batch_norm"}),
        "aten::batch_norm",
        frozenset({"aten::linear"}),
        "linear",
        _LINEAR_BN_RULE,
        _bn_stats_reason,
        # torch's linear-bn fold, unlike the conv folds, does not require a single use.
        single_use=False,
    )


_TRANSPOSE_RULE = "torch pre-transposes an aten::linear whose weight and bias are constants"
_MKLDNN_RULE = (
    "torch moves to MKLDNN an aten::conv2d/conv3d or aten::linear whose parameters are "
    "constants and whose weight is a CPU float tensor, with the ops around it, where it "
    "judges that profitable"
)


def diagnose_transpose(snap: Diagnosed) -> str:
    """Why no linear layer of ``snap`` got a pre-transposed weight."""
    g = _Graph(snap)
    linears = g.nodes({"aten::linear"})
    if not linears:
        return f"no aten::linear in the graph ({_TRANSPOSE_RULE})"
    found = [(n, [r] if (r := _param_reason(g, n, "linear")) else []) for n in linears]
    return _none_qualifies(_TRANSPOSE_RULE, found)


def diagnose_mkldnn(snap: Diagnosed) -> str:
    """Why nothing in ``snap`` moved to MKLDNN."""
    if not torch.backends.mkldnn.is_available():
        return "this torch was built without MKLDNN (oneDNN)"
    g = _Graph(snap)
    ops = g.nodes(_CONV_KINDS | {"aten::linear"})
    if not ops:
        return f"no convolution or aten::linear for MKLDNN to take over ({_MKLDNN_RULE})"
    found = []
    for node in ops:
        reasons = []
        if node.kind not in ("aten::conv2d", "aten::conv3d", "aten::linear"):
            reasons.append(f"MKLDNN takes aten::conv2d/conv3d, not {node.kind}")
        param = _param_reason(g, node, node.kind)
        if param:
            reasons.append(param)
        elif len(node.inputs) > 1:
            dtype = g.constant_dtype(node.inputs[1])
            device = g.device(node.inputs[1])
            if dtype and dtype != "float32":
                reasons.append(f"its weight is {dtype}; MKLDNN takes float32")
            if device and device != "cpu":
                reasons.append(f"its weight is on {device}, not the CPU")
        if not reasons:
            reasons.append("torch judged the conversion not profitable here")
        found.append((node, reasons))
    return _none_qualifies(_MKLDNN_RULE, found)


def diagnose_conv_add_relu(snap: Diagnosed) -> str:
    """Why conv-add-relu fusion left ``snap`` unchanged."""
    if not torch.cuda.is_available():
        return "conv-add-relu fusion only rewrites CUDA graphs (needs cuDNN); nothing to do on CPU"
    return "no convolution followed by add and relu with constant CUDA weights"


def diagnose_guard(snap: Diagnosed) -> str:
    """The guard step changed nothing: freezeview's steps match torch's call."""
    return "torch's own call found nothing left to do: freezeview's steps match it"
