"""Where the numbers move: torch-free values of a step's value bisection.

:mod:`.value_bisect` runs a step's graph and the graph before it on the same sample
inputs with every matched value exposed, and describes the outcome with these values; the
CLI prints them (:meth:`Bisection.lines`) and writes them as ``numerics_bisect`` JSON
lines (docs/schemas/numerics-bisect.schema.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..plumbing import plural

__all__ = [
    "NAMED",
    "NOT_RUN",
    "SAME",
    "UNCLEAR",
    "Bisection",
    "InputChange",
    "ValueDiff",
    "ValueNode",
]

#: One node is named: the first whose value differs, every input it reads agreeing.
NAMED = "named"
#: Values differ, but no single node can be named (the message says why).
UNCLEAR = "unclear"
#: Every compared value and every output agree bit for bit.
SAME = "same"
#: The two graphs were not run (the message says why).
NOT_RUN = "not-run"


def _num(x: float | None) -> float | str | None:
    if x is None:
        return None
    return x if math.isfinite(x) else str(x)


def _short_source(source: str) -> str:
    return source.rsplit("/", 1)[-1]


@dataclass(frozen=True, slots=True)
class ValueDiff:
    """How one value of a step's graph differs from the matched value before it.

    Attributes:
        equal: bit for bit the same (same dtype and shape too; NaN where NaN was).
        max_abs: largest absolute element difference (None: not a tensor, or shapes
            differ; ``inf`` where one side has NaN or inf the other has not).
        max_rel: ``max_abs`` over the largest finite magnitude before (norm-wise, as the
            numerics column).
        dtype_before, dtype_after: the tensors' dtypes (``float16``), None otherwise.
        shape_before, shape_after: the tensors' shapes, None otherwise.
        before, after: a short text of each value when it is not a tensor (``3``).
    """

    equal: bool
    max_abs: float | None = None
    max_rel: float | None = None
    dtype_before: str | None = None
    dtype_after: str | None = None
    shape_before: tuple[int, ...] | None = None
    shape_after: tuple[int, ...] | None = None
    before: str | None = None
    after: str | None = None

    @property
    def dtype_changed(self) -> bool:
        """True when both are tensors of different dtypes."""
        return self.dtype_before is not None and self.dtype_before != self.dtype_after

    def text(self) -> str:
        """``max abs 0.25, rel 0.0004, float16 -> float32``, or ``3 -> 4``, or ``same``."""
        if self.equal:
            return "same"
        parts: list[str] = []
        if self.shape_before != self.shape_after and self.shape_before is not None:
            parts.append(f"shape {list(self.shape_before)} -> {list(self.shape_after or ())}")
        if self.max_abs is not None:
            rel = f", rel {self.max_rel:.2g}" if self.max_rel is not None else ""
            parts.append(f"max abs {self.max_abs:.3g}{rel}")
        if self.dtype_changed:
            parts.append(f"{self.dtype_before} -> {self.dtype_after}")
        if self.before is not None or self.after is not None:
            parts.append(f"{self.before} -> {self.after}")
        return ", ".join(parts) or "differs"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (``inf``/``nan`` become strings)."""
        return {
            "equal": self.equal,
            "max_abs": _num(self.max_abs),
            "max_rel": _num(self.max_rel),
            "dtype_before": self.dtype_before,
            "dtype_after": self.dtype_after,
            "shape_before": list(self.shape_before) if self.shape_before is not None else None,
            "shape_after": list(self.shape_after) if self.shape_after is not None else None,
            "before": self.before,
            "after": self.after,
        }


@dataclass(frozen=True, slots=True)
class ValueNode:
    """A node of the step's graph, with its value compared where it was.

    Attributes:
        id: the node's id in the step's graph snapshot (pre-order position).
        before: the matched node's id in the graph before (None: no match).
        kind: ``aten::conv2d``, ...
        scope: the module path the node was inlined from (``layer1.0.conv1``).
        source: ``file:line`` the node came from, or ``""``.
        diff: its (first) output against the matched node's (None: not compared).
    """

    id: int
    before: int | None
    kind: str
    scope: str
    source: str
    diff: ValueDiff | None = None

    def where(self) -> str:
        """``layer1.0.conv1 (model.py:12)``: the module path and source line, as known."""
        scope = self.scope or "<root>"
        return f"{scope} ({_short_source(self.source)})" if self.source else scope

    def text(self) -> str:
        """``aten::conv2d conv (m.py:7)``."""
        return f"{self.kind} {self.where()}"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "id": self.id,
            "before": self.before,
            "kind": self.kind,
            "scope": self.scope,
            "source": self.source or None,
            "diff": self.diff.to_json() if self.diff is not None else None,
        }


