"""Why each attribute is, or is not, inlined by ``torch.jit.freeze``.

freezeview answers, for every attribute of a ScriptModule, what freezing will do with it:

* ``inlined`` - a preserved method reads it and freezing folds it into the graph as a
  constant;
* ``kept`` - it stays a module attribute, with the precise reason (a ``prim::SetAttr``, an
  in-place writer found by alias analysis, a name in ``preserved_attrs``, ...);
* ``dropped`` - it disappears because nothing that survives freezing reads it.

The verdicts follow torch's own algorithm (``AttributePropagator`` in
``torch/csrc/jit/passes/freeze_module.cpp``) step by step on copies of the method
graphs: inline every preserved method; record the attributes that are assigned or
written in place (alias analysis with frozen semantics) across *all* preserved methods
before anything is folded; fold what may be folded; let torch's constant propagation and
dead-code elimination run; then keep exactly the attribute slots that a surviving
``prim::GetAttr``, a mutation or ``preserved_attrs`` asks for, per TorchScript class
type. The model itself is never touched. The test-suite checks every verdict against
what the real ``torch.jit.freeze`` leaves on the frozen module.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from .errors import BadInputError, PlanError
from .inventory import AttributeInfo, Inventory, build_inventory, module_iterators, raw_module
from .loading import LoadedModel, check_eval, load_model
from .mutation import GraphWriters, Writer

__all__ = [
    "REASON_CODES",
    "AttributeVerdict",
    "Explanation",
    "Reason",
    "explain",
]

#: The closed set of reason codes, with what each means. Documented in README.md.
REASON_CODES: dict[str, str] = {
    "folded": "inlined: a preserved method reads it and freezing folds it into a constant",
    "unused": "dropped: no preserved method reads it",
    "dead-code": "dropped: only read in code that freezing's clean-up removes",
    "preserved": "kept: named in preserved_attrs, or under a named submodule",
    "set-attr": "kept: a prim::SetAttr assigns it in a preserved method",
    "in-place-write": "kept: alias analysis finds a node that writes its value in place",
    "aliases-mutable": "kept: its value shares memory with a kept, mutable value",
    "module-kept": "kept: a module on its path is kept whole (returned or preserved)",
    "not-materializable": "kept: its value has no constant form in TorchScript IR",
    "interface": "reached through a module interface attribute",
    "shared-type": "kept: another module of the same TorchScript class keeps this slot",
    "holds-kept": "kept: a submodule that holds kept attributes",
    "referenced": "kept: a node that reads it survives freezing's clean-up",
}

STATUSES = ("kept", "inlined", "dropped")


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason behind a verdict.

    Attributes:
        code: one of :data:`REASON_CODES`.
        message: a sentence for people.
        node: the IR line of the node involved (a writer, a SetAttr), if any.
        source: ``file:line`` of that node in the model's source, if recorded.
        method: the preserved method where it happens, if any.
    """

    code: str
    message: str
    node: str | None = None
    source: str | None = None
    method: str | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``explain --json``."""
        return {
            "code": self.code,
            "message": self.message,
            "node": self.node,
            "source": self.source,
            "method": self.method,
        }


@dataclass(frozen=True, slots=True)
class AttributeVerdict:
    """What freezing does with one attribute, and why."""

    path: str
    kind: str
    type: str
    status: str
    reasons: tuple[Reason, ...]
    info: AttributeInfo

    @property
    def codes(self) -> tuple[str, ...]:
        """The reason codes, in order."""
        return tuple(r.code for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        """JSON object following DESIGN.md's ``explain --json`` contract."""
        data: dict[str, Any] = {
            "path": self.path,
            "kind": self.kind,
            "type": self.type,
            "status": self.status,
            "reasons": [r.to_json() for r in self.reasons],
        }
        if self.info.shape is not None:
            data["dtype"] = self.info.dtype
            data["shape"] = list(self.info.shape)
        return data


@dataclass
class Explanation:
    """The verdict for every attribute of a model under one plan."""

    model: str
    torch_version: str
    preserved_attrs: tuple[str, ...]
    methods: tuple[str, ...]
    attributes: list[AttributeVerdict]
    inventory: Inventory
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)

    def counts(self) -> dict[str, int]:
        """How many attributes are inlined, kept and dropped."""
        counts = {status: 0 for status in ("inlined", "kept", "dropped")}
        for verdict in self.attributes:
            counts[verdict.status] += 1
        return counts

    def summary(self) -> str:
        """``412 inlined · 3 kept · 7 dropped``."""
        c = self.counts()
        return f"{c['inlined']} inlined · {c['kept']} kept · {c['dropped']} dropped"

    def by_path(self, path: str) -> AttributeVerdict | None:
        """The verdict for ``path``, or None."""
        return next((v for v in self.attributes if v.path == path), None)

    def with_status(self, status: str) -> list[AttributeVerdict]:
        """The verdicts with the given status, in tree order."""
        return [v for v in self.attributes if v.status == status]

    @property
    def plan(self) -> dict[str, Any]:
        """The plan the verdicts hold for."""
        return {"preserved_attrs": list(self.preserved_attrs), "methods": list(self.methods)}

    def to_json(self) -> dict[str, Any]:
        """JSON document following DESIGN.md's ``explain --json`` contract."""
        return {
            "model": self.model,
            "torch_version": self.torch_version,
            "plan": self.plan,
            "summary": self.counts(),
            "attributes": [v.to_json() for v in self.attributes],
        }


# ---------------------------------------------------------------------------------------
# The model as freezing sees it: module objects, attribute values and their identities.


