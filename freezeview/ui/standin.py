"""Minimal stand-ins for engine pieces the app needs but the engine may not provide yet.

The app talks to the engine only through :mod:`freezeview.ui.session`, which uses the
real ``freezeview.engine.verdicts`` / ``pipeline`` / ``diff`` / ``render`` / ``export``
modules whenever they import. When one is missing (the engine is growing in
parallel with the app), the session falls back to the small, deliberately simple
versions here so the app stays usable: explain by comparing the frozen module with the
inlined graphs, a pipeline that freezes with ``torch._C._freeze_module`` and then runs
torch's frozen-graph passes one by one, a difflib text diff and a plain Graphviz picture.
These are stand-ins, not the engine's truth: the real modules win as soon as they exist.
"""

from __future__ import annotations

import contextlib
import difflib
import threading
import time
import warnings
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..engine.errors import PlanError
from ..engine.snapshot import GraphSnapshot, SourceLocation, snapshot_graph

__all__ = [
    "STANDIN_PASSES",
    "StandinExplanation",
    "StandinPlan",
    "StandinReason",
    "StandinStep",
    "StandinVerdict",
    "attribute_reads",
    "inlined_graph",
    "standin_explain",
    "standin_render",
    "standin_steps",
    "text_diff",
]


@dataclass(frozen=True)
class StandinReason:
    """Why an attribute got its status (same fields as the engine's ``Reason``)."""

    code: str
    message: str
    node: str | None = None
    source: str | None = None
    method: str | None = None


@dataclass(frozen=True)
class StandinVerdict:
    """One attribute's verdict (same fields as the engine's ``AttributeVerdict``)."""

    path: str
    kind: str
    type: str
    status: str
    reasons: list[StandinReason] = field(default_factory=list)


@dataclass
class StandinExplanation:
    """Verdicts for every attribute (same shape as the engine's ``Explanation``)."""

    attributes: list[StandinVerdict]

    def counts(self) -> Counter[str]:
        """How many attributes have each status."""
        return Counter(a.status for a in self.attributes)

    def by_path(self, path: str) -> StandinVerdict | None:
        """The verdict for ``path``, or None."""
        return next((a for a in self.attributes if a.path == path), None)


@dataclass(frozen=True)
class StandinPlan:
    """What to preserve and which passes to run."""

    preserved_attrs: tuple[str, ...] = ()
    passes: tuple[str, ...] = ()


@dataclass(frozen=True)
class StandinStep:
    """One step of freezing (same fields as the engine's ``Step``)."""

    index: int
    name: str
    title: str
    snapshot: GraphSnapshot
    changed: bool
    added: int = 0
    removed: int = 0
    changed_nodes: int = 0
    seconds: float = 0.0
    notes: tuple[str, ...] = ()
    numerics: float | None = None
    error: str | None = None
    code: str | None = None


# (id, description, on by default, torch binding). The order is the one
# torch 2.x's _jit_pass_optimize_frozen_graph uses; the folds loop to a fixed point.
STANDIN_PASSES: list[tuple[str, str, bool, str]] = [
    ("remove_dropout", "remove dropout ops (eval mode)", True, "_jit_pass_remove_dropout"),
    (
        "concat_frozen_linear",
        "concatenate linears that share an input",
        True,
        "_jit_pass_concat_frozen_linear",
    ),
    (
        "fold_conv_bn",
        "fold batch_norm into the conv before it",
        True,
        "_jit_pass_fold_frozen_conv_bn",
    ),
    (
        "fold_conv_add_or_sub",
        "fold a constant add/sub into the conv bias",
        True,
        "_jit_pass_fold_frozen_conv_add_or_sub",
    ),
    (
        "fold_conv_mul_or_div",
        "fold a constant mul/div into the conv weight",
        True,
        "_jit_pass_fold_frozen_conv_mul_or_div",
    ),
    (
        "fold_linear_bn",
        "fold batch_norm into the linear before it",
        True,
        "_jit_pass_fold_frozen_linear_bn",
    ),
]
_MAX_ROUNDS = 8
_LOOPING = {"fold_conv_bn", "fold_conv_add_or_sub", "fold_conv_mul_or_div", "fold_linear_bn"}


def inlined_graph(module: Any, method: str = "forward") -> torch._C.Graph:
    """A copy of ``module.<method>``'s graph with every call inlined (the module is untouched)."""
    graph = getattr(module, method).graph.copy()
    torch._C._jit_pass_inline(graph)
    return graph


def _method_names(module: Any) -> list[str]:
    names = [m.name for m in module._c._get_methods()]
    return names or ["forward"]


