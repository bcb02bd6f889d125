"""Where the numbers move: the first node whose value differs after a step.

When a step moves the outputs (the numerics column), :class:`ValueBisector` runs the
step's forward graph and the graph before it (the step that last changed the graph, or
the unfrozen module) on the same sample inputs, with every value the diff matches
between the two exposed as extra graph outputs, and compares them in the step's graph
order. It names the first node whose value differs from its match, the size of the
difference (max absolute and relative, dtype changes), the inputs of that node that are
not what they were (a folded weight) and the data-flow path from it to the output.

What is exposed, and how:

* a **copy** of each graph (never the step's own graph, never the user's module) gets
  one ``aten::clone`` after each exposed tensor (so an in-place op further on cannot
  change what is read) and returns a tuple: the graph's own output, then the exposed
  values (:func:`~.value_exposure.expose_values`; :func:`~.value_exposure.compare_value`
  compares them). It runs on the pipeline's sandbox, a private copy of
  the module (:meth:`~freezeview.engine.freeze.Pipeline.sandboxed_call`), under
  ``torch.no_grad()`` as the numerics column does;
* only values of the graph's top-level block, of a type compared by value: tensors
  (elementwise), numbers, booleans, strings and lists of them (by equality). A value
  inside a ``prim::If`` / ``prim::Loop`` block is seen through the node's outputs;
* a node with no match before (a new op), or whose value is not exposed, cannot be
  compared: when the first differing value reads one, or when every matched value agrees
  yet the outputs differ, the bisection says that no single node can be named, and why.

Nothing runs without sample inputs. The written model is never run, and nothing the
pipeline holds changes: the graphs are copies, the forwards run on sandboxes put back
after each run.
"""

from __future__ import annotations

import re
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import torch

from ..diff import diff_snapshots, index_nodes
from ..freeze import Numerics, Pipeline, SandboxError, Step
from ..graph import GraphSnapshot, NodeSnapshot, snapshot_graph
from ..plumbing import plural, torch_cause
from .node_clocks import walk_nodes
from .value_bisect_values import (
    NAMED,
    NOT_RUN,
    SAME,
    UNCLEAR,
    Bisection,
    InputChange,
    ValueDiff,
    ValueNode,
)
from .value_exposure import (
    compare_outputs_values,
    compare_value,
    exposable,
    expose_values,
    value_makers,
)

__all__ = ["ValueBisector", "bisect_graphs", "crosses_tolerance"]

# Nodes that read a value rather than compute one: a difference there is a changed input
# of the node that uses it (a folded weight), not a node to name.
_READS = frozenset({"prim::Constant", "prim::GetAttr"})

# --- one step against the graph before -------------------------------------------------


def _node(
    snapshot: GraphSnapshot, node_id: int, before: int | None, diff: ValueDiff | None
) -> ValueNode:
    node = snapshot.node(node_id)
    source = str(node.source) if node.source else ""
    return ValueNode(node_id, before, node.kind, node.scope, source, diff)


def _path_to_output(snapshot: GraphSnapshot, start: int) -> list[int]:
    """The shortest data-flow path of top-level nodes from ``start`` to a graph output."""
    info = index_nodes(snapshot)
    consumers = snapshot.consumers()
    returned = set(snapshot.outputs)

    def top(node_id: int) -> int:
        while info[node_id].parent is not None:
            node_id = info[node_id].parent  # type: ignore[assignment]
        return node_id

    came: dict[int, int | None] = {start: None}
    queue = deque([start])
    while queue:
        current = queue.popleft()
        node = snapshot.node(current)
        if any(out.name in returned for out in node.outputs):
            path = []
            at: int | None = current
            while at is not None:
                path.append(at)
                at = came[at]
            return path[::-1]
        for out in node.outputs:
            for user in consumers.get(out.name, []):
                nxt = top(user.id)
                if nxt not in came:
                    came[nxt] = current
                    queue.append(nxt)
    return [start]


