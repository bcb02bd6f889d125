"""The graphs freezing analyses, prepared as freeze_module.cpp prepares them.

Copies of the preserved methods' graphs, inlined, with module interface calls resolved
and ``prim::fork`` bodies added as graphs of their own; the checks that make torch
refuse a model; and the GetAttr chains that say which module object a value stands for.
:class:`ReplayGraphs` is the base of :class:`~.replay.FreezeReplay`, which holds the
state these methods read (declared here) and takes the decisions on these graphs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch

from ..graph import ScriptEnum
from ..plumbing import PlanError
from .module_objects import ModuleObject, ModuleView, is_mutable, is_object
from .mutation import GraphWriters
from .refusals import refusal

__all__ = [
    "GraphContext",
    "ReplayGraphs",
    "insert_constant",
    "type_name",
]


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
    #: The context of the graph holding this fork (an index into the contexts), -1 for a
    #: method's own graph.
    parent_index: int = -1
    #: How many ``prim::GetAttr`` nodes of a module read the graph had before folding
    #: (its forks' bodies apart): torch's freezing log writes one line for each.
    module_reads: int = 0


class ReplayGraphs:
    """Graph preparation and GetAttr-chain lookups of :class:`~.replay.FreezeReplay`."""

    # Set by FreezeReplay.__init__.
    model: ModuleView
    root: ModuleObject
    display: str
    freeze_interfaces: bool
    preserved_values: set[tuple[Any, ...]]
    preserved_sub: set[tuple[Any, ...]]
    preserved_scalars: set[tuple[int, str]]
    methods: list[str]
    graphs: dict[str, torch._C.Graph]
    contexts: list[GraphContext]
    interface_paths: set[str]
    #: Called between torch's bigger calls (explain's ``pause``: a run goes first there).
    pause: Callable[[], None]

    # -- graphs ----------------------------------------------------------------------------

    def prepare_graphs(self) -> None:
        """Inline every preserved method (and interface calls, as freezing does)."""
        # Without forward or a preserved method, torch analyses nothing and keeps every
        # attribute (scripted nn.LSTM only has forward__0 / forward__1 overloads).
        for i, method in enumerate(self.methods):
            if i:
                self.pause()
            graph = self.root.cmod._get_method(method).graph.copy()
            torch._C._jit_pass_inline(graph)
            self.pause()  # inlining a big model's graph holds the GIL for a while
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
        parent_index: int = -1,
    ) -> None:
        self.pause()  # torch's alias analysis of a big graph holds the GIL a while
        writers = GraphWriters(graph, method, module_types=self.model.module_types, frozen=True)
        writers.pause = self.pause
        index = len(self.contexts)
        # Only a fork body's count is read (torch_paths.fork_bodies): a method's own
        # graph is not walked for it.
        reads = (
            len(
                [
                    node
                    for node in graph.findAllNodes("prim::GetAttr", True)  # type: ignore[attr-defined]
                    if self._is_module_typed(node.inputsAt(0))
                ]
            )
            if is_fork
            else 0
        )
        self.contexts.append(
            GraphContext(
                method, graph, base, writers, is_fork, fork_node, parent, parent_index, reads
            )
        )
        # torch.jit.fork bodies live in a subgraph attribute; freezing inlines and folds
        # them too, against the module handed to the fork (applyToForkSubgraph).
        for node in graph.findAllNodes("prim::fork", True):  # type: ignore[attr-defined]
            self._use_graph(graph, base)
            self.pause()
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
            self._add_context(method, sub, fork_base, True, node, graph, index)

    def _inline_interfaces(self, graph: torch._C.Graph) -> None:
        # freeze_module.cpp retypes each interface-typed GetAttr to the concrete module
        # type and inlines its calls; doing the same lets torch's own inliner do the work.
        interface_slots = {
            (type_name(n.inputsAt(0).type()), n.s("name"))
            for n in graph.findAllNodes("prim::GetAttr", True)  # type: ignore[attr-defined]
            if isinstance(n.output().type(), torch._C.InterfaceType)
        }
        if not interface_slots:
            return  # no interface-typed read: nothing below would change or refuse
        for node in graph.findAllNodes("prim::SetAttr", True):  # type: ignore[attr-defined]
            if (type_name(node.inputsAt(0).type()), node.s("name")) in interface_slots:
                raise PlanError(
                    refusal("interface-setattr", self.display, name=repr(node.s("name")))
                )
        for _ in range(32):
            changed = False
            for node in graph.findAllNodes("prim::GetAttr", True):  # type: ignore[attr-defined]
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
            self.pause()
            torch._C._jit_pass_inline(graph)
            self._use_graph(graph)

    def _check_supported(self, graph: torch._C.Graph, method: str) -> None:
        suspicious = graph.findAllNodes("prim::ModuleContainerIndex", True) + graph.findAllNodes(  # type: ignore[attr-defined]
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


def type_name(t: torch._C.Type) -> str:
    """A class or interface type's qualified name, any other type's printout."""
    if isinstance(t, torch._C.ClassType | torch._C.InterfaceType):
        return str(t.qualified_name())  # type: ignore[union-attr]
    return str(t)


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


def _enum_constant(
    graph: torch._C.Graph, first: torch._C.Node | None, member: ScriptEnum, typed: torch._C.Value
) -> torch._C.Value:
    """A constant for an enum member whose Python class is not importable here.

    Python cannot build the member, but the code that reads an enum attribute compares
    it with members: a copy of the graph's own constant of that member is the constant
    freezing inserts. Without one, an uninitialized value of the enum's type stands in
    (the attribute's read is gone, as after freezing; comparisons with it stay).
    """
    wanted = f"{member.type_name}.{member.name}"
    source = next(
        (
            node
            for node in graph.findAllNodes("prim::Constant", True)  # type: ignore[attr-defined]
            if isinstance(node.output().type(), torch._C.EnumType)
            and str(node).split("[value=", 1)[-1].split("]", 1)[0].endswith(wanted)
        ),
        None,
    )
    if source is not None:
        node = graph.createClone(source, lambda v: v)  # type: ignore[attr-defined]
    else:
        node = graph.create("prim::Uninitialized")  # type: ignore[call-arg]
        node.output().setType(typed.type())
    if first is None:
        return graph.insertNode(node).output()
    with graph.insert_point_guard(first):
        return graph.insertNode(node).output()


def insert_constant(
    graph: torch._C.Graph,
    first: torch._C.Node | None,
    value: Any,
    read: torch._C.Value | None = None,
) -> torch._C.Value | None:
    """Insert ``value`` as a constant at the top of ``graph`` (None if Python cannot).

    ``read`` is the ``prim::GetAttr`` output the constant replaces (its type is the
    constant's, for an enum member Python cannot build).
    """
    if isinstance(value, ScriptEnum) and read is not None:
        return _enum_constant(graph, first, value, read)
    value = _detached(value)
    try:
        if first is None:
            return graph.insertConstant(value)  # type: ignore[attr-defined]
        with graph.insert_point_guard(first):
            return graph.insertConstant(value)  # type: ignore[attr-defined]
    except (RuntimeError, TypeError, ValueError):
        if not isinstance(value, torch.ScriptObject):
            return None
    # An object built by TorchScript code (a quantized Linear's packed params, set up by
    # its module's __setstate__) holds a strong reference to its compilation unit, which
    # insertConstant refuses; freezing copies it to a weak reference first, which Python
    # cannot. The replay only needs a constant of the right type in its place.
    node = graph.create("prim::Constant")  # type: ignore[call-arg]
    node.ival_("value", value)  # type: ignore[arg-type]
    node.output().setType(value._type())
    if first is None:
        return graph.insertNode(node).output()
    with graph.insert_point_guard(first):
        return graph.insertNode(node).output()
