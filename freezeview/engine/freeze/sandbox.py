"""Run a module's graphs on a private copy of its state, so runs never reach what is written.

A frozen graph's constants are the module's own tensors: ``torch._C._freeze_module``
folds an attribute by putting the very tensor (or list of tensors) into a
``prim::Constant``, and the clone it freezes shares every tensor with the input module.
Most models never write those tensors, but some do where torch's alias analysis does not
look (a tensor held in a list, a dict or a tuple; a forked or awaited call; an
interface): the frozen graph then writes into its own constants on every call. A run of
the input module writes the same tensors. Running either for numerics or timing would
change the constants of the frozen module freezeview writes.

:class:`Sandbox` holds a deep copy of one module (``copy.deepcopy`` of the C++ module,
which keeps the tensors that share an object shared) and runs copies of graphs whose
tensor constants are replaced by copies too, taken from the same table: a folded
constant that is the same tensor as a kept attribute stays the same tensor in the copy.
Nothing the pipeline holds, and nothing the user's file is saved from, is ever run.
A folded TorchScript object (a quantized model's packed params, torchbind objects that
only quantized ops read) is run as it is when nothing in the graph writes it
(:func:`~freezeview.engine.reasons.constant_writers`); one the graph writes cannot be
copied, and such a graph is not run (:class:`SandboxError`, naming the writer).
A graph function has no default values: :meth:`Sandbox.function` fills the arguments
the inputs leave out from the module's ``forward`` schema, as calling ``forward`` does.
:meth:`Sandbox.restore` puts the copy back to the original's values in place (tensors
whose version counter moved, and attributes a ``prim::SetAttr`` re-bound), so every run
starts from the state the input had.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..graph import attribute_values, tensors_in
from ..reasons import constant_writers

__all__ = ["Sandbox", "SandboxError"]


class SandboxError(RuntimeError):
    """A graph writes a constant freezeview cannot copy (a TorchScript object), or torch
    cannot copy the module: running it would write what is saved, so it is not run.
    The inputs are not at fault."""


def _nodes(block: torch._C.Graph | torch._C.Block) -> Iterator[torch._C.Node]:
    """Every node of a graph or block, nested blocks included."""
    for node in block.nodes():
        yield node
        for inner in node.blocks():
            yield from _nodes(inner)


def _summary(value: Any) -> Any:
    """What identifies an attribute's value: tensors by object, modules and objects by kind."""
    if isinstance(value, torch.Tensor):
        return ("tensor", value._cdata)
    if isinstance(value, (list, tuple)):
        return (type(value).__name__, tuple(_summary(v) for v in value))
    if isinstance(value, dict):
        return ("dict", tuple((repr(k), _summary(v)) for k, v in value.items()))
    if isinstance(value, (int, float, str, bool, complex)) or value is None:
        return value
    return ("object", type(value).__name__)


def _defaults(module: Any, method: str, arity: int) -> list[tuple[bool, Any]]:
    """Per argument after ``self``: (has a default, the default) from ``module``'s
    ``method`` schema; empty when the method is missing or its arity is not ``arity``."""
    try:
        arguments = list(module._get_method(method).schema.arguments)
    except (AttributeError, RuntimeError):
        return []
    if len(arguments) != arity:
        return []
    return [(arg.has_default_value(), arg.default_value) for arg in arguments[1:]]


def _check_unwritten_object(value: torch._C.Value, in_fork: bool) -> None:
    """Let a run read a folded TorchScript object that nothing in the graph writes (a
    quantized op's packed params); refuse one the graph writes, naming the writer."""
    writers = constant_writers(value, in_fork=in_fork)
    if not writers:
        return
    kind = value.type()
    name = kind.qualified_name() if isinstance(kind, torch._C.ClassType) else str(kind)
    raise SandboxError(
        f"the frozen graph writes a TorchScript object it holds as a constant ({name}, "
        f"written by {writers[0].writer.describe()}); freezeview cannot copy that object, "
        "and running the graph would change the model that is written, so it is not run"
    )