@dataclass
class _Sides:
    """What the two runs give: per exposed after-node, its diffs, by output index."""

    before: GraphSnapshot
    after: GraphSnapshot
    back: dict[int, int]  # after id -> before id
    diffs: dict[int, dict[int, ValueDiff]]
    not_exposed: set[int]

    def first_diff(self, after_id: int) -> ValueDiff | None:
        """The node's first differing output's diff, its first output's if none differs."""
        outputs = self.diffs.get(after_id)
        if not outputs:
            return None
        for index in sorted(outputs):
            if not outputs[index].equal:
                return outputs[index]
        return outputs[min(outputs)]

    def differs(self, after_id: int) -> bool:
        return any(not d.equal for d in self.diffs.get(after_id, {}).values())


def _label(name: str, producer: NodeSnapshot | None) -> str:
    """``conv.weight_fused_bn`` for an attribute's value, ``%6`` for an unnamed one."""
    if name.startswith("self."):
        return re.sub(r"\.\d+$", "", name[len("self.") :])
    if producer is not None and producer.constant is not None and producer.constant.attribute:
        return producer.constant.attribute
    return f"%{name}"


def _by_matching(
    sides: _Sides, inputs: Sequence[tuple[int, str]], producers: dict[str, NodeSnapshot]
) -> tuple[list[InputChange], list[str]]:
    """The node's inputs judged through the matching (when its inputs cannot be compared
    position by position): changed reads, and what blocks naming it (an input made by a
    node with no match, or one whose value is not exposed)."""
    changes: list[InputChange] = []
    blockers: list[str] = []

    def check(name: str, position: int, depth: int) -> None:
        producer = producers.get(name)
        if producer is None:
            return  # a graph input: the same inputs ran both graphs
        before = sides.back.get(producer.id)
        if producer.kind in _READS:
            diff = sides.first_diff(producer.id) if before is not None else None
            if before is None or (diff is not None and not diff.equal):
                changes.append(InputChange(position, producer.kind, _label(name, producer), diff))
            return
        if before is None:
            blockers.append(
                f"{producer.kind} {_where(producer)} (new in this step, no match before)"
            )
            return
        if producer.id in sides.diffs:
            return  # compared, and it agrees (it comes before the first to differ)
        if depth >= 3 or producer.blocks:
            blockers.append(f"{producer.kind} {_where(producer)} (its value is not exposed)")
            return
        for inner in producer.inputs:
            check(inner, position, depth + 1)

    for position, name in inputs:
        check(name, position, 0)
    return changes, blockers


