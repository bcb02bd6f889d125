"""freeze_module.cpp's decisions, replayed on copies of a model's graphs.

``torch._C._freeze_module`` decides attribute by attribute what to fold, keep or remove
(``AttributePropagator`` in ``torch/csrc/jit/passes/freeze_module.cpp``) and says
nothing about why. :class:`FreezeReplay` takes the same decisions in the same order, on
copies of the method graphs, and remembers every fact behind them (who writes what,
what could not be a constant, which slots a class type keeps) for
:mod:`freezeview.engine.reasons.verdicts` to turn into reasons. The model is never touched.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch

from ..graph import Inventory
from ..plumbing import PlanError
from .module_objects import (
    ModuleObject,
    ModuleView,
    is_mutable,
    is_object,
    join_path,
    materializable,
)
from .mutation import GraphWriters, Writer
from .refusals import refusal, unknown_name
from .replay_graphs import (
    GraphContext,
    ReplayGraphs,
    insert_constant,
    type_name,
)

__all__ = ["FreezeReplay", "WriteFact"]

# Nodes between two pauses of a long stage (a few ms of the replay's work).
_PAUSE_EVERY = 2000

# ---------------------------------------------------------------------------------------
# freeze_module.cpp's AttributePropagator, decision by decision.


@dataclass
class WriteFact:
    """One fact behind an attribute's fate: a reason code and the node that writes it."""

    code: str
    writer: Writer | None = None
    detail: str = ""


