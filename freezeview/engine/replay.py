"""freeze_module.cpp's decisions, replayed on copies of a model's graphs.

``torch._C._freeze_module`` decides attribute by attribute what to fold, keep or remove
(``AttributePropagator`` in ``torch/csrc/jit/passes/freeze_module.cpp``) and says
nothing about why. :class:`FreezeReplay` takes the same decisions in the same order, on
copies of the method graphs, and remembers every fact behind them (who writes what,
what could not be a constant, which slots a class type keeps) for
:mod:`freezeview.engine.verdicts` to turn into reasons. The model is never touched.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from .errors import PlanError
from .inventory import Inventory, module_iterators
from .mutation import GraphWriters, Writer

__all__ = [
    "FreezeReplay",
    "GraphContext",
    "ModuleObject",
    "ModuleView",
    "WriteFact",
    "is_mutable",
    "is_object",
    "join_path",
    "materializable",
    "refusal",
    "torch_refusal",
]

# Why torch refuses to freeze a model, in one sentence with the fix. The replay raises
# these itself; `torch_refusal` maps torch's own messages (from `_freeze_module`) onto
# them, so every command says the same thing whichever code path met the problem first.
_REFUSALS: dict[str, str] = {
    "returns-self": (
        "{model}: forward returns the module itself (self), which torch cannot freeze; "
        "return tensors (or preserve the method that needs the module) instead."
    ),
    "container-index": (
        "{model}: {method} indexes a ModuleList/ModuleDict with a value known only at run "
        "time (prim::ModuleContainerIndex), which torch cannot freeze; index it with a "
        "constant or unroll the loop."
    ),
    "interface-setattr": (
        "{model} assigns the module interface attribute {name} (SetAttr on an interface "
        "type), which torch cannot freeze: keep one implementation per attribute."
    ),
    "interface-preserved": (
        "{model}: freezing cannot fold the module interface attribute {name} because it is "
        "preserved or assigned; do not preserve interface attributes."
    ),
    "interfaces-off": (
        "{model} uses module interface attributes and interface freezing is off; torch "
        "refuses to freeze it that way."
    ),
    "overlapping": (
        "{model}: two attributes {name}hold overlapping values (one contains the other), "
        "which torch refuses to freeze; keep each tensor in one attribute."
    ),
    "training": (
        "{model} holds a module in training mode, and freezing needs eval mode: pass --eval "
        "(or call .eval() on the module before saving it)."
    ),
    "submodule-method": (
        "{model}: a preserved method of a submodule reads that submodule's attribute {name}, "
        "which torch's freezing looks up on the top-level module, so torch cannot freeze it "
        "this way; preserve the submodule itself instead."
    ),
    "unknown-name": (
        "unknown name {name} in preserved attributes: {model} has no attribute, submodule "
        "or method of that name."
    ),
}

# torch's own wording (freeze_module.cpp, torch/jit/_freeze.py) -> refusal key.
_TORCH_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"freeze a module that returns? itself"), "returns-self"),
    (re.compile(r"ModuleContainerIndex"), "container-index"),
    (re.compile(r"SetAttr on an interface type.*?'(?P<name>[^']+)'", re.S), "interface-setattr"),
    (re.compile(r"failed to freeze interface attribute '(?P<name>[^']+)'"), "interface-preserved"),
    (re.compile(r"module that uses interface attributes"), "interfaces-off"),
    (re.compile(r"attributes values that overlaps"), "overlapping"),
    (re.compile(r"only implemented for modules in eval mode"), "training"),
    (re.compile(r"Unknown name: (?P<name>\S+)"), "unknown-name"),
    (re.compile(r"does not have a field with name '(?P<name>[^']+)'"), "submodule-method"),
)


def refusal(key: str, model: str, *, method: str = "forward", name: str = "") -> str:
    """The one-sentence reason torch cannot freeze ``model`` (see ``_REFUSALS``)."""
    return _REFUSALS[key].format(model=model, method=method, name=name)


def torch_refusal(message: str, model: str) -> str:
    """Turn torch's refusal to freeze into freezeview's sentence for it.

    Args:
        message: the text of the RuntimeError torch raised (``_freeze_module``,
            ``torch.jit.freeze``).
        model: how to name the model (its file).

    Returns:
        The matching sentence from freezeview's table, or ``torch refused to freeze
        MODEL: <torch's first line>`` for a refusal freezeview does not know yet.
    """
    for pattern, key in _TORCH_MESSAGES:
        found = pattern.search(message)
        if found is not None:
            name = found.groupdict().get("name") or ""
            return refusal(key, model, name=repr(name) if name else "")
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    first = lines[0] if lines else "no reason given"
    return f"torch refused to freeze {model}: {first[:200]}"


class ModuleObject:
    """One C++ module object of the model (a module shared under two names is one)."""

    __slots__ = ("attrs", "children", "cmod", "key", "methods", "order", "paths", "type_name")

    def __init__(self, key: int, cmod: torch._C.ScriptModule) -> None:
        self.key = key
        self.cmod = cmod
        self.paths: list[str] = []
        self.type_name: str = cmod._type().qualified_name()
        self.attrs: dict[str, Any] = {}
        self.order: list[str] = []
        self.children: dict[str, ModuleObject] = {}
        self.methods: set[str] = set(cmod._method_names())


_SCALARS = (bool, int, float, complex, str, torch.device, torch.dtype, type(None))


# Values torch's tryInsertConstant has no constant form for.
_NOT_CONSTANT_TYPES: tuple[type, ...] = tuple(
    t for t in (getattr(torch, "Generator", None), getattr(torch._C, "Future", None)) if t
)


def is_object(value: Any) -> bool:
    """An object (module, TorchScript class instance, custom class), not plain data.

    TorchScript class instances come back to Python as instances of their Python class,
    so anything that is not a tensor, container or scalar counts.
    """
    if isinstance(value, torch._C.ScriptModule | torch.ScriptObject):
        return True
    return not isinstance(value, (torch.Tensor, list, dict, tuple, *_SCALARS, *_NOT_CONSTANT_TYPES))


def is_mutable(value: Any) -> bool:
    """AliasDb::isMutableType on the value's runtime type."""
    if isinstance(value, torch.Tensor | list | dict) or is_object(value):
        return True
    if isinstance(value, tuple):
        return any(is_mutable(v) for v in value)
    return False