def _inputs_of(
    sides: _Sides,
    first: int,
    graphs: tuple[torch._C.Graph, torch._C.Graph],
    walks: tuple[list[tuple[torch._C.Node, int]], list[tuple[torch._C.Node, int]]],
    runs: tuple[Callable[[torch._C.Graph], Any], Callable[[torch._C.Graph], Any]],
) -> tuple[list[InputChange], list[str]]:
    """What the first node to differ reads, against what its match read: the inputs that
    changed (a folded weight), and what keeps it from being named (an input made by a
    node with no match, or one that cannot be compared).

    The two nodes' inputs are compared position by position in one more run of each
    graph; an input that cannot be exposed is judged through the matching instead.
    """
    after_snap = sides.after
    node = after_snap.node(first)
    producers = after_snap.producers()
    node_b = walks[0][sides.back[first]][0]
    node_a = walks[1][first][0]
    ins_b, ins_a = list(node_b.inputs()), list(node_a.inputs())
    if len(ins_b) != len(ins_a):
        return _by_matching(sides, list(enumerate(node.inputs)), producers)
    makers_b, makers_a = value_makers(graphs[0]), value_makers(graphs[1])
    positions: list[int] = []
    wanted_b: list[tuple[int, int]] = []
    wanted_a: list[tuple[int, int]] = []
    unexposed: list[tuple[int, str]] = []
    for position, (vb, va) in enumerate(zip(ins_b, ins_a, strict=True)):
        kb, ka = makers_b.get(vb.unique()), makers_a.get(va.unique())
        if kb is None or ka is None or not (exposable(vb) and exposable(va)):
            unexposed.append((position, node.inputs[position]))
            continue
        positions.append(position)
        wanted_b.append(kb)
        wanted_a.append(ka)
    changes: list[InputChange] = []
    blockers: list[str] = []
    if positions:
        got_b = runs[0](expose_values(graphs[0], wanted_b))
        got_a = runs[1](expose_values(graphs[1], wanted_a))
        for i, position in enumerate(positions):
            diff = compare_value(got_b[i + 1], got_a[i + 1])
            if diff.equal:
                continue
            name = node.inputs[position]
            producer = producers.get(name)
            if producer is None or producer.kind in _READS:
                kind = producer.kind if producer is not None else "graph input"
                changes.append(InputChange(position, kind, _label(name, producer), diff))
            elif producer.id not in sides.back:
                blockers.append(
                    f"input {position} from {producer.kind} {_where(producer)}, "
                    "new in this step with no match before"
                )
            else:
                blockers.append(
                    f"input {position} from {producer.kind} {_where(producer)}, which differs "
                    "from what its match read"
                )
    if unexposed:
        more_changes, more_blockers = _by_matching(sides, unexposed, producers)
        changes += more_changes
        blockers += more_blockers
    changes.sort(key=lambda c: c.position)
    return changes, blockers


def _where(node: NodeSnapshot) -> str:
    scope = node.scope or "<root>"
    return f"{scope} ({str(node.source).rsplit('/', 1)[-1]})" if node.source else scope