@dataclass(frozen=True, slots=True)
class InputChange:
    """One input of the named node that is not what it was (a folded weight, a new list).

    Attributes:
        position: the input's position in the node's inputs.
        kind: the producing node's kind (``prim::Constant``).
        name: the attribute it stands for (``conv.weight_fused_bn``) or the value's name.
        diff: against the matched value before (None: it has no match, it is new).
    """

    position: int
    kind: str
    name: str
    diff: ValueDiff | None

    def text(self) -> str:
        """``input 1 conv.weight_fused_bn (new)``."""
        what = "new" if self.diff is None else self.diff.text()
        return f"input {self.position} {self.name} ({what})"

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form."""
        return {
            "position": self.position,
            "kind": self.kind,
            "name": self.name,
            "diff": self.diff.to_json() if self.diff is not None else None,
        }


@dataclass(frozen=True)
class Bisection:
    """Where one step moved the numbers: the first node whose value differs.

    Attributes:
        step, name, title: the step bisected.
        against: the step compared with (None: the unfrozen module).
        against_title: its title (``unfrozen module``).
        asked: True when ``--bisect`` asked; False when the step took the outputs past
            tolerance and the bisection ran by itself.
        status: :data:`NAMED`, :data:`UNCLEAR`, :data:`SAME` or :data:`NOT_RUN`.
        message: one sentence saying what was found, or why nothing can be named.
        outputs: the step's outputs against the graph before's (None: not run).
        node: the named node (:data:`NAMED`), or the first matched value that differs
            when no single node can be named (None: none differs).
        inputs: the named node's inputs that are not what they were.
        chain: the data-flow path from ``node`` to the graph's output, ``node`` first.
        compared: matched values compared; ``differ`` of them differ.
        not_exposed: matched nodes whose value could not be compared (inside a nested
            block, or of a type freezeview does not expose).
        unmatched: nodes of the step's graph with no match before that compute values
            (new ops; constants and attribute reads not counted), in graph order.
        seconds: the wall time of the bisection.
    """

    step: int
    name: str
    title: str
    against: int | None
    against_title: str
    asked: bool
    status: str
    message: str
    outputs: ValueDiff | None = None
    node: ValueNode | None = None
    inputs: tuple[InputChange, ...] = ()
    chain: tuple[ValueNode, ...] = ()
    compared: int = 0
    differ: int = 0
    not_exposed: int = 0
    unmatched: tuple[ValueNode, ...] = ()
    seconds: float = 0.0

    def lines(self, most: int = 6) -> list[str]:
        """The text block: what the step did to the outputs, then the node named (or why
        none can be), its changed inputs and its path to the output."""
        against = "the unfrozen module" if self.against is None else f"step {self.against}"
        head = f"step {self.step} ({self.title}) against {against}: "
        if self.status in (NOT_RUN, SAME) or self.outputs is None:
            return [head + self.message]
        moved = "outputs agree" if self.outputs.equal else f"outputs {self.outputs.text()}"
        out = [head + moved]
        if self.status == UNCLEAR:
            out.append(f"  {self.message.split('; outputs ')[0]}")
        if self.node is not None:
            label = "first node to differ" if self.status == NAMED else "first matched value"
            diff = f": {self.node.diff.text()}" if self.node.diff is not None else ""
            out.append(f"  {label}: {self.node.text()}{diff}")
        if self.inputs:
            out.append("  changed inputs: " + "; ".join(i.text() for i in self.inputs[:most]))
        if len(self.chain) > 1:
            kinds = [n.kind for n in self.chain]
            if len(kinds) > most:
                kinds = [*kinds[: most - 2], "...", *kinds[-2:]]
            out.append(f"  path to the output: {' -> '.join(kinds)} -> output")
        counts = f"  {plural(self.compared, 'value')} compared, {self.differ} differ"
        if self.not_exposed:
            counts += f", {self.not_exposed} not exposed"
        if self.unmatched:
            counts += f", {plural(len(self.unmatched), 'new node')} without a match"
        out.append(counts)
        return out

    def to_json(self) -> dict[str, Any]:
        """The JSON line (``"type": "numerics_bisect"``; numerics-bisect.schema.json)."""
        return {
            "type": "numerics_bisect",
            "step": self.step,
            "name": self.name,
            "title": self.title,
            "against": self.against,
            "against_title": self.against_title,
            "asked": self.asked,
            "status": self.status,
            "message": self.message,
            "outputs": self.outputs.to_json() if self.outputs is not None else None,
            "node": self.node.to_json() if self.node is not None else None,
            "inputs": [i.to_json() for i in self.inputs],
            "chain": [n.to_json() for n in self.chain],
            "compared": self.compared,
            "differ": self.differ,
            "not_exposed": self.not_exposed,
            "unmatched": [n.to_json() for n in self.unmatched],
            "seconds": self.seconds,
        }
