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

Storage is copied as the original shares it. torch's deepcopy keeps one tensor object
one tensor object, but clones every tensor *object* on its own: a buffer and a view of
it, a parameter and a buffer on one storage, a tensor and a slice of it in a list, each
get a storage of their own, and a write through one no longer shows through the other
(torch's module shows it). So every original storage is cloned once (bytes, offsets and
dtype views as they are) and each copied tensor is seated on its original's geometry
(``set_(storage, offset, size, stride)``) in the clone of its original's storage, in
place, so the copied module, its lists, dicts, tuples and TorchScript objects hold the
re-seated tensors. Folded graph constants are seated the same way.

A TorchScript object whose Python class is not importable here (someone else's model,
loaded from its file) cannot be looked into with public torch APIs: Python reads an
object's fields only by turning it into an instance of its Python class (torch fails
with "classType ... is not found"), and torch's ``ClassType`` binding does not list an
object's attributes. Such an object is copied by torch's deepcopy alone: runs never
reach the original, but its tensors are storages of their own in the copy (a field
sharing storage with a buffer no longer follows it) and :meth:`Sandbox.restore` cannot
put them back.
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

from ..graph import attribute_values, module_iterators, tensors_in
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


def _seatable(tensor: torch.Tensor) -> bool:
    """A dense tensor with real storage: it can be seated on a storage by ``set_``
    (quantized, sparse, nested and meta tensors are copied and put back whole)."""
    return (
        tensor.layout == torch.strided
        and not tensor.is_quantized
        and not tensor.is_nested
        and tensor.device.type != "meta"
    )


def _storage_key(tensor: torch.Tensor) -> int:
    """What identifies a tensor's storage (its StorageImpl; an empty storage too)."""
    return int(tensor.untyped_storage()._cdata)


def _same_geometry(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.size() == b.size()
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
    )


def _tensor_pairs(ours: Any, theirs: Any) -> Iterator[tuple[torch.Tensor, torch.Tensor]]:
    """(original, copy) for every tensor of an attribute's value and its copy: in lists,
    tuples, dict values and the fields of TorchScript objects (as Python reads them), to
    any depth; submodules are walked as attributes of their own."""
    if isinstance(ours, torch.Tensor):
        if isinstance(theirs, torch.Tensor):
            yield ours, theirs
    elif isinstance(ours, list | tuple) and isinstance(theirs, list | tuple):
        if len(ours) == len(theirs):
            for a, b in zip(ours, theirs, strict=True):
                yield from _tensor_pairs(a, b)
    elif isinstance(ours, dict) and isinstance(theirs, dict):
        if len(ours) == len(theirs):
            for a, b in zip(ours.values(), theirs.values(), strict=True):
                yield from _tensor_pairs(a, b)
    elif (
        not isinstance(ours, torch._C.ScriptModule | torch._C.ScriptObject)
        and type(ours) is type(theirs)
        and isinstance(getattr(ours, "__dict__", None), dict)
    ):
        # An instance of a @torch.jit.script class: torch builds a Python instance whose
        # fields are the object's own tensors (the same TensorImpls), so seating them
        # seats the TorchScript object's tensors.
        mine, copied = vars(ours), vars(theirs)
        for name, value in mine.items():
            if name in copied:
                yield from _tensor_pairs(value, copied[name])