def bisect_graphs(
    before: torch._C.Graph,
    after: torch._C.Graph,
    run_before: Callable[[torch._C.Graph], Any],
    run_after: Callable[[torch._C.Graph], Any],
    *,
    step: int,
    name: str,
    title: str,
    against: int | None = None,
    against_title: str = "unfrozen module",
    asked: bool = True,
) -> Bisection:
    """Find the first node of ``after`` whose value differs from its match in ``before``.

    Args:
        before: the graph before the step (not changed; a copy is run).
        after: the step's graph (not changed; a copy is run).
        run_before, run_after: run a graph (a copy with values exposed) on the sample
            inputs and return what it returns (the pipeline's sandboxed forwards).
        step, name, title: the step, for the report.
        against, against_title: the step ``before`` is the graph of (None: the unfrozen
            module).
        asked: ``--bisect`` asked (False: the step took the outputs past tolerance).

    Returns:
        The :class:`Bisection`.

    Raises:
        Exception: a graph failed to run (torch's error), or the sandbox refused it.
    """
    started = time.perf_counter()
    sb, sa = snapshot_graph(before), snapshot_graph(after)
    diff = diff_snapshots(sb, sa)
    pairs = dict(diff.matched)
    pairs.update(diff.replaced)  # an attribute read that became a constant: same value
    back = {a: b for b, a in pairs.items()}
    nodes_b = walk_nodes(before)
    nodes_a = walk_nodes(after)
    wanted_b: list[tuple[int, int]] = []
    wanted_a: list[tuple[int, int]] = []
    keys: list[tuple[int, int]] = []
    not_exposed: set[int] = set()
    for a_id, (node_a, depth_a) in enumerate(nodes_a):
        b_id = back.get(a_id)
        if b_id is None or depth_a:
            continue
        node_b, depth_b = nodes_b[b_id]
        outs_a, outs_b = list(node_a.outputs()), list(node_b.outputs())
        if depth_b or len(outs_a) != len(outs_b):
            not_exposed.add(a_id)
            continue
        exposed = False
        for index, (va, vb) in enumerate(zip(outs_a, outs_b, strict=True)):
            if exposable(va) and exposable(vb):
                wanted_a.append((a_id, index))
                wanted_b.append((b_id, index))
                keys.append((a_id, index))
                exposed = True
        if not exposed and outs_a:
            not_exposed.add(a_id)
    got_b = run_before(expose_values(before, wanted_b))
    got_a = run_after(expose_values(after, wanted_a))
    diffs: dict[int, dict[int, ValueDiff]] = {}
    for i, (a_id, index) in enumerate(keys):
        diffs.setdefault(a_id, {})[index] = compare_value(got_b[i + 1], got_a[i + 1])
    outputs = compare_outputs_values(got_b[0], got_a[0])
    sides = _Sides(sb, sa, back, diffs, not_exposed)
    info = index_nodes(sa)
    computes = [
        i for i, n in info.items() if n.depth == 0 and n.node.kind not in _READS and n.node.outputs
    ]
    unmatched = tuple(_node(sa, i, None, None) for i in computes if i not in back)
    not_exposed_count = sum(1 for i in computes if i in not_exposed)
    compared = sum(1 for i in computes if i in diffs)
    differing = [i for i in computes if sides.differs(i)]
    base = Bisection(
        step,
        name,
        title,
        against,
        against_title,
        asked,
        SAME,
        "every compared value and every output agree bit for bit",
        outputs=outputs,
        compared=compared,
        differ=len(differing),
        not_exposed=not_exposed_count,
        unmatched=unmatched,
    )
    if not differing:
        if outputs.equal:
            return replace(base, seconds=_since(started))
        where = (
            f"a node without a match before ({_kinds(unmatched)})"
            if unmatched
            else "a value freezeview does not expose"
        )
        message = (
            f"no single node can be named: every matched value agrees, yet the outputs "
            f"differ ({outputs.text()}); the difference starts in {where}"
        )
        return replace(base, status=UNCLEAR, message=message, seconds=_since(started))
    first = differing[0]
    node = _node(sa, first, back.get(first), sides.first_diff(first))
    changes, blockers = _inputs_of(
        sides, first, (before, after), (nodes_b, nodes_a), (run_before, run_after)
    )
    if sa.node(first).blocks:
        blockers.append("its own blocks, whose values are not exposed")
    chain = tuple(
        _node(sa, i, back.get(i), sides.first_diff(i)) for i in _path_to_output(sa, first)
    )
    moved = "" if outputs.equal else f"; outputs {outputs.text()}"
    if blockers:
        message = (
            f"no single node can be named: the first matched value to differ, {node.text()}, "
            f"reads {blockers[0]}{moved}"
        )
        status = UNCLEAR
    else:
        reads = (
            f", reading {plural(len(changes), 'changed input')}"
            if changes
            else ", reading the same values as before"
        )
        agree = " (the outputs agree)" if outputs.equal else moved
        message = f"{node.text()} is the first node whose value differs{reads}{agree}"
        status = NAMED
    return replace(
        base,
        status=status,
        message=message,
        node=node,
        inputs=tuple(changes),
        chain=chain,
        seconds=_since(started),
    )


def _kinds(nodes: Sequence[ValueNode], most: int = 3) -> str:
    kinds = list(dict.fromkeys(n.kind for n in nodes))
    more = f", +{len(kinds) - most} more" if len(kinds) > most else ""
    return ", ".join(kinds[:most]) + more


def _since(started: float) -> float:
    return time.perf_counter() - started


def crosses_tolerance(numerics: Numerics | None, previous: Numerics | None) -> bool:
    """True when a step's outputs are past tolerance and the graph's before were not
    (``previous`` None: the unfrozen module, the reference itself)."""
    if numerics is None or numerics.allclose:
        return False
    return previous is None or previous.allclose


# --- a pipeline's run ------------------------------------------------------------------