class FreezeReplay(ReplayGraphs):
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
        # The constants folding put in each graph (by context index): value id -> slot.
        self.constant_slots: dict[int, dict[int, tuple[int, str]]] = {}
        self.not_materializable: set[tuple[int, str]] = set()
        self.unreplaced: dict[int, set[int]] = {}
        self.used: dict[tuple[int, str], None] = {}
        self.referenced: set[tuple[int, str]] = set()
        # Submodules a surviving torch.jit.fork is handed, with that fork node.
        self.forked: dict[tuple[int, str], Writer] = {}
        self.escaping: set[int] = set()
        self.interface_paths: set[str] = set()
        self.keep: dict[str, set[str] | None] = {}  # type -> kept slot names (None = all)
        self.instances: dict[str, list[ModuleObject]] = {}
        # The keys of every list in `instances`: asked once per attribute.
        self.instance_keys: set[int] = set()
        self.type_keep_source: dict[tuple[str, str], tuple[int, str]] = {}
        #: Called every few thousand nodes of the long stages (explain's ``pause``).
        self.pause: Callable[[], None] = _no_pause

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
        raise PlanError(unknown_name(name, self.display, inventory.suggest(name)))

    def _insert_mutable(self, mod: ModuleObject, name: str) -> None:
        value = mod.attrs[name]
        if is_mutable(value):
            key = self.model.value_key(mod, name)
            self.preserved_values.add(key)
            if not is_object(value):
                self.preserved_sub |= self.model.sub_keys(mod, name)
        else:
            self.preserved_scalars.add((mod.key, name))

    def record_other_reads(self) -> None:
        """Which attributes the *unpreserved* top-level methods would read.

        Freezing deletes methods it does not preserve; an attribute only they read is
        dropped, and the user wants to know which method to preserve to keep it.
        """
        called: set[str] = set()
        for method in self.methods:
            graph = self.root.cmod._get_method(method).graph
            self_unique = next(iter(graph.inputs())).unique()
            for node in graph.findAllNodes("prim::CallMethod", True):  # type: ignore[attr-defined]
                if node.inputsAt(0).unique() == self_unique:
                    called.add(node.s("name"))
        self.other_reads: dict[tuple[int, str], list[str]] = {}
        for method in sorted(self.root.methods - set(self.methods) - called):
            self.pause()
            try:
                graph = self.root.cmod._get_method(method).graph.copy()
                torch._C._jit_pass_inline(graph)
            except RuntimeError:
                continue
            self._use_graph(graph)
            for node in graph.findAllNodes("prim::GetAttr", True):  # type: ignore[attr-defined]
                owner = self.owner_of(node.inputsAt(0))
                if owner is not None:
                    self.other_reads.setdefault((owner.key, node.s("name")), []).append(method)

    # -- phase 1: mutations across all preserved methods ------------------------------------

    def record_mutations(self) -> None:
        # freeze_module.cpp walks a torch.jit.fork body with a copy of its propagator
        # (``std::bind(&AttributePropagator::recordMutableAttrs, *this, ...)``): what the
        # copy records as written is lost, so a write inside a fork's body keeps nothing
        # and torch folds the attribute anyway. The write is still a fact for the reasons
        # (``written-constant``, or a write the frozen graph no longer makes).
        for ctx in self.contexts:
            graph = ctx.graph
            writers = ctx.writers
            self._use_graph(graph, ctx.base)
            used: list[tuple[int, str]] = []
            # Assignments first: a later read of an assigned attribute is never folded.
            nodes = graph.findAllNodes("prim::SetAttr", True) + graph.findAllNodes(  # type: ignore[attr-defined]
                "prim::GetAttr", True
            )
            for i, node in enumerate(nodes, 1):
                if not i % _PAUSE_EVERY:
                    self.pause()
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
                if ctx.is_fork:
                    continue
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
        # As freeze_module.cpp runs it: every graph of a method is folded first (its
        # forks' bodies included), then optimized, the graph holding a fork before the
        # fork's body. Dead-code elimination of the holding graph drops the fork inputs
        # the body no longer reads; a body that still reads its module then (the GetAttr
        # of a submodule, which no constant replaces, is only cleaned up with the body
        # afterwards) keeps that module on the frozen model.
        for index, ctx in enumerate(self.contexts):
            self.constant_slots[index] = self._fold(ctx)
        for ctx in self.contexts:
            # The parts of runOptimization that decide which reads survive; dead-code
            # elimination first, as there, to drop the emptied GetAttr nodes.
            self.pause()  # each of torch's passes holds the GIL: a run goes first here
            torch._C._jit_pass_dce(ctx.graph)
            self.pause()
            # torch's ConstantPropagation eliminates dead code itself when it changes the
            # graph (constant_propagation.cpp), so no second pass is needed here.
            torch._C._jit_pass_constant_propagation(ctx.graph)

    def _fold(self, ctx: GraphContext) -> dict[int, tuple[int, str]]:
        """Replace each foldable ``prim::GetAttr`` of one graph by its constant; the
        constants inserted, by value id, with the slot each holds."""
        graph, method = ctx.graph, ctx.method
        self._use_graph(graph, ctx.base)
        first = next(iter(graph.block().nodes()), None)
        constants: dict[tuple[int, str], torch._C.Value | None] = {}
        kept_reads: dict[int, tuple[int, str]] = {}
        reads = graph.findAllNodes("prim::GetAttr", True)  # type: ignore[attr-defined]
        for i, node in enumerate(reads, 1):
            if not i % _PAUSE_EVERY:
                self.pause()
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
                constants[slot] = insert_constant(graph, first, value, node.output())
                if constants[slot] is not None:
                    # The next one goes before this one: torch numbers a block's nodes
                    # for their order, and inserting thousands of nodes at one place
                    # between two nodes renumbers the whole graph every forty or so,
                    # where putting each in front of the block's first node does not.
                    first = constants[slot].node()  # type: ignore[union-attr]
            constant = constants[slot]
            if constant is not None:
                node.output().replaceAllUsesWith(constant)
                node.removeAllInputs()
            else:
                # Python cannot build this constant (a TorchScript object); torch can,
                # so the read counts as folded even though it stays in our copy.
                self.unreplaced.setdefault(id(ctx), set()).add(node.output().unique())
                kept_reads[node.output().unique()] = slot
        made = {value.unique(): slot for slot, value in constants.items() if value is not None}
        return made | kept_reads

    # -- phase 3: clean-up of the module --------------------------------------------------

    def cleanup(self) -> None:
        for ctx in self.contexts:
            if not _module_handed_over(ctx):
                self._record_referenced(ctx)
        for ctx in self.contexts:
            if not ctx.is_fork:
                self._handle_shared_class_type(self.root, ctx.graph)

    def _record_referenced(self, ctx: GraphContext) -> None:
        # As recordReferencedAttrs: each GetAttr marks its name on every module met so
        # far whose type is the GetAttr input's. The modules are kept by type, and each
        # (type, name) remembers how many of that type it has marked: marking is the
        # same every time, so a later GetAttr of it only marks the modules met since
        # (a fork handed the read still names itself on all of them).
        graph = ctx.graph
        by_type: dict[str, list[ModuleObject]] = {ctx.base.type_name: [ctx.base]}
        met = {ctx.base.key}
        marked: dict[tuple[str, str], int] = {}
        unreplaced = self.unreplaced.get(id(ctx), set())
        for node in graph.findAllNodes("prim::GetAttr", True):  # type: ignore[attr-defined]
            if node.inputsSize() == 0 or node.output().unique() in unreplaced:
                continue
            name = node.s("name")
            input_type = type_name(node.inputsAt(0).type())
            same_type = by_type.get(input_type, [])
            end = len(same_type)
            fork = _fork_taking(node.output())
            if fork is not None:
                for mod in same_type[:end]:
                    if name in mod.attrs:
                        self.forked.setdefault((mod.key, name), ctx.writers.describe_node(fork))
            start = marked.get((input_type, name), 0)
            marked[(input_type, name)] = end
            for mod in same_type[start:end]:
                if name not in mod.attrs:
                    continue
                self.referenced.add((mod.key, name))
                self._insert_mutable(mod, name)
                child = mod.children.get(name)
                if child is not None and child.key not in met:
                    met.add(child.key)
                    by_type.setdefault(child.type_name, []).append(child)
        for key, names in self.user_preserved.items():
            mod = self.model.modules[key]
            for name in names:
                self._insert_mutable(mod, name)

    def _escapes(self, mod: ModuleObject, graph: torch._C.Graph) -> bool:
        for out in graph.outputs():
            if type_name(out.type()) == mod.type_name:  # type: ignore[arg-type]
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
        if mod.key not in self.instance_keys:
            self.instance_keys.add(mod.key)
            self.instances.setdefault(mod.type_name, []).append(mod)
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
        if kept is None or mod.key not in self.instance_keys:
            return True
        return name in kept


def _no_pause() -> None:
    """No pause (a replay nobody waits on)."""


def _fork_taking(value: torch._C.Value) -> torch._C.Node | None:
    """The ``prim::fork`` that takes ``value`` as the module its body runs on, if any."""
    for use in value.uses():
        if use.user.kind() == "prim::fork" and use.offset == 0:
            return use.user
    return None


def _module_handed_over(ctx: GraphContext) -> bool:
    """Whether ``ctx`` is the body of a fork still handed a submodule by a ``prim::GetAttr``.

    freeze_module.cpp's recordReferencedAttrs reaches that GetAttr first and keeps the
    submodule, which then counts as preserved: the fork's body is not walked, so what it
    still reads of the submodule is not kept (a fork nested in that body loses its module).
    """
    if not ctx.is_fork or ctx.fork_node is None or ctx.fork_node.inputsSize() == 0:
        return False
    feeder = ctx.fork_node.inputsAt(0).node()
    return feeder.kind() == "prim::GetAttr" and isinstance(
        feeder.output().type(), torch._C.ClassType | torch._C.InterfaceType
    )
