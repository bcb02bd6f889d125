"""The values an inventory is made of: torch-free, so any process can hold them.

:mod:`freezeview.engine.graph.inventory` builds these from a loaded module; the app's screen
process, which never imports torch, receives them from its engine process.
"""

from __future__ import annotations

import difflib
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["KINDS", "AttributeInfo", "Inventory", "ModuleInfo"]

KINDS = ("parameter", "buffer", "submodule", "attribute")


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


@dataclass
class Inventory:
    """The module tree of a model with every attribute, in tree order."""

    modules: list[ModuleInfo] = field(default_factory=list)
    attributes: list[AttributeInfo] = field(default_factory=list)
    _by_path: dict[str, AttributeInfo] = field(default_factory=dict, repr=False)

    def by_path(self, path: str) -> AttributeInfo | None:
        """The attribute at ``path``, or None."""
        if not self._by_path:
            self._by_path = {a.path: a for a in self.attributes}
        return self._by_path.get(path)

    def module(self, path: str) -> ModuleInfo | None:
        """The module at ``path`` (``""`` is the root), or None."""
        return next((m for m in self.modules if m.path == path), None)

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