def attribute_reads(graph: torch._C.Graph) -> tuple[dict[str, list[str]], dict[str, list[str]]]:
    """Attribute paths read (``prim::GetAttr`` chains from ``self``) and written
    (``prim::SetAttr``) in an inlined graph, each with the node lines that do it."""
    self_value = next(iter(graph.inputs()))
    paths: dict[Any, str] = {self_value: ""}
    reads: dict[str, list[str]] = {}
    writes: dict[str, list[str]] = {}

    def visit(block: Any) -> None:
        for node in block.nodes():
            kind = node.kind()
            if kind in ("prim::GetAttr", "prim::SetAttr"):
                base = paths.get(node.inputsAt(0))
                if base is not None:
                    path = f"{base}.{node.s('name')}" if base else node.s("name")
                    line = str(node).split("\n", 1)[0].strip()
                    if kind == "prim::GetAttr":
                        paths[node.output()] = path
                        reads.setdefault(path, []).append(line)
                    else:
                        writes.setdefault(path, []).append(line)
            for sub in node.blocks():
                visit(sub)

    visit(graph.block())
    return reads, writes


def _has_path(cmod: Any, path: str) -> bool:
    obj = cmod
    for part in path.split("."):
        if not obj.hasattr(part):
            return False
        obj = obj.getattr(part)
    return True


def _freeze(module: Any, preserved: Sequence[str]) -> Any:
    if module.training:
        raise PlanError(
            "the module is in training mode; freezing needs eval mode: pass --eval "
            "(or call .eval() before saving it)."
        )
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            return torch._C._freeze_module(module._c, list(preserved))
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or ["freezing failed"])[0]
        raise PlanError(f"torch could not freeze the module: {first[:200]}") from exc


def standin_explain(module: Any, preserved: Sequence[str], inventory: Any) -> StandinExplanation:
    """A simple verdict per attribute: kept if it survives freezing, inlined if read,
    dropped otherwise."""
    frozen = _freeze(module, preserved)
    reads: dict[str, list[str]] = {}
    writes: dict[str, list[str]] = {}
    methods = ["forward"] + [p for p in preserved if p in _method_names(module)]
    for method in dict.fromkeys(methods):
        if not hasattr(module, method):
            continue
        r, w = attribute_reads(inlined_graph(module, method))
        for k, v in r.items():
            reads.setdefault(k, []).extend(v)
        for k, v in w.items():
            writes.setdefault(k, []).extend(v)
    verdicts: list[StandinVerdict] = []
    for attr in inventory.attributes:
        path = attr.path
        preserved_hit = next((p for p in preserved if path == p or path.startswith(p + ".")), None)
        if _has_path(frozen, path):
            if preserved_hit:
                reason = StandinReason("preserved", f"{preserved_hit} is in preserved_attrs")
            elif path in writes:
                reason = StandinReason(
                    "set-attr", "prim::SetAttr writes it", node=writes[path][0], method="forward"
                )
            elif attr.kind == "submodule":
                reason = StandinReason("module-kept", "an attribute below it is kept")
            else:
                reason = StandinReason("in-place-write", "kept by torch.jit.freeze (mutated)")
            verdicts.append(StandinVerdict(path, attr.kind, attr.type, "kept", [reason]))
        elif path in reads or any(r.startswith(path + ".") for r in reads):
            node = reads[path][0] if path in reads else None
            verdicts.append(
                StandinVerdict(
                    path,
                    attr.kind,
                    attr.type,
                    "inlined",
                    [StandinReason("folded", "folded into the graph as a constant", node=node)],
                )
            )
        else:
            verdicts.append(
                StandinVerdict(
                    path,
                    attr.kind,
                    attr.type,
                    "dropped",
                    [StandinReason("unused", "no preserved method reads it")],
                )
            )
    return StandinExplanation(verdicts)


def _counts(before: GraphSnapshot | None, after: GraphSnapshot) -> tuple[int, int]:
    if before is None:
        return after.node_count, 0
    a, b = before.kinds(), after.kinds()
    return sum((b - a).values()), sum((a - b).values())


def _wrap(cmod: Any) -> Any:
    return torch.jit._recursive.wrap_cpp_module(cmod)


def _max_diff(reference: Any, got: Any) -> float:
    if isinstance(reference, torch.Tensor) and isinstance(got, torch.Tensor):
        if reference.numel() == 0:
            return 0.0
        return float((reference.double() - got.double()).abs().max())
    if isinstance(reference, (list, tuple)):
        return max((_max_diff(r, g) for r, g in zip(reference, got, strict=False)), default=0.0)
    return 0.0


