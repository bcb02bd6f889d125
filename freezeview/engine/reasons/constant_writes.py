"""Folded constants the frozen graph still writes: the ``written-constant`` hazard.

torch folds an attribute when alias analysis (frozen semantics) finds no writer of the
value its ``prim::GetAttr`` produced. Two kinds of write escape that question: a write
to a tensor held *inside* a list, a dict or a tuple (``self.a[0][1] += 10``: the list
itself is not written), and any write inside a ``torch.jit.fork`` body (freeze_module.cpp
records a body's writes in a copy of its state, and loses them). torch then folds the
attribute, and the frozen graph writes into its own constant on every call: outputs can
change from call to call, and a saved file holds whatever the constant held then.

:func:`constant_writes` finds those writes on the replay's graphs once folding and
torch's clean-up ran (:class:`~.replay.FreezeReplay` keeps which constant holds which
attribute slot): from each folded constant it follows the values that may share its
memory (list, tuple and dict construction and indexing, unpacking, views, ``prim::If``
and ``prim::Loop`` results, a fork's body through its inputs) to a node whose schema
marks that argument as written (``Tensor(a!)``). Nothing here reads torch's log or its
wording: only the graph's nodes and their schemas.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import lru_cache

import torch

from .module_objects import module_at
from .mutation import Writer, iter_nodes, node_source, node_text
from .replay import FreezeReplay
from .verdict_values import AttributeVerdict, Reason

__all__ = [
    "WrittenConstant",
    "constant_writers",
    "constant_writes",
    "frozen_writes_a_constant",
    "mark_written_constants",
]


@dataclass(frozen=True, slots=True)
class WrittenConstant:
    """One node of the frozen graph that writes a folded constant.

    Attributes:
        writer: the writing node (kind, IR line, source line, the value written).
        in_fork: the node is inside a ``torch.jit.fork`` body (freezing does not record
            writes there); otherwise it writes a tensor held in a list, dict or tuple.
    """

    writer: Writer
    in_fork: bool


# Value types that can share memory with a folded tensor or container.
_MUTABLE_KINDS = frozenset(
    {
        "TensorType",
        "ListType",
        "DictType",
        "TupleType",
        "OptionalType",
        "FutureType",
        "ClassType",
        "UnionType",
        "AnyType",
        "AwaitType",
    }
)
_CONTAINER_KINDS = frozenset({"ListType", "DictType", "TupleType"})
# Calls whose bodies cannot be seen: a value handed to one is not followed further.
_OPAQUE = frozenset({"prim::CallMethod", "prim::CallFunction", "prim::Closure"})


def _kind(value: torch._C.Value) -> str:
    return str(value.type().kind())


def _mutable(value: torch._C.Value) -> bool:
    return _kind(value) in _MUTABLE_KINDS


@lru_cache(maxsize=4096)
def _aliasing(
    schema: str,
) -> tuple[tuple[tuple[bool, bool, bool], ...], tuple[tuple[bool, bool], ...]] | None:
    """Per argument (has an alias set, is written, is put into a container ``-> *``),
    and per return (has an alias set, is an element of a container ``t(*)``); None
    when torch cannot parse the schema."""
    try:
        parsed = torch._C.parse_schema(schema)
    except RuntimeError:
        return None
    arguments = tuple(
        (
            arg.alias_info is not None,
            bool(arg.alias_info is not None and arg.alias_info.is_write),
            bool(arg.alias_info is not None and "*" in arg.alias_info.after_set),
        )
        for arg in parsed.arguments
    )
    returns = tuple(
        (ret.alias_info is not None, bool(ret.alias_info and "*" in ret.alias_info.before_set))
        for ret in parsed.returns
    )
    return arguments, returns


# Nodes that take an element out of a list, tuple or dict, or put values into one.
_ELEMENT_OUT = frozenset(
    {"prim::ListUnpack", "prim::TupleUnpack", "prim::TupleIndex", "prim::DictIndex"}
)
_CONTAINER_IN = frozenset({"prim::ListConstruct", "prim::TupleConstruct", "prim::DictConstruct"})
# How deep a value may sit in containers built around it before the walk stops.
_MAX_DEPTH = 4


class _Walk:
    """The values that may share memory with one folded constant, and their writers.

    Each value met carries a depth: 0 for the constant's own memory (the constant, a
    view of it, an element taken out of it), 1 for a container built around it, and so
    on. A write at depth 0 writes the constant; ``append`` to a list holding it does not.
    """

    def __init__(self, method: str, modules: frozenset[str], in_fork: bool) -> None:
        self.method = method
        self.modules = modules
        self.in_fork = in_fork
        self.hits: list[WrittenConstant] = []

    def follow(self, value: torch._C.Value, depth: int = 0, forks: int = 0) -> None:
        seen = {(value.unique(), depth)}
        todo = [(value, depth)]
        while todo:
            current, level = todo.pop()
            for use in current.uses():
                for out, out_level in self._next(use.user, use.offset, current, level, forks):
                    key = (out.unique(), out_level)
                    if key not in seen and out_level <= _MAX_DEPTH and _mutable(out):
                        seen.add(key)
                        todo.append((out, out_level))

    def _hit(self, node: torch._C.Node, value: torch._C.Value, in_fork: bool) -> None:
        entry = WrittenConstant(_writer(node, value, self.method), in_fork)
        if entry not in self.hits:
            self.hits.append(entry)

    def _next(
        self,
        user: torch._C.Node,
        offset: int,
        current: torch._C.Value,
        level: int,
        forks: int,
    ) -> list[tuple[torch._C.Value, int]]:
        """The values ``user`` makes that may share memory with its input ``offset``,
        with their depths (recording ``user`` when it writes the constant)."""
        kind = user.kind()
        if kind == "prim::Return":
            owner = user.owningBlock().owningNode()
            if owner is None:
                return []  # the graph's own output (a fork body's: its future)
            if owner.kind() == "prim::If":
                return [(owner.outputsAt(offset), level)]
            if owner.kind() == "prim::Loop" and offset >= 1:
                # (condition, carried...): the loop's result, and the next iteration.
                body_input = list(user.owningBlock().inputs())[offset]
                return [(owner.outputsAt(offset - 1), level), (body_input, level)]
            return []
        if kind == "prim::Loop":
            # (trip count, condition, carried...) -> body inputs (iteration, carried...).
            if offset < 2:
                return []
            body_input = list(next(iter(user.blocks())).inputs())[offset - 1]
            return [(body_input, level), (user.outputsAt(offset - 2), level)]
        if kind == "prim::fork":
            inputs = list(user.g("Subgraph").inputs())
            if offset < len(inputs) and forks < 16:
                inner = _Walk(self.method, self.modules, True)
                inner.follow(inputs[offset], level, forks + 1)
                for entry in inner.hits:
                    if entry not in self.hits:
                        self.hits.append(entry)
            return [(out, level) for out in user.outputs()]  # the future, then its wait
        if kind in _OPAQUE:
            return []
        if kind == "prim::SetAttr":
            target = user.inputsAt(0)
            if _type_name(target) in self.modules:
                return []
            if offset == 0:
                if level == 0:
                    self._hit(user, current, self.in_fork)
                return []
            return [(target, level + 1)]  # an object now holds it
        if kind in _CONTAINER_IN:
            return [(out, level + 1) for out in user.outputs()]
        if kind in _ELEMENT_OUT:
            return [(out, max(level - 1, 0)) for out in user.outputs()]
        schema = user.schema()
        aliasing = _aliasing(schema) if schema != "(no schema)" else None
        if aliasing is None or len(aliasing[1]) != user.outputsSize():
            # No schema, or `-> ...`: whatever it makes may hold the value.
            return [(out, level) for out in user.outputs()]
        arguments, returns = aliasing
        if offset >= len(arguments):
            return [(out, level) for out in user.outputs()]  # an undescribed vararg
        has_alias, written, into_container = arguments[offset]
        found: list[tuple[torch._C.Value, int]] = []
        if written and level == 0:
            self._hit(user, current, self.in_fork)
        if into_container:
            # `append(list, el)`: the container written now holds the value.
            found += [
                (user.inputsAt(i), level + 1)
                for i, arg in enumerate(arguments)
                if arg[1] and i != offset
            ]
        outputs = list(user.outputs())
        for out, (aliased, element) in zip(outputs, returns, strict=False):
            if element and (has_alias or _kind(current) in _CONTAINER_KINDS):
                found.append((out, max(level - 1, 0)))  # `-> t(*)`: an element taken out
            elif aliased and has_alias:
                found.append((out, level))  # a view, or the container itself
            elif (
                not has_alias
                and _kind(current) in _CONTAINER_KINDS
                and _kind(out) in _CONTAINER_KINDS
            ):
                found.append((out, level))  # a shallow copy holds the same elements
        return found


def _type_name(value: torch._C.Value) -> str:
    t = value.type()
    if isinstance(t, torch._C.ClassType | torch._C.InterfaceType):
        return str(t.qualified_name())  # type: ignore[union-attr]
    return ""


def _writer(node: torch._C.Node, written: torch._C.Value, method: str) -> Writer:
    return Writer(
        method=method,
        kind=node.kind(),
        text=node_text(node),
        source=node_source(node),
        written=(written.debugName(),),
        written_types=(str(written.type()),),
    )


def constant_writes(prop: FreezeReplay) -> dict[tuple[int, str], list[WrittenConstant]]:
    """The attribute slots folded into a constant that the frozen graph still writes.

    Args:
        prop: a replay whose :meth:`~.replay.FreezeReplay.propagate` ran (folding and
            torch's clean-up: a write the clean-up removed is no write).

    Returns:
        ``{(module key, name): [writer, ...]}``, each writer once per node, in graph order.
    """
    found: dict[tuple[int, str], list[WrittenConstant]] = {}
    for index, ctx in enumerate(prop.contexts):
        slots = prop.constant_slots.get(index)
        if not slots:
            continue
        for node in iter_nodes(ctx.graph.block()):
            # A read Python could not turn into a constant stays a prim::GetAttr in the
            # replay's copy (a dict, a tuple): torch folds it all the same.
            if node.kind() not in ("prim::Constant", "prim::GetAttr") or node.outputsSize() != 1:
                continue
            value = node.output()
            slot = slots.get(value.unique())
            if slot is None or not _mutable(value):
                continue
            walk = _Walk(ctx.method, prop.model.module_types, ctx.is_fork)
            walk.follow(value)
            if walk.hits:
                known = found.setdefault(slot, [])
                known += [entry for entry in walk.hits if entry not in known]
    return found


def constant_writers(
    value: torch._C.Value, method: str = "forward", in_fork: bool = False
) -> list[WrittenConstant]:
    """The nodes that write one constant of a frozen graph (none: nothing writes it).

    The walk of :func:`constant_writes` from ``value`` (a ``prim::Constant``'s output):
    a quantized op reading a packed-params object writes nothing; a ``prim::SetAttr``
    on an object, or an in-place op on a tensor it holds, does. A call into a method
    of a TorchScript object (``prim::CallMethod``) is a body the walk cannot see: it
    counts as a write unless the object is a torchbind one (``__torch__.torch.classes``,
    whose methods are C++ code reading their own state, as packed params are).

    Args:
        value: the constant's value, in the graph (or ``torch.jit.fork`` body) that
            holds it.
        method: the method named in each writer.
        in_fork: ``value`` is inside a fork body.

    Returns:
        Each writing node once, in the order met.
    """
    if not _mutable(value):
        return []
    walk = _Walk(method, frozenset(), in_fork)
    walk.follow(value)
    hits = list(walk.hits)
    torchbind = _type_name(value).startswith("__torch__.torch.classes.")
    for use in value.uses():
        user = use.user
        if user.kind() == "prim::CallMethod" and use.offset == 0 and not torchbind:
            entry = WrittenConstant(_writer(user, value, method), in_fork)
            if entry not in hits:
                hits.append(entry)
    return hits


def frozen_writes_a_constant(module: torch.jit.ScriptModule) -> bool:
    """Whether a frozen module's graphs write one of their own constants.

    The same walk as :func:`constant_writes`, from every constant of every method graph
    and ``torch.jit.fork`` body of an already frozen module (``freeze``'s result), with
    no replay: a one-pass question that says whether explain's ``written-constant``
    reasons are worth asking for. Which attribute a constant was folded from is
    explain's to say.
    """
    graphs: list[tuple[torch._C.Graph, str, bool]] = [
        (module._c._get_method(name).graph, name, False) for name in module._c._method_names()
    ]
    while graphs:
        graph, method, in_fork = graphs.pop()
        for node in iter_nodes(graph.block()):
            if node.kind() == "prim::fork":
                graphs.append((node.g("Subgraph"), method, True))
            if node.kind() != "prim::Constant" or node.outputsSize() != 1:
                continue
            value = node.output()
            if not _mutable(value):
                continue
            walk = _Walk(method, frozenset(), in_fork)
            walk.follow(value)
            if walk.hits:
                return True
    return False


def _place(writer: Writer) -> dict[str, str | None]:
    """A reason's node, source, method and source text fields, from its writer."""
    return {
        "node": writer.text,
        "source": str(writer.source) if writer.source else None,
        "method": writer.method,
        "source_text": (writer.source.text or None) if writer.source else None,
    }


def _where(writer: Writer) -> str:
    return f"{writer.kind} at {writer.source.short()}" if writer.source else writer.kind


def written_reason(entry: WrittenConstant) -> Reason:
    """The ``written-constant`` reason for one writer of a folded attribute."""
    writer = entry.writer
    if entry.in_fork:
        why = "freezing does not record writes inside a torch.jit.fork body"
    elif writer.kind == "prim::SetAttr":
        why = "freezing folds a TorchScript object whose attributes its code assigns"
    else:
        why = (
            "torch's alias analysis does not follow a write to a tensor held in a list, "
            "a dict or a tuple"
        )
    via = f" (through %{writer.written[0]})" if writer.written else ""
    return Reason(
        "written-constant",
        f"folded into the graph as a constant, yet {_where(writer)} in {writer.method} "
        f"writes it{via}: the frozen model mutates its own constant ({why}), so its "
        "outputs can change from call to call and a saved file holds whatever the "
        "constant held when it was saved",
        **_place(writer),
    )


def _dropped_write(reason: Reason, writer: Writer) -> Reason:
    """A ``folded`` reason that also names a fork body's write freezing removed."""
    return Reason(
        reason.code,
        f"{reason.message}; {_where(writer)} in a torch.jit.fork body writes it, "
        "which freezing does not record (so it folds it anyway), and freezing's clean-up "
        "then removed that write: the frozen model no longer updates it",
        **_place(writer),
    )


def mark_written_constants(
    verdicts: list[AttributeVerdict],
    prop: FreezeReplay,
    writes: dict[tuple[int, str], list[WrittenConstant]],
) -> list[AttributeVerdict]:
    """The verdicts, each inlined one that the frozen graph writes with its
    ``written-constant`` reasons in place of ``folded`` (the status stays torch's).

    An inlined attribute written only inside a fork body whose write freezing's
    clean-up removed keeps ``folded``, which then names that write.
    """
    marked: list[AttributeVerdict] = []
    for verdict in verdicts:
        owner = module_at(prop.model, verdict.info.owner) if verdict.status == "inlined" else None
        if owner is None or verdict.kind == "submodule":
            marked.append(verdict)
            continue
        slot = (owner.key, verdict.info.name)
        found = writes.get(slot)
        if found:
            written = tuple(written_reason(entry) for entry in found)
            rest = tuple(r for r in verdict.reasons if r.code not in ("folded", "undetermined"))
            marked.append(replace(verdict, reasons=written + rest))
            continue
        lost = next(
            (f.writer for f in prop.facts.get(slot, ()) if f.writer is not None),
            None,
        )
        if lost is not None and "folded" in verdict.codes:
            reasons = tuple(
                _dropped_write(r, lost) if r.code == "folded" else r for r in verdict.reasons
            )
            marked.append(replace(verdict, reasons=reasons))
            continue
        marked.append(verdict)
    return marked