def materializable(value: Any) -> bool:
    """Whether torch's tryInsertConstant can turn ``value`` into a graph constant."""
    if isinstance(value, list | tuple | dict) or _opaque_container(value):
        return _insertable(value)
    if isinstance(value, (torch._C.ScriptModule, *_NOT_CONSTANT_TYPES)):
        return False
    # Non-module TorchScript objects are copied to weak compilation references.
    return is_object(value) or _insertable(value)


def _insertable(value: Any) -> bool:
    """constants.cpp's insertableIValue: what a constant (or a constant list) may hold.

    An object is a constant only on its own, never inside a list, tuple or dict.
    """
    if isinstance(value, torch.Tensor):
        return not (value.is_sparse or value.is_mkldnn or value.is_nested)
    if isinstance(value, _SCALARS):
        return True
    if isinstance(value, list | tuple):
        return all(_insertable(v) for v in value)
    if isinstance(value, dict):
        return all(_insertable(k) and _insertable(v) for k, v in value.items())
    return False


def _opaque_container(value: Any) -> bool:
    # module_slots.OpaqueObject standing for a container of objects (List[__torch__.X]).
    name = getattr(value, "type_name", "")
    return type(value).__name__ == "OpaqueObject" and name.startswith(("List[", "Dict[", "Tuple["))


def _tensor_key(t: torch.Tensor) -> tuple[str, int]:
    # IValue alias identity for tensors is the storage (freeze_module.cpp uses
    # HashAliasedIValues), so views and tied weights share a key.
    try:
        return ("storage", int(t.untyped_storage()._cdata))
    except (RuntimeError, NotImplementedError):
        return ("tensor", id(t))


class ModuleView:
    """Module objects of a model and helpers to name and compare attribute values."""

    def __init__(self, root: torch._C.ScriptModule, cache: dict[int, Any] | None = None) -> None:
        self._cache = cache
        self.modules: list[ModuleObject] = []
        self.by_type: dict[str, list[ModuleObject]] = {}
        self.root = self._visit(root, "")

    def _visit(self, cmod: torch._C.ScriptModule, path: str) -> ModuleObject:
        for known in self.by_type.get(cmod._type().qualified_name(), []):
            if known.cmod == cmod:
                known.paths.append(path)
                return known
        mod = ModuleObject(len(self.modules), cmod)
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

    def value_key(self, mod: ModuleObject, name: str) -> tuple[Any, ...]:
        value = mod.attrs[name]
        if isinstance(value, torch.Tensor):
            return _tensor_key(value)
        if name in mod.children:
            return ("module", mod.children[name].key)
        return ("slot", mod.key, name)

    def sub_keys(self, mod: ModuleObject, name: str) -> set[tuple[Any, ...]]:
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
class WriteFact:
    code: str
    writer: Writer | None = None
    detail: str = ""