class _Module:
    """One C++ module object of the model (a module shared under two names is one)."""

    __slots__ = ("attrs", "children", "cmod", "key", "methods", "order", "paths", "type_name")

    def __init__(self, key: int, cmod: torch._C.ScriptModule) -> None:
        self.key = key
        self.cmod = cmod
        self.paths: list[str] = []
        self.type_name: str = cmod._type().qualified_name()
        self.attrs: dict[str, Any] = {}
        self.order: list[str] = []
        self.children: dict[str, _Module] = {}
        self.methods: set[str] = set(cmod._method_names())


_SCALARS = (bool, int, float, complex, str, torch.device, torch.dtype, type(None))


# Values torch's tryInsertConstant has no constant form for.
_NOT_CONSTANT_TYPES: tuple[type, ...] = tuple(
    t for t in (getattr(torch, "Generator", None), getattr(torch._C, "Future", None)) if t
)


def _is_object(value: Any) -> bool:
    """An object (module, TorchScript class instance, custom class), not plain data.

    TorchScript class instances come back to Python as instances of their Python class,
    so anything that is not a tensor, container or scalar counts.
    """
    if isinstance(value, torch._C.ScriptModule | torch.ScriptObject):
        return True
    return not isinstance(value, (torch.Tensor, list, dict, tuple, *_SCALARS, *_NOT_CONSTANT_TYPES))


def _is_mutable(value: Any) -> bool:
    """AliasDb::isMutableType on the value's runtime type."""
    if isinstance(value, torch.Tensor | list | dict) or _is_object(value):
        return True
    if isinstance(value, tuple):
        return any(_is_mutable(v) for v in value)
    return False


def _materializable(value: Any) -> bool:
    """Whether torch's tryInsertConstant can turn ``value`` into a graph constant."""
    if isinstance(value, torch.Tensor):
        return not (value.is_sparse or value.is_mkldnn or value.is_nested)
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, list | tuple):
        return all(_materializable(v) for v in value)
    if isinstance(value, dict):
        return all(_materializable(k) and _materializable(v) for k, v in value.items())
    if isinstance(value, (torch._C.ScriptModule, *_NOT_CONSTANT_TYPES)):
        return False
    # Non-module TorchScript objects are copied to weak compilation references.
    return _is_object(value)


def _tensor_key(t: torch.Tensor) -> tuple[str, int]:
    # IValue alias identity for tensors is the storage (freeze_module.cpp uses
    # HashAliasedIValues), so views and tied weights share a key.
    try:
        return ("storage", int(t.untyped_storage()._cdata))
    except (RuntimeError, NotImplementedError):
        return ("tensor", id(t))


class _Model:
    """Module objects of a model and helpers to name and compare attribute values."""

    def __init__(self, root: torch._C.ScriptModule, cache: dict[int, Any] | None = None) -> None:
        self._cache = cache
        self.modules: list[_Module] = []
        self.by_type: dict[str, list[_Module]] = {}
        self.root = self._visit(root, "")

    def _visit(self, cmod: torch._C.ScriptModule, path: str) -> _Module:
        for known in self.by_type.get(cmod._type().qualified_name(), []):
            if known.cmod == cmod:
                known.paths.append(path)
                return known
        mod = _Module(len(self.modules), cmod)
        mod.paths.append(path)
        self.modules.append(mod)
        self.by_type.setdefault(mod.type_name, []).append(mod)
        for name, value in module_iterators(cmod, self._cache)["named_attributes"]:
            mod.order.append(name)
            if isinstance(value, torch._C.ScriptModule):
                child_path = f"{path}.{name}" if path else name
                child = self._visit(value, child_path)
                mod.children[name] = child
                mod.attrs[name] = value
            else:
                mod.attrs[name] = value
        return mod

    @property
    def module_types(self) -> frozenset[str]:
        return frozenset(self.by_type)

    def value_key(self, mod: _Module, name: str) -> tuple[Any, ...]:
        value = mod.attrs[name]
        if isinstance(value, torch.Tensor):
            return _tensor_key(value)
        if name in mod.children:
            return ("module", mod.children[name].key)
        return ("slot", mod.key, name)

    def sub_keys(self, mod: _Module, name: str) -> set[tuple[Any, ...]]:
        """IValue::getSubValues: the value itself and every tensor inside it."""
        keys = {self.value_key(mod, name)}
        stack = [mod.attrs[name]]
        while stack:
            value = stack.pop()
            if isinstance(value, torch.Tensor):
                keys.add(_tensor_key(value))
            elif isinstance(value, list | tuple):
                stack.extend(value)
            elif isinstance(value, dict):
                stack.extend(value.values())
        return keys


# ---------------------------------------------------------------------------------------
# freeze_module.cpp's AttributePropagator, decision by decision.


@dataclass
class _Fact:
    code: str
    writer: Writer | None = None
    detail: str = ""


@dataclass
class _Context:
    """One graph freezing analyses: a preserved method, or a ``prim::fork`` subgraph in it.

    ``base`` is the module the graph's first input stands for (``self``, or the
    submodule a fork was handed).
    """

    method: str
    graph: torch._C.Graph
    base: _Module
    writers: GraphWriters
    is_fork: bool = False
    fork_node: torch._C.Node | None = None
    parent: torch._C.Graph | None = None


