"""Where the forward's time goes, per node and per node kind: torch-free values.

:mod:`.node_time` measures them (Static Runtime where it accepts the graph, torch's
profiler elsewhere); the CLI prints them and writes them as JSON lines. A
:class:`NodeProfile` is one graph's forward (the unfrozen module, or a step's graph),
a :class:`ProfileChange` what one step did to the time against the graph profiled
before it, node by node through the diff's node matching.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

from .measure_values import NOISE_FLOOR, format_ms

__all__ = [
    "STATIC_RUNTIME",
    "TORCH_PROFILER",
    "KindChange",
    "KindTime",
    "NodeChange",
    "NodeProfile",
    "NodeTime",
    "ProfileChange",
    "change_word",
]

#: The tool that timed a profile: Static Runtime's per-node benchmark.
STATIC_RUNTIME = "static-runtime"
#: The tool that timed a profile: ``torch.profiler``, each recorded op mapped to its node.
TORCH_PROFILER = "torch-profiler"


def _num(x: float) -> float | None:
    return x if math.isfinite(x) else None


@dataclass(frozen=True, slots=True)
class NodeTime:
    """One node's time in the forward.

    Attributes:
        id: the node's id in the profiled graph's snapshot (pre-order position).
        kind: ``aten::conv2d``, ...
        scope: the module path the node was inlined from (``layer1.0.conv1``).
        source: ``file:line`` the node came from, or ``""``.
        ms: median milliseconds per forward (over the profiled blocks or forwards).
        spread: the median absolute deviation of those, in milliseconds.
        share: ``ms`` over the sum of every timed node's ``ms`` (0..1).
        previous: the matched node's id in the graph profiled before (None: new here, or
            this is the unfrozen module).
        unfrozen: the matched node's id in the unfrozen module's graph (None: none).
        shapes: the input shapes the profiler recorded (empty under Static Runtime).
    """

    id: int
    kind: str
    scope: str
    source: str
    ms: float
    spread: float
    share: float
    previous: int | None = None
    unfrozen: int | None = None
    shapes: tuple[tuple[int, ...], ...] = ()

    def where(self) -> str:
        """``layer1.0.conv1 (model.py:12)``: the module path and source line, as known."""
        scope = self.scope or "<root>"
        return f"{scope} ({self.source.rsplit('/', 1)[-1]})" if self.source else scope

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "id": self.id,
            "kind": self.kind,
            "scope": self.scope,
            "source": self.source or None,
            "ms": self.ms,
            "spread_ms": self.spread,
            "share": self.share,
            "previous": self.previous,
            "unfrozen": self.unfrozen,
            "shapes": [list(s) for s in self.shapes],
        }


@dataclass(frozen=True, slots=True)
class KindTime:
    """The time of every node of one kind together.

    Attributes:
        kind: the node kind.
        count: how many nodes of that kind were timed.
        ms: the sum of their median times per forward.
        spread: the sum of their spreads (a kind's noise, taken wide).
        share: ``ms`` over the sum of every timed node's ``ms`` (0..1).
    """

    kind: str
    count: int
    ms: float
    spread: float
    share: float

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "kind": self.kind,
            "count": self.count,
            "ms": self.ms,
            "spread_ms": self.spread,
            "share": self.share,
        }


@dataclass(frozen=True)
class NodeProfile:
    """One graph's forward, node by node.

    Attributes:
        step: the step whose graph was profiled; None for the unfrozen module.
        name: the step's name (``unfrozen`` for the unfrozen module).
        title: the step's title for people.
        tool: :data:`STATIC_RUNTIME` or :data:`TORCH_PROFILER`.
        why: why that tool measured it (empty when Static Runtime did).
        threads: torch's intra-op threads while profiling.
        warmup: forwards run before anything was recorded.
        runs: forwards recorded (per node, the median is over them or over blocks).
        blocks: what the medians are taken over (Static Runtime's blocks, or forwards).
        forward_ms: the median time of the whole profiled forward (Static Runtime's own
            total per iteration, or the profiler's span of each forward).
        nodes: the timed nodes, in graph order.
        kinds: per kind, dearest first.
        calls: every forward the profiling ran (warm-up included).
        seconds: wall time the profiling took (set-up, warm-up, runs, reading events).
        torch_percent: Static Runtime's own ``percent_per_node_type``, the median over
            its blocks (empty for the profiler): the figures the per-kind shares are
            held to.
        startup: of ``seconds``, what the profiler's start took (torch sets it up on the
            first start in a process: a one-off, not a cost of this graph's forwards).
        trace: the Chrome trace file written for this forward (``--trace``), or None.
        mode: what the forwards ran under (``inference_mode``, ``no_grad``, ``autograd``).
    """

    step: int | None
    name: str
    title: str
    tool: str
    why: str
    threads: int
    warmup: int
    runs: int
    blocks: int
    forward_ms: float
    nodes: tuple[NodeTime, ...]
    kinds: tuple[KindTime, ...]
    calls: int
    seconds: float
    torch_percent: dict[str, float] = field(default_factory=dict)
    startup: float = 0.0
    trace: str | None = None
    mode: str = "inference_mode"

    @property
    def total_ms(self) -> float:
        """The sum of every timed node's median."""
        return sum(n.ms for n in self.nodes)

    def kind(self, kind: str) -> KindTime | None:
        """The :class:`KindTime` of ``kind``, or None."""
        return next((k for k in self.kinds if k.kind == kind), None)

    def top_nodes(self, most: int = 5) -> list[NodeTime]:
        """The dearest nodes, dearest first."""
        return sorted(self.nodes, key=lambda n: (-n.ms, n.id))[:most]

    def measured_by(self) -> str:
        """One sentence: which tool measured it, and why."""
        what = "Static Runtime" if self.tool == STATIC_RUNTIME else "torch.profiler"
        text = (
            f"{what}, {self.threads} thread{'s' if self.threads != 1 else ''}, "
            f"{self.warmup} warm-up forwards, medians of {self.blocks}"
        )
        return f"{text} ({self.why})" if self.why else text

    def to_json(self) -> dict[str, Any]:
        """The JSON line (``"type": "node_time"``; docs/schemas/node-time.schema.json)."""
        return {
            "type": "node_time",
            "step": self.step,
            "name": self.name,
            "title": self.title,
            "tool": self.tool,
            "why": self.why,
            "threads": self.threads,
            "mode": self.mode,
            "warmup": self.warmup,
            "runs": self.runs,
            "blocks": self.blocks,
            "forward_ms": _num(self.forward_ms),
            "nodes_ms": self.total_ms,
            "calls": self.calls,
            "seconds": self.seconds,
            "startup_seconds": self.startup,
            "kinds": [k.to_json() for k in self.kinds],
            "nodes": [n.to_json() for n in self.nodes],
            "torch_percent": dict(self.torch_percent),
            "trace": self.trace,
        }


def change_word(before: float, after: float, noise: float) -> str:
    """``faster``, ``slower`` or ``same``: a difference inside ``noise`` (or inside the
    5 % floor of the larger figure) is the same."""
    if abs(after - before) <= max(noise, NOISE_FLOOR * max(before, after)):
        return "same"
    return "faster" if after < before else "slower"


@dataclass(frozen=True, slots=True)
class KindChange:
    """One node kind's time before and after a step (0 where it had no node)."""

    kind: str
    before_ms: float
    after_ms: float
    before_count: int
    after_count: int
    word: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "kind": self.kind,
            "before_ms": self.before_ms,
            "after_ms": self.after_ms,
            "before_count": self.before_count,
            "after_count": self.after_count,
            "change": self.word,
        }


@dataclass(frozen=True, slots=True)
class NodeChange:
    """One node's time before and after a step, matched through the diff.

    ``before`` / ``after`` are node ids (None: the node is new, or gone); the ms figures
    are 0 on the missing side.
    """

    before: int | None
    after: int | None
    kind: str
    where: str
    before_ms: float
    after_ms: float
    word: str

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "before": self.before,
            "after": self.after,
            "kind": self.kind,
            "where": self.where,
            "before_ms": self.before_ms,
            "after_ms": self.after_ms,
            "change": self.word,
        }

    def text(self) -> str:
        """``aten::batch_norm layer1.0.bn1 (m.py:9): 0.21 ms -> gone``."""
        if self.after is None:
            moved = f"{format_ms(self.before_ms)} -> gone"
        elif self.before is None:
            moved = f"new, {format_ms(self.after_ms)}"
        else:
            moved = f"{format_ms(self.before_ms)} -> {format_ms(self.after_ms)} ({self.word})"
        return f"{self.kind} {self.where}: {moved}"


@dataclass(frozen=True)
class ProfileChange:
    """What a step did to the forward's time, against the graph profiled before it.

    Attributes:
        step: the step.
        title: its title.
        against: the step profiled before it (None: the unfrozen module).
        before_ms, after_ms: the two profiles' node totals.
        word: ``faster``, ``slower`` or ``same`` (inside the two spreads or the floor).
        kinds: every kind whose time moved outside the noise or whose count changed.
        nodes: the nodes whose time moved most (gone, new or changed), largest first.
    """

    step: int
    title: str
    against: int | None
    before_ms: float
    after_ms: float
    word: str
    kinds: tuple[KindChange, ...]
    nodes: tuple[NodeChange, ...]

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (in a ``node_time`` line's ``change``)."""
        return {
            "against": self.against,
            "before_ms": self.before_ms,
            "after_ms": self.after_ms,
            "change": self.word,
            "kinds": [k.to_json() for k in self.kinds],
            "nodes": [n.to_json() for n in self.nodes],
        }

    def summary(self) -> str:
        """One line: ``1.20 ms -> 0.81 ms (faster): aten::batch_norm -2 (0.40 ms), ...``."""
        head = f"{format_ms(self.before_ms)} -> {format_ms(self.after_ms)} ({self.word})"
        parts = []
        for k in self.kinds[:4]:
            count = k.after_count - k.before_count
            counted = f" {count:+d}" if count else ""
            delta = k.after_ms - k.before_ms
            parts.append(f"{k.kind}{counted} ({'+' if delta >= 0 else '-'}{format_ms(abs(delta))})")
        return f"{head}: {', '.join(parts)}" if parts else head