@dataclass
class GraphContext:
    """One graph freezing analyses: a preserved method, or a ``prim::fork`` subgraph in it.

    ``base`` is the module the graph's first input stands for (``self``, or the
    submodule a fork was handed).
    """

    method: str
    graph: torch._C.Graph
    base: ModuleObject
    writers: GraphWriters
    is_fork: bool = False
    fork_node: torch._C.Node | None = None
    parent: torch._C.Graph | None = None


class FreezeReplay:
    """Replays freezing's decisions on copies of the method graphs."""

    def __init__(
        self,
        model: ModuleView,
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
        self.sub_methods: list[str] = []  # preserved methods of submodules ("tool.square")
        self.method_holders: dict[tuple[int, str], str] = {}  # slot -> the method it holds
        self.graphs: dict[str, torch._C.Graph] = {}
        self.contexts: list[GraphContext] = []
        # What happened to each attribute slot, keyed by (module key, name).
        self.facts: dict[tuple[int, str], list[WriteFact]] = {}
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
        self.instances: dict[str, list[ModuleObject]] = {}
        self.type_keep_source: dict[tuple[str, str], tuple[int, str]] = {}

        if "forward" in self.root.methods:
            self.methods.append("forward")
        for name in preserved_attrs:
            self._check_name(name, inventory)

    # -- preserved_attrs -----------------------------------------------------------------

    def _check_name(self, name: str, inventory: Inventory) -> None:
        parts = name.split(".")
        mod = self.root
        chain: list[tuple[ModuleObject, str]] = []
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
            for parent, sub in chain:
                self.user_preserved.setdefault(parent.key, set()).add(sub)
                self.method_holders.setdefault((parent.key, sub), name)
            if mod is not self.root:
                # torch preserves a submodule's method too (its graph is frozen against
                # the top-level module, so it may read none of its own attributes).
                self.sub_methods.append(name)
            elif leaf not in self.methods:
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

    def _insert_mutable(self, mod: ModuleObject, name: str) -> None:
        value = mod.attrs[name]
        if is_mutable(value):
            key = self.model.value_key(mod, name)
            self.preserved_values.add(key)
            if not is_object(value):
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
        base: ModuleObject,
        is_fork: bool,
        fork_node: torch._C.Node | None = None,
        parent: torch._C.Graph | None = None,
    ) -> None:
        writers = GraphWriters(graph, method, module_types=self.model.module_types, frozen=True)
        self.contexts.append(GraphContext(method, graph, base, writers, is_fork, fork_node, parent))
        # torch.jit.fork bodies live in a subgraph attribute; freezing inlines and folds
        # them too, against the module handed to the fork (applyToForkSubgraph).
        for node in graph.findAllNodes("prim::fork", True):
            self._use_graph(graph, base)
            sub = node.g("Subgraph").copy()
            torch._C._jit_pass_inline(sub)
            node.g_("Subgraph", sub)
            fork_base: ModuleObject | None = base
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
                    refusal("interface-setattr", self.display, name=repr(node.s("name")))
                )
        for _ in range(32):
            changed = False
            for node in graph.findAllNodes("prim::GetAttr", True):
                if not isinstance(node.output().type(), torch._C.InterfaceType):
                    continue
                if not self.freeze_interfaces:
                    raise PlanError(refusal("interfaces-off", self.display))
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
                        refusal("interface-preserved", self.display, name=repr(node.s("name")))
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
                raise PlanError(refusal("container-index", self.display, method=method))
            if kind == "prim::SetAttr" and isinstance(
                node.inputsAt(0).type(), torch._C.InterfaceType
            ):
                raise PlanError(
                    refusal("interface-setattr", self.display, name=repr(node.s("name")))
                )
        if method == "forward":
            root_type = self.root.type_name
            for out in graph.outputs():
                t = out.type()
                if isinstance(t, torch._C.ClassType) and t.qualified_name() == root_type:
                    raise PlanError(refusal("returns-self", self.display))

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

    def _resolve_module_path(self, value: torch._C.Value) -> ModuleObject | None:
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

    def _use_graph(self, graph: torch._C.Graph, base: ModuleObject | None = None) -> None:
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

    def find_constant_attr(self, value: torch._C.Value, name: str) -> ModuleObject | None:
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
        if not is_mutable(attr):
            return None if (mod.key, name) in self.preserved_scalars else mod
        if self.model.value_key(mod, name) in self.preserved_values:
            return None
        if not is_object(attr) and self.model.sub_keys(mod, name) & self.preserved_sub:
            return None
        return mod

    def owner_of(self, value: torch._C.Value) -> ModuleObject | None:
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
                    if is_object(attr) or not is_mutable(attr):
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
            facts.append(WriteFact("set-attr", writers.describe_node(node)))
            return
        self.read.add(slot)
        value = owner.attrs[name]
        if is_object(value) or not is_mutable(value):
            return
        if writers.has_writers(node.output()):
            found = writers.writers_of(node.output())
            if not found:
                facts.append(WriteFact("in-place-write", None, writers.method))
            present = {f.writer for f in facts}
            for writer in found:
                if writer not in present:
                    present.add(writer)
                    facts.append(WriteFact("in-place-write", writer))

    def _check_overlaps(self, used: list[tuple[int, str]]) -> None:
        # freeze_module.cpp refuses attributes whose values share sub-values (alias
        # analysis cannot track them); report it as torch would, in one sentence. Reads
        # of one value under two names (tied weights) are one entry, as in torch's
        # alias-hashed set.
        self.used.update(dict.fromkeys(used))
        unique: dict[tuple[Any, ...], tuple[ModuleObject, str]] = {}
        for key, name in self.used:
            mod = self.model.modules[key]
            unique.setdefault(self.model.value_key(mod, name), (mod, name))
        seen: dict[tuple[Any, ...], str] = {}
        for mod, name in unique.values():
            path = join_path(mod.paths[0], name)
            subs = self.model.sub_keys(mod, name)
            for sub in subs:
                if sub in seen:
                    raise PlanError(
                        refusal("overlapping", self.display, name=f"({seen[sub]!r} and {path!r}) ")
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
                if not materializable(value):
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

    def _record_referenced(self, ctx: GraphContext) -> None:
        graph = ctx.graph
        modules: list[ModuleObject] = [ctx.base]
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

    def _escapes(self, mod: ModuleObject, graph: torch._C.Graph) -> bool:
        for out in graph.outputs():
            if _type_name(out.type()) == mod.type_name:
                return True
        return mod.key in self.preserved_submodules

    def _is_kept_slot(self, mod: ModuleObject, name: str) -> bool:
        value = mod.attrs[name]
        if is_mutable(value):
            return self.model.value_key(mod, name) in self.preserved_values
        return (mod.key, name) in self.preserved_scalars

    def _handle_shared_class_type(self, mod: ModuleObject, graph: torch._C.Graph) -> None:
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

    def slot_survives(self, mod: ModuleObject, name: str) -> bool:
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


def join_path(prefix: str, name: str) -> str:
    return f"{prefix}.{name}" if prefix else name


def _detached(value: Any) -> Any:
    """``value`` with every tensor in it detached, as freezing's overrideGradient does.

    A tensor that requires grad has no constant form; a list of parameters (a scripted
    RNN's ``_flat_weights``) would otherwise not fold in the replay while torch folds it.
    """
    if isinstance(value, torch.Tensor):
        return value.detach()
    if isinstance(value, list):
        return [_detached(v) for v in value]
    if isinstance(value, tuple):
        return tuple(_detached(v) for v in value)
    if isinstance(value, dict):
        return {k: _detached(v) for k, v in value.items()}
    return value


def _insert_constant(
    graph: torch._C.Graph, first: torch._C.Node | None, value: Any
) -> torch._C.Value | None:
    """Insert ``value`` as a constant at the top of ``graph`` (None if Python cannot)."""
    value = _detached(value)
    try:
        if first is None:
            return graph.insertConstant(value)
        with graph.insert_point_guard(first):
            return graph.insertConstant(value)
    except (RuntimeError, TypeError, ValueError):
        if not isinstance(value, torch.ScriptObject):
            return None
    # An object built by TorchScript code (a quantized Linear's packed params, set up by
    # its module's __setstate__) holds a strong reference to its compilation unit, which
    # insertConstant refuses; freezing copies it to a weak reference first, which Python
    # cannot. The replay only needs a constant of the right type in its place.
    node = graph.create("prim::Constant")
    node.ival_("value", value)
    node.output().setType(value._type())
    if first is None:
        return graph.insertNode(node).output()
    with graph.insert_point_guard(first):
        return graph.insertNode(node).output()