class _Propagator:
    """Replays freezing's decisions on copies of the method graphs."""

    def __init__(
        self,
        model: _Model,
        preserved_attrs: Sequence[str],
        inventory: Inventory,
        freeze_interfaces: bool,
        display: str,
    ) -> None:
        self.model = model
        self.root = model.root
        self.display = display
        self.freeze_interfaces = freeze_interfaces
        self.preserved_values: set[tuple[Any, ...]] = set()
        self.preserved_sub: set[tuple[Any, ...]] = set()  # sub-values of non-object ones
        self.preserved_scalars: set[tuple[int, str]] = set()
        self.preserved_submodules: set[int] = set()
        self.user_preserved: dict[int, set[str]] = {}
        self.user_names: dict[tuple[int, str], str] = {}
        self.methods: list[str] = []
        self.graphs: dict[str, torch._C.Graph] = {}
        self.contexts: list[_Context] = []
        # What happened to each attribute slot, keyed by (module key, name).
        self.facts: dict[tuple[int, str], list[_Fact]] = {}
        self.mutable_slots: set[tuple[int, str]] = set()
        self.read: set[tuple[int, str]] = set()
        self.folded: dict[tuple[int, str], set[str]] = {}
        self.not_materializable: set[tuple[int, str]] = set()
        self.unreplaced: dict[int, set[int]] = {}
        self.used: dict[tuple[int, str], None] = {}
        self.referenced: set[tuple[int, str]] = set()
        self.escaping: set[int] = set()
        self.interface_paths: set[str] = set()
        self.keep: dict[str, set[str] | None] = {}  # type -> kept slot names (None = all)
        self.instances: dict[str, list[_Module]] = {}
        self.type_keep_source: dict[tuple[str, str], tuple[int, str]] = {}

        if "forward" in self.root.methods:
            self.methods.append("forward")
        for name in preserved_attrs:
            self._check_name(name, inventory)

    # -- preserved_attrs -----------------------------------------------------------------

    def _check_name(self, name: str, inventory: Inventory) -> None:
        parts = name.split(".")
        mod = self.root
        chain: list[tuple[_Module, str]] = []
        for part in parts[:-1]:
            child = mod.children.get(part)
            if child is None:
                self._unknown(name, inventory)
            chain.append((mod, part))
            mod = child  # type: ignore[assignment]
        leaf = parts[-1]
        if leaf in mod.attrs:
            for parent, sub in chain:
                self.user_preserved.setdefault(parent.key, set()).add(sub)
            self.user_preserved.setdefault(mod.key, set()).add(leaf)
            self.user_names[(mod.key, leaf)] = name
            if leaf in mod.children:
                self.preserved_submodules.add(mod.children[leaf].key)
            self._insert_mutable(mod, leaf)
        elif leaf in mod.methods and leaf:
            if mod is not self.root:
                raise PlanError(
                    f"{name!r} names a method of a submodule; freezing can only preserve "
                    f"methods of the top-level module of {self.display} (preserve the "
                    "submodule instead)."
                )
            for parent, sub in chain:
                self.user_preserved.setdefault(parent.key, set()).add(sub)
            if leaf not in self.methods:
                self.methods.append(leaf)
        else:
            self._unknown(name, inventory)

    def _unknown(self, name: str, inventory: Inventory) -> None:
        close = inventory.suggest(name)
        hint = f"; closest: {', '.join(close)}" if close else ""
        raise PlanError(
            f"unknown name {name!r} in preserved attributes: {self.display} has no attribute, "
            f"submodule or method of that name{hint}."
        )

    def _insert_mutable(self, mod: _Module, name: str) -> None:
        value = mod.attrs[name]
        if _is_mutable(value):
            key = self.model.value_key(mod, name)
            self.preserved_values.add(key)
            if not _is_object(value):
                self.preserved_sub |= self.model.sub_keys(mod, name)
        else:
            self.preserved_scalars.add((mod.key, name))

    # -- graphs ----------------------------------------------------------------------------

    def prepare_graphs(self) -> None:
        """Inline every preserved method (and interface calls, as freezing does)."""
        # Without forward or a preserved method, torch analyses nothing and keeps every
        # attribute (scripted nn.LSTM only has forward__0 / forward__1 overloads).
        for method in self.methods:
            graph = self.root.cmod._get_method(method).graph.copy()
            torch._C._jit_pass_inline(graph)
            self._use_graph(graph)
            self._inline_interfaces(graph)
            self._check_supported(graph, method)
            self.graphs[method] = graph
            self._add_context(method, graph, self.root, is_fork=False)

    def _add_context(
        self,
        method: str,
        graph: torch._C.Graph,
        base: _Module,
        is_fork: bool,
        fork_node: torch._C.Node | None = None,
        parent: torch._C.Graph | None = None,
    ) -> None:
        writers = GraphWriters(graph, method, module_types=self.model.module_types, frozen=True)
        self.contexts.append(_Context(method, graph, base, writers, is_fork, fork_node, parent))
        # torch.jit.fork bodies live in a subgraph attribute; freezing inlines and folds
        # them too, against the module handed to the fork (applyToForkSubgraph).
        for node in graph.findAllNodes("prim::fork", True):
            self._use_graph(graph, base)
            sub = node.g("Subgraph").copy()
            torch._C._jit_pass_inline(sub)
            node.g_("Subgraph", sub)
            fork_base: _Module | None = base
            first = node.inputsAt(0) if node.inputsSize() else None
            if first is not None and first.node().kind() == "prim::GetAttr":
                owner = self.find_constant_attr(first.node().inputsAt(0), first.node().s("name"))
                child = owner.children.get(first.node().s("name")) if owner else None
                if owner is None:
                    continue  # the module is preserved: torch leaves the fork alone
                fork_base = child or base
            assert fork_base is not None
            self._add_context(method, sub, fork_base, True, node, graph)

    def _inline_interfaces(self, graph: torch._C.Graph) -> None:
        # freeze_module.cpp retypes each interface-typed GetAttr to the concrete module
        # type and inlines its calls; doing the same lets torch's own inliner do the work.
        interface_slots = {
            (_type_name(n.inputsAt(0).type()), n.s("name"))
            for n in graph.findAllNodes("prim::GetAttr", True)
            if isinstance(n.output().type(), torch._C.InterfaceType)
        }
        for node in graph.findAllNodes("prim::SetAttr", True):
            if (_type_name(node.inputsAt(0).type()), node.s("name")) in interface_slots:
                raise PlanError(
                    f"{self.display} assigns the module interface attribute "
                    f"{node.s('name')!r} (SetAttr on an interface type), which torch cannot "
                    "freeze: keep one implementation per attribute."
                )
        for _ in range(32):
            changed = False
            for node in graph.findAllNodes("prim::GetAttr", True):
                if not isinstance(node.output().type(), torch._C.InterfaceType):
                    continue
                if not self.freeze_interfaces:
                    raise PlanError(
                        f"{self.display} uses module interface attributes and interface "
                        "freezing is off; torch refuses to freeze it that way."
                    )
                resolved = self._resolve_module_path(node.inputsAt(0))
                if resolved is None:
                    raise PlanError(
                        f"{self.display}: freezing cannot resolve interface attribute "
                        f"{node.s('name')!r}."
                    )
                owner = resolved
                concrete = owner.children.get(node.s("name"))
                if concrete is None:
                    continue
                if self.find_constant_attr(node.inputsAt(0), node.s("name")) is None:
                    raise PlanError(
                        f"{self.display}: freezing cannot fold the module interface attribute "
                        f"{node.s('name')!r} because it is preserved or assigned; do not "
                        "preserve interface attributes."
                    )
                self.interface_paths.update(concrete.paths)
                node.output().setType(concrete.cmod._type())
                changed = True
            if not changed:
                return
            torch._C._jit_pass_inline(graph)
            self._use_graph(graph)

    def _check_supported(self, graph: torch._C.Graph, method: str) -> None:
        suspicious = graph.findAllNodes("prim::ModuleContainerIndex", True) + graph.findAllNodes(
            "prim::SetAttr", True
        )
        for node in suspicious:
            kind = node.kind()
            if kind == "prim::ModuleContainerIndex":
                raise PlanError(
                    f"{self.display}: {method} indexes a ModuleList/ModuleDict with a value "
                    "known only at run time (prim::ModuleContainerIndex), which torch cannot "
                    "freeze; index it with a constant or unroll the loop."
                )
            if kind == "prim::SetAttr" and isinstance(
                node.inputsAt(0).type(), torch._C.InterfaceType
            ):
                raise PlanError(
                    f"{self.display}: {method} assigns an attribute of a module interface, "
                    "which torch cannot freeze."
                )
        if method == "forward":
            root_type = self.root.type_name
            for out in graph.outputs():
                t = out.type()
                if isinstance(t, torch._C.ClassType) and t.qualified_name() == root_type:
                    raise PlanError(
                        f"{self.display}: forward returns the module itself (self), which "
                        "torch cannot freeze."
                    )

    # -- GetAttr chains ----------------------------------------------------------------------

    def _module_path_names(self, value: torch._C.Value) -> tuple[str, ...] | None:
        """freeze_module.cpp's _loadModulePath: GetAttr names from ``self`` to ``value``."""
        key = value.unique()
        cache = self._path_cache
        if key in cache:
            return cache[key]
        node = value.node()
        result: tuple[str, ...] | None
        if node.kind() == "prim::Param":
            result = () if key == self._self_unique else None
        elif node.kind() == "prim::GetAttr":
            parent = self._module_path_names(node.inputsAt(0))
            result = None if parent is None else (*parent, node.s("name"))
        else:
            result = None
        cache[key] = result
        return result

    def _resolve_module_path(self, value: torch._C.Value) -> _Module | None:
        names = self._module_path_names(value)
        if names is None:
            return None
        mod = self._base
        for name in names:
            child = mod.children.get(name)
            if child is None:
                return None
            mod = child
        return mod

    def _use_graph(self, graph: torch._C.Graph, base: _Module | None = None) -> None:
        """Point the GetAttr-chain cache at ``graph`` (value ids are per graph)."""
        self._path_cache: dict[int, tuple[str, ...] | None] = {}
        inputs = list(graph.inputs())
        self._self_unique = inputs[0].unique() if inputs else -1
        self._base = base or self.root

    def _is_module_typed(self, value: torch._C.Value) -> bool:
        t = value.type()
        if isinstance(t, torch._C.InterfaceType):
            return True
        return isinstance(t, torch._C.ClassType) and t.qualified_name() in self.model.by_type

    def find_constant_attr(self, value: torch._C.Value, name: str) -> _Module | None:
        """freeze_module.cpp's findConstantAttr: the owner module if foldable, else None."""
        if not self._is_module_typed(value):
            return None
        names = self._module_path_names(value)
        if names is None:
            return None
        mod = self._base
        for sub in names:
            child = mod.children.get(sub)
            if child is None or ("module", child.key) in self.preserved_values:
                return None
            mod = child
        if name not in mod.attrs:
            return None
        attr = mod.attrs[name]
        if not _is_mutable(attr):
            return None if (mod.key, name) in self.preserved_scalars else mod
        if self.model.value_key(mod, name) in self.preserved_values:
            return None
        if not _is_object(attr) and self.model.sub_keys(mod, name) & self.preserved_sub:
            return None
        return mod

    def owner_of(self, value: torch._C.Value) -> _Module | None:
        """The module a GetAttr/SetAttr input refers to, ignoring preservation."""
        if not self._is_module_typed(value):
            return None
        return self._resolve_module_path(value)

    def record_other_reads(self) -> None:
        """Which attributes the *unpreserved* top-level methods would read.

        Freezing deletes methods it does not preserve; an attribute only they read is
        dropped, and the user wants to know which method to preserve to keep it.
        """
        called: set[str] = set()
        for method in self.methods:
            graph = self.root.cmod._get_method(method).graph
            self_unique = next(iter(graph.inputs())).unique()
            for node in graph.findAllNodes("prim::CallMethod", True):
                if node.inputsAt(0).unique() == self_unique:
                    called.add(node.s("name"))
        self.other_reads: dict[tuple[int, str], list[str]] = {}
        for method in sorted(self.root.methods - set(self.methods) - called):
            try:
                graph = self.root.cmod._get_method(method).graph.copy()
                torch._C._jit_pass_inline(graph)
            except RuntimeError:
                continue
            self._use_graph(graph)
            for node in graph.findAllNodes("prim::GetAttr", True):
                owner = self.owner_of(node.inputsAt(0))
                if owner is not None:
                    self.other_reads.setdefault((owner.key, node.s("name")), []).append(method)

    # -- phase 1: mutations across all preserved methods ------------------------------------

    def record_mutations(self) -> None:
        for ctx in self.contexts:
            graph = ctx.graph
            writers = ctx.writers
            self._use_graph(graph, ctx.base)
            used: list[tuple[int, str]] = []
            # Assignments first: a later read of an assigned attribute is never folded.
            nodes = graph.findAllNodes("prim::SetAttr", True) + graph.findAllNodes(
                "prim::GetAttr", True
            )
            for node in nodes:
                kind = node.kind()
                name = node.s("name")
                self._record_fact(node, name, writers)
                mod = self.find_constant_attr(node.inputsAt(0), name)
                if mod is None:
                    continue
                attr = mod.attrs[name]
                if kind == "prim::GetAttr":
                    if _is_object(attr) or not _is_mutable(attr):
                        continue
                    used.append((mod.key, name))
                if kind == "prim::SetAttr" or writers.has_writers(node.output()):
                    self.mutable_slots.add((mod.key, name))
                    self._insert_mutable(mod, name)
            self._check_overlaps(used)

    def _record_fact(self, node: torch._C.Node, name: str, writers: GraphWriters) -> None:
        """Who writes this attribute, for the reasons (independent of the decision)."""
        owner = self.owner_of(node.inputsAt(0))
        if owner is None or name not in owner.attrs:
            return
        slot = (owner.key, name)
        facts = self.facts.setdefault(slot, [])
        if node.kind() == "prim::SetAttr":
            facts.append(_Fact("set-attr", writers.describe_node(node)))
            return
        self.read.add(slot)
        value = owner.attrs[name]
        if _is_object(value) or not _is_mutable(value):
            return
        if writers.has_writers(node.output()):
            found = writers.writers_of(node.output())
            if not found:
                facts.append(_Fact("in-place-write", None, writers.method))
            for writer in found:
                if all(f.writer != writer for f in facts):
                    facts.append(_Fact("in-place-write", writer))

    def _check_overlaps(self, used: list[tuple[int, str]]) -> None:
        # freeze_module.cpp refuses attributes whose values share sub-values (alias
        # analysis cannot track them); report it as torch would, in one sentence. Reads
        # of one value under two names (tied weights) are one entry, as in torch's
        # alias-hashed set.
        self.used.update(dict.fromkeys(used))
        unique: dict[tuple[Any, ...], tuple[_Module, str]] = {}
        for key, name in self.used:
            mod = self.model.modules[key]
            unique.setdefault(self.model.value_key(mod, name), (mod, name))
        seen: dict[tuple[Any, ...], str] = {}
        for mod, name in unique.values():
            path = _join(mod.paths[0], name)
            subs = self.model.sub_keys(mod, name)
            for sub in subs:
                if sub in seen:
                    raise PlanError(
                        f"{self.display}: attributes {seen[sub]!r} and {path!r} hold "
                        "overlapping values (one contains the other), which torch refuses "
                        "to freeze."
                    )
            for sub in subs:
                seen[sub] = path

    # -- phase 2: folding, then torch's clean-up ------------------------------------------------

    def propagate(self) -> None:
        for ctx in self.contexts:
            graph, method = ctx.graph, ctx.method
            self._use_graph(graph, ctx.base)
            first = next(iter(graph.block().nodes()), None)
            constants: dict[tuple[int, str], torch._C.Value | None] = {}
            for node in graph.findAllNodes("prim::GetAttr", True):
                name = node.s("name")
                mod = self.find_constant_attr(node.inputsAt(0), name)
                if mod is None:
                    continue
                slot = (mod.key, name)
                value = mod.attrs[name]
                if not _materializable(value):
                    self.not_materializable.add(slot)
                    continue
                self.folded.setdefault(slot, set()).add(method)
                if slot not in constants:
                    constants[slot] = _insert_constant(graph, first, value)
                constant = constants[slot]
                if constant is not None:
                    node.output().replaceAllUsesWith(constant)
                    node.removeAllInputs()
                else:
                    # Python cannot build this constant (a TorchScript object); torch can,
                    # so the read counts as folded even though it stays in our copy.
                    self.unreplaced.setdefault(id(ctx), set()).add(node.output().unique())
            # The parts of runOptimization that decide which reads survive; dead-code
            # elimination first, as there, to drop the emptied GetAttr nodes.
            torch._C._jit_pass_dce(graph)
            torch._C._jit_pass_constant_propagation(graph)
            torch._C._jit_pass_dce(graph)
        for ctx in reversed(self.contexts):
            if ctx.fork_node is not None and ctx.parent is not None:
                _prune_fork_inputs(ctx.fork_node, ctx.graph)
                torch._C._jit_pass_dce(ctx.parent)

    # -- phase 3: clean-up of the module --------------------------------------------------

    def cleanup(self) -> None:
        for ctx in self.contexts:
            self._record_referenced(ctx)
        for ctx in self.contexts:
            if not ctx.is_fork:
                self._handle_shared_class_type(self.root, ctx.graph)

    def _record_referenced(self, ctx: _Context) -> None:
        graph = ctx.graph
        modules: list[_Module] = [ctx.base]
        unreplaced = self.unreplaced.get(id(ctx), set())
        for node in graph.findAllNodes("prim::GetAttr", True):
            if node.inputsSize() == 0 or node.output().unique() in unreplaced:
                continue
            name = node.s("name")
            input_type = _type_name(node.inputsAt(0).type())
            for mod in list(modules):
                if mod.type_name != input_type or name not in mod.attrs:
                    continue
                self.referenced.add((mod.key, name))
                self._insert_mutable(mod, name)
                child = mod.children.get(name)
                if child is not None and child not in modules:
                    modules.append(child)
        for key, names in self.user_preserved.items():
            mod = self.model.modules[key]
            for name in names:
                self._insert_mutable(mod, name)

    def _escapes(self, mod: _Module, graph: torch._C.Graph) -> bool:
        for out in graph.outputs():
            if _type_name(out.type()) == mod.type_name:
                return True
        return mod.key in self.preserved_submodules

    def _is_kept_slot(self, mod: _Module, name: str) -> bool:
        value = mod.attrs[name]
        if _is_mutable(value):
            return self.model.value_key(mod, name) in self.preserved_values
        return (mod.key, name) in self.preserved_scalars

    def _handle_shared_class_type(self, mod: _Module, graph: torch._C.Graph) -> None:
        if self._escapes(mod, graph):
            self.keep[mod.type_name] = None
            self.escaping.add(mod.key)
            return
        instances = self.instances.setdefault(mod.type_name, [])
        if mod not in instances:
            instances.append(mod)
        kept = self.keep.setdefault(mod.type_name, set())
        for name in mod.order:
            if not self._is_kept_slot(mod, name):
                continue
            if kept is not None:
                kept.add(name)
                self.type_keep_source.setdefault((mod.type_name, name), (mod.key, name))
            child = mod.children.get(name)
            if child is not None:
                self._handle_shared_class_type(child, graph)

    def slot_survives(self, mod: _Module, name: str) -> bool:
        """Whether removeUnusedAttrs leaves ``name`` on ``mod``."""
        if mod.type_name not in self.keep:
            return True
        kept = self.keep[mod.type_name]
        if kept is None or mod not in self.instances.get(mod.type_name, []):
            return True
        return name in kept