@dataclass
class _Held:
    """A private copy of the last graph that changed, to compare the next step with."""

    graph: torch._C.Graph
    module: Any
    step: int | None
    title: str
    numerics: Numerics | None


class ValueBisector:
    """Bisect the steps that move the outputs (or, asked, every step), as they are yielded.

    Args:
        pipe: the pipeline (its ``inputs``; None: nothing runs).
        every: bisect every step that changed the graph (``--bisect``); else only the
            step that takes the outputs past tolerance (:func:`crosses_tolerance`).

    Call :meth:`observe` with each step as the pipeline yields it (its graphs are still
    held then): it keeps a copy of the last graph that changed, and compares the step
    with it. The inline step is the unfrozen module's graph, inlined: it is what later
    steps are compared with first, and is not bisected itself. Example::

        bisector = ValueBisector(pipe)
        for step in pipe.run():
            found = bisector.observe(step)
            if found is not None:
                print("\\n".join(found.lines()))
    """

    def __init__(self, pipe: Pipeline, *, every: bool = False) -> None:
        self.pipe = pipe
        self.every = every
        self.bisections: list[Bisection] = []
        self._last: _Held | None = None

    @property
    def active(self) -> bool:
        """True when graphs run (there are sample inputs)."""
        return self.pipe.inputs is not None

    def observe(self, step: Step) -> Bisection | None:
        """Bisect a just-yielded step when it is wanted. Call it before anything takes
        the step's snapshot (a :class:`~.node_time.NodeTimer` does): taking it lets
        torch's graph go, and this copies that graph.

        Returns:
            The :class:`Bisection` (also in :attr:`bisections`), or None when the step
            is not bisected.
        """
        if not self.active or step.error is not None or not step.changed:
            return None
        graph = self.pipe.step_graphs(step).get("forward")
        module = self.pipe.step_module(step)
        if graph is None or module is None:
            return None
        if step.name == "inline":
            self._last = _Held(graph.copy(), module, None, "unfrozen module", None)
            return None
        if self._last is None:
            self._last = self._unfrozen()
        last = self._last
        held = _Held(graph.copy(), module, step.index, step.title, step.numerics)
        found = None
        wanted = self.every or crosses_tolerance(step.numerics, last.numerics if last else None)
        if wanted:
            found = self._bisect(step, last, held)
            self.bisections.append(found)
        self._last = held
        return found

    def _unfrozen(self) -> _Held | None:
        module = self.pipe.module
        if not module._c._has_method("forward"):
            return None
        graph = module._c._get_method("forward").graph.copy()
        torch._C._jit_pass_inline(graph)
        return _Held(graph, module, None, "unfrozen module", None)

    def _run(self, module: Any) -> Callable[[torch._C.Graph], Any]:
        def run(graph: torch._C.Graph) -> Any:
            try:
                with torch.no_grad():
                    return self.pipe.sandboxed_call(graph, module)()
            finally:
                self.pipe.restore_state()

        return run

    def _bisect(self, step: Step, last: _Held | None, held: _Held) -> Bisection:
        asked = self.every
        against = last.step if last is not None else None
        against_title = last.title if last is not None else "unfrozen module"
        if last is None:
            return Bisection(
                step.index,
                step.name,
                step.title,
                against,
                against_title,
                asked,
                NOT_RUN,
                "not bisected: the model has no forward graph to compare with",
            )
        try:
            return bisect_graphs(
                last.graph,
                held.graph,
                self._run(last.module),
                self._run(held.module),
                step=step.index,
                name=step.name,
                title=step.title,
                against=against,
                against_title=against_title,
                asked=asked,
            )
        except Exception as exc:
            cause = str(exc) if isinstance(exc, SandboxError) else torch_cause(exc)
            return Bisection(
                step.index,
                step.name,
                step.title,
                against,
                against_title,
                asked,
                NOT_RUN,
                f"not bisected: {cause}",
            )