def standin_steps(
    module: Any,
    plan: StandinPlan,
    inputs: tuple[Any, ...] | None = None,
    cancel: threading.Event | None = None,
    progress: Callable[[str], None] | None = None,
) -> Iterator[StandinStep]:
    """Freeze ``module`` (never modified) one pass at a time, yielding a step after each."""
    start = time.perf_counter()
    snap = snapshot_graph(inlined_graph(module), "forward")
    reference = None
    if inputs is not None:
        with torch.no_grad():
            reference = module(*inputs)
    yield StandinStep(
        0,
        "inline",
        "inlined forward (as loaded)",
        snap,
        True,
        added=snap.node_count,
        seconds=time.perf_counter() - start,
        code=module.code,
    )
    index = 1
    start = time.perf_counter()
    frozen = _wrap(_freeze(module, plan.preserved_attrs))
    after = snapshot_graph(frozen.graph, "forward")
    added, removed = _counts(snap, after)

    def numerics() -> float | None:
        if inputs is None:
            return None
        with torch.no_grad():
            return _max_diff(reference, frozen(*inputs))

    yield StandinStep(
        index,
        "freeze",
        "torch._C._freeze_module: fold attributes, clean up",
        after,
        True,
        added=added,
        removed=removed,
        seconds=time.perf_counter() - start,
        numerics=numerics(),
        code=frozen.code,
    )
    snap = after
    bindings = {pid: binding for pid, _d, _on, binding in STANDIN_PASSES}
    titles = {pid: desc for pid, desc, _on, _b in STANDIN_PASSES}
    order = [pid for pid, *_ in STANDIN_PASSES if pid in plan.passes]
    once = [p for p in order if p not in _LOOPING]
    loop = [p for p in order if p in _LOOPING]
    # Like torch: dropout removal and linear concatenation run once, then the
    # numerics-changing folds repeat until a round changes nothing.
    rounds: list[list[str]] = [once] + [loop] * (_MAX_ROUNDS if loop else 0)
    for round_no, schedule in enumerate(rounds):
        round_changed = False
        for pid in schedule:
            if cancel is not None and cancel.is_set():
                return
            if progress is not None:
                progress(pid)
            index += 1
            start = time.perf_counter()
            before_text = str(frozen.graph)
            error = None
            try:
                getattr(torch._C, bindings[pid])(frozen.graph)
            except RuntimeError as exc:
                error = (str(exc).strip().splitlines() or ["failed"])[0][:200]
            changed = str(frozen.graph) != before_text
            round_changed = round_changed or changed
            after = snapshot_graph(frozen.graph, "forward") if changed else snap
            added, removed = _counts(snap, after)
            yield StandinStep(
                index,
                pid,
                titles[pid],
                after,
                changed,
                added=added,
                removed=removed,
                seconds=time.perf_counter() - start,
                notes=() if changed else ("did not fire: nothing matched",),
                numerics=numerics() if changed else None,
                error=error,
                code=frozen.code if changed else None,
            )
            if error:
                return
            snap = after
        if round_no > 0 and not round_changed:
            return


def text_diff(before: str, after: str, label_a: str = "before", label_b: str = "after") -> str:
    """Unified diff of two IR printouts (difflib)."""
    return "".join(
        difflib.unified_diff(
            before.splitlines(keepends=True),
            after.splitlines(keepends=True),
            fromfile=label_a,
            tofile=label_b,
        )
    )


def standin_render(snapshot: GraphSnapshot, path: Path, timeout: float = 30.0) -> Path:
    """A plain Graphviz picture of ``snapshot``: one box per op, constants left out."""
    import graphviz

    dot = graphviz.Digraph(snapshot.method, graph_attr={"rankdir": "TB"})
    dot.attr("node", shape="box", fontname="monospace", fontsize="10")
    producers = snapshot.producers()
    for inp in snapshot.inputs:
        dot.node(f"v_{inp.name}", f"%{inp.name}\n{inp.type}", shape="ellipse")
    for node in snapshot.walk():
        if node.kind in ("prim::Constant", "prim::ListConstruct") and node.outputs:
            continue
        scope = f"\n{node.scope}" if node.scope else ""
        dot.node(f"n{node.id}", f"{node.kind}{scope}")
        for name in node.inputs:
            src = producers.get(name)
            if src is None:
                dot.edge(f"v_{name}", f"n{node.id}")
            elif src.kind not in ("prim::Constant", "prim::ListConstruct"):
                dot.edge(f"n{src.id}", f"n{node.id}")
    svg = dot.pipe(format="svg", timeout=timeout) if _pipe_has_timeout() else dot.pipe("svg")
    from ..engine.atomic import write_bytes

    return write_bytes(path, svg)


def _pipe_has_timeout() -> bool:
    import inspect

    import graphviz

    with contextlib.suppress(TypeError, ValueError):
        return "timeout" in inspect.signature(graphviz.Digraph.pipe).parameters
    return False


def source_text(source: Any) -> str:
    """``file:line`` text of a source location (engine object or string)."""
    if source is None:
        return ""
    if isinstance(source, SourceLocation):
        return f"{source.short()}  {source.text}".strip()
    return str(source)