def _prune_fork_inputs(fork: torch._C.Node, sub: torch._C.Graph) -> None:
    """Drop fork inputs the (folded) body no longer reads, as torch's clean-up does.

    A fork handed a submodule whose attributes were all folded stops reading it; the
    submodule's GetAttr then dies in the caller and the submodule is removed.
    """
    inputs = list(sub.inputs())
    for i in range(len(inputs) - 1, -1, -1):
        if not inputs[i].uses() and i < fork.inputsSize():
            sub.eraseInput(i)
            fork.removeInput(i)


def _type_name(t: torch._C.Type) -> str:
    if isinstance(t, torch._C.ClassType | torch._C.InterfaceType):
        return str(t.qualified_name())
    return str(t)


def _join(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _insert_constant(
    graph: torch._C.Graph, first: torch._C.Node | None, value: Any
) -> torch._C.Value | None:
    """Insert ``value`` as a constant at the top of ``graph`` (None if Python cannot)."""
    if isinstance(value, torch.Tensor):
        value = value.detach()
    try:
        if first is None:
            return graph.insertConstant(value)
        with graph.insert_point_guard(first):
            return graph.insertConstant(value)
    except (RuntimeError, TypeError, ValueError):
        return None


# ---------------------------------------------------------------------------------------
# Verdicts and reasons.


def _via(writer: Writer) -> str:
    if not writer.written:
        return ""
    name = writer.written[0]
    kind = writer.written_types[0] if writer.written_types else ""
    if kind.startswith(("List[", "Dict(", "Dict[")) or kind.endswith("[]"):
        return f" (on %{name}, a {kind} that holds it)"
    return f" (through %{name})"


def _writer_reason(
    code: str, writer: Writer | None, what: str, method: str, times: int = 1
) -> Reason:
    if writer is None:
        return Reason(
            code,
            f"alias analysis finds a writer of {what} in {method} "
            "(not attributable to a single node)",
            method=method,
        )
    where = f" at {writer.source.short()}" if writer.source else ""
    if code == "set-attr":
        message = f"assigned by prim::SetAttr{where} in {writer.method}"
    else:
        message = f"written in place by {writer.kind}{where} in {writer.method}{_via(writer)}"
    if times > 1:
        message += f" ({times} such nodes after inlining)"
    return Reason(
        code,
        message,
        node=writer.text,
        source=str(writer.source) if writer.source else None,
        method=writer.method,
    )


class _Verdicts:
    """Turns the propagator's state into per-path verdicts with reasons."""

    def __init__(self, prop: _Propagator, inventory: Inventory) -> None:
        self.prop = prop
        self.model = prop.model
        self.inventory = inventory
        self.preserved_methods = set(prop.methods)

    def build(self) -> list[AttributeVerdict]:
        verdicts: list[AttributeVerdict] = []
        present: dict[str, bool] = {}
        for info in self.inventory.attributes:
            owner = self._module_at(info.owner)
            if owner is None:
                continue
            parent_present = info.owner == "" or present.get(info.owner, False)
            survives = parent_present and self.prop.slot_survives(owner, info.name)
            present[info.path] = survives
            verdicts.append(self._verdict(info, owner, survives))
        return verdicts

    def _module_at(self, path: str) -> _Module | None:
        mod = self.model.root
        if not path:
            return mod
        for part in path.split("."):
            child = mod.children.get(part)
            if child is None:
                return None
            mod = child
        return mod

    def _verdict(self, info: AttributeInfo, owner: _Module, present: bool) -> AttributeVerdict:
        slot = (owner.key, info.name)
        if present:
            status = "kept"
            reasons = self._kept_reasons(info, owner, slot)
        elif slot in self.prop.folded or (
            info.kind == "submodule" and self._inlined_module(owner.children[info.name])
        ):
            status = "inlined"
            reasons = self._inlined_reasons(info, owner, slot)
        else:
            status = "dropped"
            reasons = self._dropped_reasons(info, owner, slot)
        if any(p and (info.path == p or info.path.startswith(p + ".")) for p in self._iface()):
            reasons.append(
                Reason(
                    "interface",
                    "reached through a module interface attribute; freezing "
                    "inlines the concrete module's code",
                )
            )
        return AttributeVerdict(info.path, info.kind, info.type, status, tuple(reasons), info)

    def _iface(self) -> set[str]:
        return self.prop.interface_paths

    def _inlined_module(self, mod: _Module) -> bool:
        """A removed submodule counts as inlined when freezing folded something in it."""
        if any((mod.key, name) in self.prop.folded for name in mod.order):
            return True
        return any(self._inlined_module(c) for c in mod.children.values())

    # -- kept ---------------------------------------------------------------------------------

    def _kept_reasons(
        self, info: AttributeInfo, owner: _Module, slot: tuple[int, str]
    ) -> list[Reason]:
        prop = self.prop
        reasons: list[Reason] = []
        user = prop.user_names.get(slot)
        if user is not None:
            reasons.append(Reason("preserved", f"named in preserved attributes ({user!r})"))
        else:
            for ancestor in _ancestors(info.path):
                mod = self._module_at(ancestor)
                if mod is not None and mod.key in prop.preserved_submodules:
                    reasons.append(
                        Reason("preserved", f"under submodule {ancestor!r}, which is preserved")
                    )
                    break
        for ancestor in [info.owner, *_ancestors(info.owner)]:
            mod = self._module_at(ancestor)
            if (
                mod is not None
                and mod.key in prop.escaping
                and mod.key not in prop.preserved_submodules
            ):
                label = ancestor or "the model"
                reasons.append(
                    Reason(
                        "module-kept",
                        f"module {label!r} is returned by a preserved method, "
                        "so freezing keeps it whole",
                    )
                )
                break
        reasons.extend(self._mutation_reasons(slot, info))
        if not any(r.code in ("set-attr", "in-place-write") for r in reasons):
            alias = self._alias_reason(owner, info.name)
            if alias is not None:
                reasons.append(alias)
        if slot in prop.not_materializable and info.kind != "submodule":
            reasons.append(
                Reason(
                    "not-materializable",
                    f"a {info.type} value has no constant form in "
                    "TorchScript IR, so its reads stay prim::GetAttr",
                )
            )
        if info.kind == "submodule":
            child = owner.children[info.name]
            held = [
                n
                for n in child.order
                if prop.slot_survives(child, n) and n not in ("training", "_is_full_backward_hook")
            ] or [n for n in child.order if prop.slot_survives(child, n)]
            if held and not any(r.code in ("preserved", "module-kept") for r in reasons):
                shown = ", ".join(held[:5]) + (", ..." if len(held) > 5 else "")
                reasons.append(Reason("holds-kept", f"holds kept attributes: {shown}"))
        if not reasons and not prop.methods:
            reasons.append(
                Reason(
                    "module-kept",
                    "the model has no forward and no preserved method, so "
                    "freezing analyses nothing and keeps every attribute (preserve a method, "
                    "e.g. --preserve forward__0, to freeze it)",
                )
            )
        if not reasons:
            source = prop.type_keep_source.get((owner.type_name, info.name))
            if source is not None and source != slot:
                other = self.model.modules[source[0]]
                reasons.append(
                    Reason(
                        "shared-type",
                        f"{_join(other.paths[0], info.name)!r} has the same "
                        f"TorchScript class ({owner.type_name.rsplit('.', 1)[-1]}) and keeps "
                        "this attribute, so every instance keeps it",
                    )
                )
            elif slot in prop.referenced:
                reasons.append(
                    Reason(
                        "referenced", "a prim::GetAttr that reads it survives freezing's clean-up"
                    )
                )
            elif prop.keep.get(owner.type_name, set()) is None or owner.key in prop.escaping:
                reasons.append(Reason("module-kept", "its module is kept whole"))
            else:
                reasons.append(Reason("referenced", "freezing keeps this slot of its module"))
        return reasons

    def _mutation_reasons(self, slot: tuple[int, str], info: AttributeInfo) -> list[Reason]:
        # One reason per (kind, source line, method): a helper inlined twenty times
        # writes from twenty nodes, but the user has one line to look at.
        grouped: dict[tuple[Any, ...], list[_Fact]] = {}
        for fact in self.prop.facts.get(slot, []):
            if fact.writer is not None and fact.writer.method not in self.preserved_methods:
                continue
            w = fact.writer
            key = (fact.code, w.kind, str(w.source), w.method) if w else (fact.code, fact.detail)
            grouped.setdefault(key, []).append(fact)
        reasons: list[Reason] = []
        for facts in grouped.values():
            fact = facts[0]
            method = fact.writer.method if fact.writer else fact.detail
            reasons.append(
                _writer_reason(fact.code, fact.writer, repr(info.path), method, len(facts))
            )
        return reasons

    def _alias_reason(self, owner: _Module, name: str) -> Reason | None:
        mine = self.model.sub_keys(owner, name)
        for other_slot, facts in self.prop.facts.items():
            if other_slot == (owner.key, name):
                continue
            if not any(f.code in ("set-attr", "in-place-write") for f in facts):
                continue
            other = self.model.modules[other_slot[0]]
            if other_slot[1] not in other.attrs or _is_object(other.attrs[other_slot[1]]):
                continue
            if mine & self.model.sub_keys(other, other_slot[1]):
                other_path = _join(other.paths[0], other_slot[1])
                return Reason(
                    "aliases-mutable",
                    f"shares memory with {other_path!r}, which is written in a preserved "
                    "method, so it cannot be a constant either",
                )
        for key in self.prop.user_names:
            other = self.model.modules[key[0]]
            if key == (owner.key, name) or _is_object(other.attrs[key[1]]):
                continue
            if mine & self.model.sub_keys(other, key[1]):
                return Reason(
                    "aliases-mutable",
                    f"shares memory with preserved attribute {self.prop.user_names[key]!r}",
                )
        return None

    # -- inlined / dropped ------------------------------------------------------------------

    def _inlined_reasons(
        self, info: AttributeInfo, owner: _Module, slot: tuple[int, str]
    ) -> list[Reason]:
        if info.kind == "submodule":
            return [
                Reason(
                    "folded",
                    "its methods were inlined and its attributes folded; "
                    "the submodule itself is removed",
                )
            ]
        methods = sorted(self.prop.folded.get(slot, set()))
        where = ", ".join(methods) if methods else "a preserved method"
        return [
            Reason(
                "folded",
                f"read in {where} and folded into the graph as a constant",
                method=methods[0] if methods else None,
            )
        ]

    def _dropped_reasons(
        self, info: AttributeInfo, owner: _Module, slot: tuple[int, str]
    ) -> list[Reason]:
        prop = self.prop
        if info.kind == "submodule" and slot in prop.read:
            return [
                Reason(
                    "unused",
                    "its code was inlined but reads none of its attributes, so freezing removes it",
                )
            ]
        if slot in prop.read:
            reasons = [
                Reason(
                    "dead-code",
                    "only read in code that freezing removes once "
                    "attributes are folded (for example an `if self.training:` "
                    "branch), so it disappears with its module",
                )
            ]
            for fact in prop.facts.get(slot, []):
                reasons.append(
                    _writer_reason(
                        fact.code,
                        fact.writer,
                        repr(info.path),
                        fact.writer.method if fact.writer else fact.detail,
                    )
                )
            return reasons
        other = sorted(set(self._other_readers(info, owner)))
        if other:
            names = ", ".join(other[:3])
            msg = (
                f"read only by {names}, which freezing does not preserve "
                f"(--preserve {other[0]} keeps it)"
            )
        else:
            msg = "no preserved method reads it"
        return [Reason("unused", msg)]

    def _other_readers(self, info: AttributeInfo, owner: _Module) -> list[str]:
        reads = self.prop.other_reads
        found = list(reads.get((owner.key, info.name), []))
        if info.kind == "submodule":
            stack = [owner.children[info.name]]
            while stack and not found:
                mod = stack.pop()
                for name in mod.order:
                    found.extend(reads.get((mod.key, name), []))
                stack.extend(mod.children.values())
        return found


def _ancestors(path: str) -> list[str]:
    parts = path.split(".")
    return [".".join(parts[:i]) for i in range(len(parts) - 1, 0, -1)]


# ---------------------------------------------------------------------------------------


def _as_loaded(model: Any) -> LoadedModel:
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, str | os.PathLike):
        return load_model(Path(model))
    if isinstance(model, torch.jit.ScriptModule):
        return LoadedModel.from_module(model)
    raise BadInputError(
        f"{type(model).__name__} is not a TorchScript module or a path to one: "
        "script or trace it first (torch.jit.script / torch.jit.trace)."
    )


