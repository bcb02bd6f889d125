"""The values an inventory is made of: torch-free, so any process can hold them.

:mod:`freezeview.engine.graph.inventory` builds these from a loaded module; the app's screen
process, which never imports torch, receives them from its engine process.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Generic, TypeVar

from ..plumbing import plural

__all__ = [
    "HOUSEKEEPING",
    "KINDS",
    "AttributeInfo",
    "FrozenConstant",
    "FrozenContents",
    "Inventory",
    "ModuleInfo",
]

KINDS = ("parameter", "buffer", "submodule", "attribute")
#: Attributes every scripted module carries: listed (explain, the app's tree, what a
#: frozen file holds) only when they are news, as when one is kept.
HOUSEKEEPING = frozenset({"training", "_is_full_backward_hook"})


@dataclass(frozen=True, slots=True)
class AttributeInfo:
    """One attribute of one module in the tree.

    Attributes:
        path: dotted path from the root (``layer1.0.bn.weight``).
        name: the attribute's own name (``weight``).
        owner: dotted path of the module that holds it (``""`` for the root).
        kind: ``parameter``, ``buffer``, ``submodule`` or ``attribute``.
        type: TorchScript type as declared by the module (``Tensor``, ``Optional[Tensor]``,
            ``List[int]``, a module type name, ...).
        value: a short description of the value (never the data).
        dtype, shape, device, requires_grad: tensor facts, for tensors.
        readers: methods that read it directly (``forward``, ``layer1.0.forward``).
        writers: methods that assign it with ``prim::SetAttr``.
        value_kind: what ``value`` describes: ``tensor``, ``int``, ``str``, ``enum`` (a
            TorchScript Enum member, shown by name: ``Format.NHWC``), ``module``, ...
    """

    path: str
    name: str
    owner: str
    kind: str
    type: str
    value: str = ""
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    device: str | None = None
    requires_grad: bool | None = None
    readers: tuple[str, ...] = ()
    writers: tuple[str, ...] = ()
    value_kind: str = ""

    @property
    def is_tensor(self) -> bool:
        """True for tensor-valued attributes."""
        return self.dtype is not None

    @property
    def numel(self) -> int:
        """Number of elements for tensors, 0 otherwise."""
        if self.shape is None:
            return 0
        n = 1
        for s in self.shape:
            n *= s
        return n


@dataclass(frozen=True, slots=True)
class ModuleInfo:
    """One module in the tree: path, type and methods."""

    path: str
    type_name: str
    qualified_type: str
    methods: tuple[str, ...]
    children: tuple[str, ...]


_Item = TypeVar("_Item", AttributeInfo, ModuleInfo)


class _Index(Generic[_Item]):
    """Entries of a growing list by their ``path`` (the first of a path wins, as a scan
    would find it); it indexes only what was appended since the last look-up, and starts
    over if the list was replaced or shortened."""

    __slots__ = ("_list", "_seen", "_table")

    def __init__(self) -> None:
        self._list: list[_Item] | None = None
        self._seen = 0
        self._table: dict[str, _Item] = {}

    def get(self, items: list[_Item], path: str) -> _Item | None:
        if items is not self._list or len(items) < self._seen:
            self._list, self._seen, self._table = items, 0, {}
        if len(items) > self._seen:
            table = self._table
            for item in items[self._seen :]:
                table.setdefault(item.path, item)
            self._seen = len(items)
        return self._table.get(path)

    def __reduce__(self) -> tuple[type[_Index[_Item]], tuple[()]]:
        return _Index, ()  # rebuilt where it is used: not sent with the inventory


@dataclass
class Inventory:
    """The module tree of a model with every attribute, in tree order."""

    modules: list[ModuleInfo] = field(default_factory=list)
    attributes: list[AttributeInfo] = field(default_factory=list)
    # Look-up indexes, built on first use and extended as the lists grow (an inventory
    # is built by appending): one dict look-up per call, not a scan of every entry.
    _by_path: _Index[AttributeInfo] = field(
        default_factory=lambda: _Index(), repr=False, compare=False
    )
    _by_module: _Index[ModuleInfo] = field(
        default_factory=lambda: _Index(), repr=False, compare=False
    )

    def by_path(self, path: str) -> AttributeInfo | None:
        """The attribute at ``path``, or None."""
        return self._by_path.get(self.attributes, path)

    def module(self, path: str) -> ModuleInfo | None:
        """The module at ``path`` (``""`` is the root), or None."""
        return self._by_module.get(self.modules, path)

    def names(self) -> list[str]:
        """Every name ``preserved_attrs`` could take: attribute paths and method paths."""
        names = [a.path for a in self.attributes]
        for mod in self.modules:
            prefix = f"{mod.path}." if mod.path else ""
            names.extend(prefix + m for m in mod.methods)
        return names

    def suggest(self, name: str, n: int = 3) -> list[str]:
        """The existing names closest to ``name`` (for "did you mean" messages)."""
        candidates = self.names()
        close = difflib.get_close_matches(name, candidates, n=n, cutoff=0.5)
        if not close:
            leaf = name.rsplit(".", 1)[-1]
            close = [c for c in candidates if c.rsplit(".", 1)[-1] == leaf][:n]
        return close

    def walk(self, under: str = "") -> Iterator[AttributeInfo]:
        """Attributes at or below module path ``under``."""
        prefix = f"{under}." if under else ""
        for attr in self.attributes:
            if attr.path.startswith(prefix):
                yield attr


@dataclass(frozen=True, slots=True)
class FrozenConstant:
    """One constant an already-frozen model holds in its graphs (a tensor or an object).

    Attributes:
        name: how freezeview names it: its value name without ``self.``
            (``conv.weight``, ``conv.weight_fused_bn`` once a pass rewrote it), else
            ``CONSTANTS.cN`` as ``.code`` shows it, else the graph value (``%3``).
        path: the attribute path the constant's name points to (``conv.weight``); ``""``
            when the name was not saved (``torch.jit.save`` keeps no value names).
        type: ``Tensor`` or the object's TorchScript type (packed weights).
        method: the method whose graph holds it.
        dtype, shape, device: tensor facts, for tensors.
        nbytes: bytes of the tensor's elements (0 for objects).
        users: the nodes that read it, with their source lines.
    """

    name: str
    path: str
    type: str
    method: str
    dtype: str | None = None
    shape: tuple[int, ...] | None = None
    device: str | None = None
    nbytes: int = 0
    users: tuple[str, ...] = ()

    def to_json(self) -> dict[str, object]:
        """JSON object for ``explain --json``'s ``already_frozen.constants``."""
        return {
            "name": self.name,
            "path": self.path or None,
            "type": self.type,
            "method": self.method,
            "dtype": self.dtype,
            "shape": list(self.shape) if self.shape is not None else None,
            "device": self.device,
            "bytes": self.nbytes,
            "users": list(self.users),
        }


@dataclass(frozen=True, slots=True)
class FrozenContents:
    """What freezing left in an already-frozen model: its constants and kept attributes."""

    constants: tuple[FrozenConstant, ...]
    kept: tuple[str, ...]

    @property
    def nbytes(self) -> int:
        """Bytes of every tensor constant."""
        return sum(c.nbytes for c in self.constants)

    def summary(self) -> str:
        """``already frozen: 4 constants (1.9 KB), 0 attributes kept`` (``1 constant``)."""
        size = self.nbytes
        shown = f"{size / 1e6:.1f} MB" if size >= 1e6 else f"{size / 1e3:.1f} KB"
        return (
            f"already frozen: {plural(len(self.constants), 'constant')} ({shown}), "
            f"{plural(len(self.kept), 'attribute')} kept"
        )

    def to_json(self) -> dict[str, object]:
        """JSON object for ``explain --json``'s ``already_frozen``."""
        return {
            "constants": [c.to_json() for c in self.constants],
            "bytes": self.nbytes,
            "kept": list(self.kept),
        }