def _walk(cmod: torch._C.ScriptModule) -> list[tuple[str, Any]]:
    """Every attribute path under ``cmod`` with its value, as :func:`attribute_values`
    gives them, read module by module where torch cannot convert every value at once
    (an object whose Python class is not importable is an ``OpaqueObject`` then)."""
    found = attribute_values(cmod)
    if found is not None:
        return found
    out: list[tuple[str, Any]] = []
    stack: list[tuple[str, torch._C.ScriptModule]] = [("", cmod)]
    while stack:
        prefix, module = stack.pop()
        children: list[tuple[str, torch._C.ScriptModule]] = []
        for name, value in module_iterators(module)["named_attributes"]:
            path = f"{prefix}.{name}" if prefix else name
            out.append((path, value))
            if isinstance(value, torch._C.ScriptModule):
                children.append((path, value))
        stack.extend(reversed(children))
    return out


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
        # original tensor (by TensorImpl) -> (the original, kept alive, and its copy).
        self._memo: dict[int, tuple[torch.Tensor, torch.Tensor]] = {}
        # original storage (by StorageImpl) -> (the original storage, its one clone).
        self._storages: dict[int, tuple[torch.UntypedStorage, torch.UntypedStorage]] = {}
        # (original storage's key, a copied tensor seated in its clone, its version).
        self._seated: list[tuple[int, torch.Tensor, int]] = []
        # (original, copy, copy's version) of tensors copied whole (quantized, sparse...).
        self._pairs: list[tuple[torch.Tensor, torch.Tensor, int]] = []
        self._pymemo: dict[int, Any] = {}
        self._writes_attributes = False
        mine = _walk(self._orig)
        theirs = _walk(self.copy)
        self._attributes: list[tuple[str, Any]] = []
        if len(mine) == len(theirs):
            self._attributes = list(mine)
            with torch.no_grad():
                for (_, ours), (_, copied) in zip(mine, theirs, strict=True):
                    for a, b in _tensor_pairs(ours, copied):
                        self._adopt(a, b)

    def _clone_of(self, tensor: torch.Tensor) -> torch.UntypedStorage:
        """The one clone of ``tensor``'s storage, made on first sight."""
        key = _storage_key(tensor)
        held = self._storages.get(key)
        if held is None:
            storage = tensor.untyped_storage()
            held = self._storages[key] = (storage, storage.clone())
        return held[1]

    def _seat(self, orig: torch.Tensor, mine: torch.Tensor) -> None:
        """Put ``mine`` on ``orig``'s geometry in the clone of ``orig``'s storage."""
        clone = self._clone_of(orig)
        if mine.untyped_storage()._cdata != clone._cdata or not _same_geometry(orig, mine):
            mine.set_(clone, orig.storage_offset(), orig.size(), orig.stride())
        self._seated.append((_storage_key(orig), mine, mine._version))

    def _adopt(self, orig: torch.Tensor, mine: torch.Tensor) -> None:
        """Take ``mine`` (torch's deepcopy of ``orig``) as ``orig``'s copy, sharing
        storage with the other copies as ``orig`` shares it with the other originals."""
        if orig._cdata in self._memo and self._memo[orig._cdata][1] is mine:
            return  # one tensor under two names: torch's deepcopy kept it one
        self._memo.setdefault(orig._cdata, (orig, mine))
        if not (_seatable(orig) and _seatable(mine) and orig.device == mine.device):
            self._pairs.append((orig, mine, mine._version))
            return
        key = _storage_key(orig)
        storage = orig.untyped_storage()
        if (
            key not in self._storages
            and _same_geometry(orig, mine)
            and mine.untyped_storage().nbytes() == storage.nbytes()
        ):
            # torch's clone is already a whole copy of the storage (a tensor that covers
            # its own storage, as most parameters do): it becomes the storage's clone.
            self._storages[key] = (storage, mine.untyped_storage())
        self._seat(orig, mine)

    def _copied(self, value: Any) -> Any:
        """``value`` with every tensor replaced by its copy (made once per tensor), on
        the clone of its original's storage."""
        if isinstance(value, torch.Tensor):
            held = self._memo.get(value._cdata)
            if held is None:
                if _seatable(value):
                    got = torch.empty(0, dtype=value.dtype, device=value.device)
                    with torch.no_grad():
                        self._seat(value, got)
                else:
                    got = copy.deepcopy(value.detach(), self._pymemo)
                    self._pairs.append((value, got, got._version))
                held = self._memo[value._cdata] = (value, got)
            return held[1]
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
        """Put the copy back to the original's values, in place (sharing stays as it was).

        A storage is copied back whole when a tensor seated in it was written (a write
        through a view of it moves the view's base's version too)."""
        with torch.no_grad():
            self._put_back(everything=False)
        if self._writes_attributes:
            self._rebind()

    def _put_back(self, everything: bool) -> None:
        written = {
            key for key, mine, version in self._seated if everything or mine._version != version
        }
        for key in written:
            orig, clone = self._storages[key]
            clone.copy_(orig)
        if written:
            self._seated = [(key, mine, mine._version) for key, mine, _ in self._seated]
        for i, (orig_t, mine_t, version) in enumerate(self._pairs):
            if everything or mine_t._version != version:
                mine_t.copy_(orig_t)
                self._pairs[i] = (orig_t, mine_t, mine_t._version)

    def _rebind(self) -> None:
        """Attributes a ``prim::SetAttr`` replaced get (copies of) the original values."""
        now = _walk(self.copy)
        if len(now) != len(self._attributes):
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
            self._put_back(everything=True)