def explain(
    model: Any,
    preserved_attrs: Iterable[str] = (),
    *,
    methods: Iterable[str] = (),
    freeze_interfaces: bool = True,
) -> Explanation:
    """Say, for every attribute, whether ``torch.jit.freeze`` inlines, keeps or drops it.

    Args:
        model: a ``torch.jit.ScriptModule``, a :class:`LoadedModel`, or a path to a
            TorchScript file.
        preserved_attrs: as for ``torch.jit.freeze``: attribute, submodule or method
            names (dotted names reach into submodules).
        methods: more methods to preserve (the same as naming them in preserved_attrs).
        freeze_interfaces: fold through module interfaces, as ``torch.jit.freeze`` does.

    Returns:
        An :class:`Explanation` with one :class:`AttributeVerdict` per attribute path.

    Raises:
        PlanError: unknown preserved name (with the closest names), a training-mode
            module, or a module torch cannot freeze.

    Example::

        exp = explain(torch.jit.script(MyModule().eval()), preserved_attrs=["version"])
        for verdict in exp.with_status("kept"):
            print(verdict.path, verdict.reasons[0].message)
    """
    start = time.perf_counter()
    loaded = _as_loaded(model)
    check_eval(loaded)
    names = [n for n in [*preserved_attrs, *methods] if n]
    names = list(dict.fromkeys(names))
    iterators: dict[int, Any] = {}
    inventory = build_inventory(loaded.module, iterators)
    display = str(loaded.path) if loaded.path else loaded.name
    cmod = raw_module(loaded.module)
    model_view = _Model(cmod, iterators)
    prop = _Propagator(model_view, names, inventory, freeze_interfaces, display)
    try:
        prop.prepare_graphs()
        prop.record_other_reads()
        prop.record_mutations()
        prop.propagate()
        prop.cleanup()
    except RuntimeError as exc:
        first = (str(exc).strip().splitlines() or ["unknown error"])[0]
        raise PlanError(f"{display} cannot be frozen: torch says {first[:200]}") from exc
    verdicts = _Verdicts(prop, inventory).build()
    return Explanation(
        model=display,
        torch_version=torch.__version__,
        preserved_attrs=tuple(n for n in names if n not in prop.methods),
        methods=tuple(prop.methods),
        attributes=verdicts,
        inventory=inventory,
        seconds=time.perf_counter() - start,
        warnings=list(loaded.warnings),
    )