class Sandbox:
    """A private copy of one module's state (and of the graph constants it runs with).

    Args:
        module: a ScriptModule or its ``_c``; never run, never changed.

    Example::

        box = Sandbox(frozen)
        call = box.function(frozen.graph)
        first, second = call(x), call(x)    # frozen's constants are untouched
        box.restore()                       # the copy is as frozen is again
    """

    def __init__(self, module: Any) -> None:
        self._orig = getattr(module, "_c", module)
        try:
            self.copy: torch._C.ScriptModule = copy.deepcopy(self._orig)
        except Exception as exc:
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise SandboxError(f"torch could not copy the module to run it ({first})") from exc
        # original tensor (by TensorImpl) -> its copy; (original, copy, copy's version).
        self._memo: dict[int, torch.Tensor] = {}
        self._pairs: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self._pymemo: dict[int, Any] = {}
        self._writes_attributes = False
        mine = attribute_values(self._orig)
        theirs = attribute_values(self.copy) if mine is not None else None
        self._attributes: list[tuple[str, Any]] = []
        if mine is not None and theirs is not None and len(mine) == len(theirs):
            for (path, ours), (_, copied) in zip(mine, theirs, strict=True):
                self._attributes.append((path, ours))
                for a, b in zip(tensors_in(ours), tensors_in(copied), strict=False):
                    if a._cdata not in self._memo:
                        self._memo[a._cdata] = b
                        self._pairs.append((a, b, b._version))

    def _copied(self, value: Any) -> Any:
        """``value`` with every tensor replaced by its copy (made once per tensor)."""
        if isinstance(value, torch.Tensor):
            got = self._memo.get(value._cdata)
            if got is None:
                # Python's deepcopy keeps views of one storage sharing it.
                got = self._memo[value._cdata] = copy.deepcopy(value.detach(), self._pymemo)
                self._pairs.append((value, got, got._version))
            return got
        if isinstance(value, list):
            return [self._copied(v) for v in value]
        if isinstance(value, tuple):
            return tuple(self._copied(v) for v in value)
        if isinstance(value, dict):
            return {k: self._copied(v) for k, v in value.items()}
        return value

    def _private(self, graph: torch._C.Graph, in_fork: bool = False) -> None:
        """Point every tensor constant of ``graph`` (and of its subgraphs) at copies."""
        for node in _nodes(graph):
            kind = node.kind()
            if kind == "prim::SetAttr":
                self._writes_attributes = True
            for name in node.attributeNames():
                what = node.kindOf(name)
                if what == "g":
                    sub = node.g(name).copy()
                    self._private(sub, in_fork or kind == "prim::fork")
                    node.g_(name, sub)
                elif kind != "prim::Constant":
                    continue
                elif what == "t":
                    node.t_(name, self._copied(node.t(name)))
                elif what == "ival" and node.output().type().kind() == "ClassType":
                    _check_unwritten_object(node.output(), in_fork)
                elif what == "ival" and "Tensor" in node.output().type().annotation_str:
                    try:  # an object or enum Python cannot import holds no tensor here
                        value = node.ival(name)
                        if tensors_in(value):
                            node.ival_(name, self._copied(value))
                    except (RuntimeError, TypeError, ValueError):
                        continue

    def function(self, graph: torch._C.Graph, method: str = "forward") -> Callable[..., Any]:
        """A function running a private copy of ``graph`` (``self`` first) on the copy.

        The graph is copied and inlined (what torch's executor does before running it),
        so constants in called methods are reached too; ``graph`` itself is not changed.
        A function made from a graph knows no default values: the arguments the inputs
        leave out are given the defaults of the module's ``method`` (``forward(src,
        mask=None)`` called with ``src`` alone), as calling the method does. The
        function bears the method's name, so torch's own errors name ``forward``.

        Args:
            graph: a graph of ``method`` (its inputs: ``self``, then the arguments).
            method: the module's method whose defaults fill missing arguments.

        Returns:
            ``call(*inputs)`` giving what the graph returns.

        Raises:
            SandboxError: the graph writes a TorchScript object it holds as a constant.
        """
        private = graph.copy()
        torch._C._jit_pass_inline(private)
        self._private(private)
        fn = torch._C._create_function_from_graph(method, private)
        target = self.copy
        defaults = _defaults(self._orig, method, len(list(private.inputs())))

        def call(*inputs: Any) -> Any:
            missing = defaults[len(inputs) :]
            if missing and all(has for has, _ in missing):
                inputs = (*inputs, *(value for _, value in missing))
            return fn(target, *inputs)

        return call

    def restore(self) -> None:
        """Put the copy back to the original's values, in place (sharing stays as it was)."""
        with torch.no_grad():
            for i, (orig, mine, version) in enumerate(self._pairs):
                if mine._version != version:
                    mine.copy_(orig)
                    self._pairs[i] = (orig, mine, mine._version)
        if self._writes_attributes:
            self._rebind()

    def _rebind(self) -> None:
        """Attributes a ``prim::SetAttr`` replaced get (copies of) the original values."""
        now = attribute_values(self.copy)
        if now is None or len(now) != len(self._attributes):
            return
        for (path, ours), (_, theirs) in zip(self._attributes, now, strict=True):
            if _summary(self._copied(ours)) == _summary(theirs):
                continue
            *owners, name = path.split(".")
            owner: Any = self.copy
            for part in owners:
                owner = owner.getattr(part)
            try:
                owner.setattr(name, self._copied(ours))
            except (RuntimeError, TypeError):
                continue
        with torch.no_grad():
            for orig, mine, _ in self._pairs:
                mine.copy_(orig)
        self._pairs = [(a, b, b._version) for a, b, _ in self._pairs]
