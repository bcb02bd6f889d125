"""Why a frozen-graph pass did not fire, read off the graph it left unchanged.

Each ``diagnose_*`` function takes the snapshot of a graph a pass did not change and
says in one sentence what kept the pass's pattern from matching (a dropout whose
``training`` flag was kept, a convolution output with two uses, weights read from a
kept attribute, ...). :mod:`.passes` hangs one on each pass of its registry.
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
SCOPED_KINDS = (
    DROPOUT_KINDS
    | _CONV_KINDS
    | frozenset(
        {"aten::linear", "aten::add", "aten::sub", "aten::mul", "aten::div", "aten::batch_norm"}
    )
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


def diagnose_dropout(snap: Diagnosed) -> str:
    """Why dropout removal left ``snap`` unchanged."""
    g = _Graph(snap)
    drops = g.nodes(DROPOUT_KINDS)
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


def diagnose_concat_linear(snap: Diagnosed) -> str:
    """Why concat-linear merged no linear layers of ``snap``."""
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
    snap: Diagnosed,
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
        uses = g.use_count(src.output_names[0]) if src.outputs else 0
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


def diagnose_conv_bn(snap: Diagnosed) -> str:
    """Why no batch_norm of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        {"aten::batch_norm"},
        "aten::batch_norm",
        _CONV_KINDS,
        "convolution",
        _bn_stats_reason,
    )


def diagnose_conv_add(snap: Diagnosed) -> str:
    """Why no add/sub of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        {"aten::add", "aten::sub"},
        "aten::add/sub",
        _CONV_KINDS,
        "convolution",
        _broadcast_reason,
    )


def diagnose_conv_mul(snap: Diagnosed) -> str:
    """Why no mul/div of ``snap`` folded into its convolution."""
    return _diagnose_after(
        snap,
        {"aten::mul", "aten::div"},
        "aten::mul/div",
        _CONV_KINDS,
        "convolution",
        _broadcast_reason,
    )


def diagnose_linear_bn(snap: Diagnosed) -> str:
    """Why no batch_norm of ``snap`` folded into its linear layer."""
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


def diagnose_transpose(snap: Diagnosed) -> str:
    """Why no linear layer of ``snap`` got a pre-transposed weight."""
    g = _Graph(snap)
    linears = g.nodes({"aten::linear"})
    if not linears:
        return "no aten::linear in the graph"
    reasons = [f"{_where(n)}: {_param_reason(g, n, 'linear') or 'unexpected'}" for n in linears]
    return _first(reasons, "aten::linear nodes")


def diagnose_mkldnn(snap: Diagnosed) -> str:
    """Why nothing in ``snap`` moved to MKLDNN."""
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


def diagnose_conv_add_relu(snap: Diagnosed) -> str:
    """Why conv-add-relu fusion left ``snap`` unchanged."""
    if not torch.cuda.is_available():
        return "conv-add-relu fusion only rewrites CUDA graphs (needs cuDNN); nothing to do on CPU"
    return "no convolution followed by add and relu with constant CUDA weights"


def diagnose_guard(snap: Diagnosed) -> str:
    """The guard step changed nothing: freezeview's steps match torch's call."""
    return "torch's own call found nothing left to do: freezeview's steps match it"
