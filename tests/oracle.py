"""What real torch does to a module when it freezes it, computed in the test run.

freezeview's verdicts (inlined / kept / dropped) and its stepwise pipeline are checked
against torch itself, never against answers recorded from an earlier run. This module
asks torch:

- which attribute paths survive on the frozen module (:func:`frozen_attribute_paths`);
- which attributes torch folded into the graph as constants
  (:func:`torch_inlined_paths`), read from torch's own freezing log: with the logging
  option ``>>freeze_module``, ``freeze_module.cpp`` writes one line per folded
  ``prim::GetAttr``, ``[UPDATE freeze_module.cpp:NNN] Folding GetAttr %v with
  self.a.b``, to the process's C-level stderr (file descriptor 2, not ``sys.stderr``);
- the resulting per-path status (:func:`status_from_torch`);
- a comparable signature of a graph (:func:`frozen_graph_signature`).
"""

from __future__ import annotations

import contextlib
import os
import re
import sys
import tempfile
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

__all__ = [
    "FreezeLog",
    "attribute_paths",
    "capture_fd2",
    "freeze_with_log",
    "frozen_attribute_paths",
    "frozen_graph_signature",
    "module_aliases",
    "refreeze",
    "status_from_torch",
    "torch_freeze",
    "torch_inlined_paths",
]

# GRAPH_UPDATE line written by AttributePropagator::propagateAttributes. The constant's
# debug name is "self." + the GetAttr chain walked from the method's module + the name.
_FOLD_LINE = re.compile(r"Folding GetAttr %(?P<value>\S+) with (?P<const>\S+)\s*$")
# The one line AttributePropagator writes per prim::GetAttr reading a module: folded, no
# constant form, or a slot that cannot be folded.
_MODULE_READ = re.compile(r"Folding GetAttr |is not materializable\.|attribute: \S+ is mutable\.")

ModuleLike = torch.jit.ScriptModule | torch._C.ScriptModule


def _cmodule(module: ModuleLike) -> torch._C.ScriptModule:
    """The C++ module behind a Python ScriptModule (or the argument itself)."""
    return module._c if isinstance(module, torch.jit.ScriptModule) else module


def attribute_paths(module: ModuleLike) -> dict[str, Any]:
    """Every attribute of ``module`` and of its submodules, by dotted path.

    Args:
        module: a ScriptModule (Python wrapper or ``torch._C.ScriptModule``).

    Returns:
        ``{"conv.weight": tensor, "conv": <module>, "training": False, ...}`` covering
        parameters, buffers, plain attributes (including ``training``) and submodules.
    """
    try:
        iterators = torch._C._jit_debug_module_iterators(_cmodule(module))
    except RuntimeError:
        # An instance of a TorchScript class whose Python source is not importable here
        # cannot become a Python object: list the slots one by one instead.
        return _slot_by_slot_paths(_cmodule(module))
    return dict(iterators["named_attributes_r"])


def _named_modules(module: ModuleLike) -> list[tuple[str, torch._C.ScriptModule]]:
    """``named_modules`` (the root as ``""``), in torch's order."""
    cmod = _cmodule(module)
    subs = [
        (p, v) for p, v in attribute_paths(cmod).items() if isinstance(v, torch._C.ScriptModule)
    ]
    return [("", cmod), *sorted(subs, key=lambda item: item[0].split("."))]


def _slot_by_slot_paths(cmod: torch._C.ScriptModule) -> dict[str, Any]:
    from freezeview.engine.graph.module_slots import module_iterators

    paths: dict[str, Any] = {}
    for name, value in module_iterators(cmod)["named_attributes"]:
        paths[name] = value
        if isinstance(value, torch._C.ScriptModule):
            paths.update({f"{name}.{sub}": v for sub, v in _slot_by_slot_paths(value).items()})
    return paths


def frozen_attribute_paths(frozen: ModuleLike) -> set[str]:
    """Every dotted attribute path still present on a frozen module.

    Args:
        frozen: the result of ``torch.jit.freeze`` or ``torch._C._freeze_module``.

    Returns:
        The set of paths (parameters, buffers, plain attributes, submodules).
    """
    return set(attribute_paths(frozen))


@contextlib.contextmanager
def capture_fd2() -> Iterator[list[str]]:
    """Capture everything written to file descriptor 2 inside the block.

    torch's C++ logging writes to ``std::cerr``, below Python's ``sys.stderr``, so the
    descriptor itself is redirected into a temporary file. The yielded list receives the
    captured lines when the block exits.
    """
    lines: list[str] = []
    sys.stderr.flush()
    saved = os.dup(2)
    with tempfile.TemporaryFile(mode="w+b") as sink:
        os.dup2(sink.fileno(), 2)
        try:
            yield lines
        finally:
            sys.stderr.flush()
            os.dup2(saved, 2)
            os.close(saved)
            sink.seek(0)
            lines.extend(sink.read().decode("utf-8", "replace").splitlines())


@dataclass
class FreezeLog:
    """The result of one logged ``torch._C._freeze_module`` call.

    Attributes:
        frozen: the frozen C++ module.
        lines: every line torch logged (UPDATE and DEBUG levels).
        folded: the constant names of the "Folding GetAttr" lines, in log order, without
            ``self.``: relative to the module torch was propagating at that moment, which
            is the root except inside a ``torch.jit.fork`` of a submodule.
        paths: the same constants as attribute paths from the root
            (``"branch.weight"`` for a fork of ``branch`` logging ``self.weight``).
    """

    frozen: torch._C.ScriptModule
    lines: list[str] = field(default_factory=list)
    folded: list[str] = field(default_factory=list)
    paths: list[str] = field(default_factory=list)


def _type_name(module: torch._C.ScriptModule) -> str:
    # freeze_module.cpp logs `type()->name()->name()`: the last part of the qualified
    # name, free of the `___torch_mangle_N` namespace.
    return module._type().qualified_name().rsplit(".", 1)[-1]


def _getattr_chain(value: torch._C.Value, self_value: torch._C.Value) -> list[str] | None:
    """Attribute names from ``self`` to ``value`` (``self.a.b`` -> ["a", "b"]), if any."""
    names: list[str] = []
    # pybind hands out a new wrapper per access: compare the values' unique ids.
    while value.unique() != self_value.unique():
        node = value.node()
        if node.kind() != "prim::GetAttr":
            return None
        names.append(node.s("name"))
        value = node.inputsAt(0)
    return names[::-1]


@dataclass(frozen=True)
class _ForkBody:
    """A ``torch.jit.fork`` body torch freezes against a submodule (``path``)."""

    path: str
    type_name: str
    module_reads: int  # prim::GetAttr nodes reading a module: one freezing log line each
    parent: int  # the enclosing body's index, -1 for a method's graph


def _fork_bodies(module: torch.jit.ScriptModule, methods: Sequence[str]) -> list[_ForkBody]:
    """The fork bodies of ``methods`` handed a submodule, in the order torch freezes them.

    Inside such a fork torch propagates attributes relative to the forked submodule, so
    its log names ``self.weight`` for what is ``branch.weight`` from the root, and it
    writes no line where the body ends: the body's module reads say where.
    """
    named = dict(_named_modules(module))
    module_types = {sub._type().qualified_name() for sub in named.values()}
    bodies: list[_ForkBody] = []

    def reads_module(node: torch._C.Node) -> bool:
        t = node.inputsAt(0).type()
        if isinstance(t, torch._C.InterfaceType):
            return True
        return isinstance(t, torch._C.ClassType) and t.qualified_name() in module_types

    def visit(graph: torch._C.Graph, prefix: list[str], parent: int) -> None:
        self_value = next(iter(graph.inputs()))
        for node in _walk_nodes(graph.block(), into_forks=False):
            if node.kind() != "prim::fork":
                continue
            first = list(node.inputs())[:1]
            chain = _getattr_chain(first[0], self_value) if first else None
            sub_prefix = prefix + chain if chain else prefix
            body = node.g("Subgraph").copy()
            torch._C._jit_pass_inline(body)
            # A fork not handed a submodule is frozen against the current module.
            path = ".".join(sub_prefix)
            reads = sum(
                1
                for inner in _walk_nodes(body.block(), into_forks=False)
                if inner.kind() == "prim::GetAttr" and reads_module(inner)
            )
            bodies.append(_ForkBody(path, _type_name(named[path]), reads, parent))
            visit(body, sub_prefix, len(bodies) - 1)

    for name in methods:
        if not module._c._has_method(name):
            continue
        graph = module._c._get_method(name).graph.copy()
        torch._C._jit_pass_inline(graph)
        visit(graph, [], -1)
    return bodies


def freeze_with_log(
    module: torch.jit.ScriptModule, preserved_attrs: Sequence[str] = ()
) -> FreezeLog:
    """Run ``torch._C._freeze_module`` with torch's freezing log switched on.

    The logging option is process-wide, so it is restored whatever happens.

    Args:
        module: an eval-mode ScriptModule (left unchanged: torch freezes a clone).
        preserved_attrs: as for ``torch.jit.freeze``.

    Returns:
        The frozen module and the parsed log.
    """
    previous = torch._C._jit_get_logging_option()
    torch._C._jit_set_logging_option(">>freeze_module")
    try:
        with capture_fd2() as lines:
            frozen = torch._C._freeze_module(module._c, list(preserved_attrs))
    finally:
        torch._C._jit_set_logging_option(previous)

    methods = ["forward", *preserved_attrs]
    bodies = _fork_bodies(module, methods)
    # Each "Freezing Module: T" line starts propagating one graph: a preserved method's
    # (on the root) or, after it, a fork body's (on the forked submodule): the next body
    # of type T inside the current one. Folding lines name constants relative to the
    # innermost body; a body ends once its module reads are all logged, and a name that
    # does not resolve there is tried on the enclosing bodies, then the root.
    known = attribute_paths(module)
    stack: list[list[int]] = []  # [body index, module reads left]
    used: set[int] = set()
    in_method = False
    log = FreezeLog(frozen=frozen, lines=lines)
    for line in lines:
        if "Propagating function:" in line:
            stack, in_method = [], False
            continue
        if "Freezing Module:" in line:
            if not in_method:
                in_method = True
                continue
            type_name = line.rsplit(":", 1)[1].strip()
            # A body whose reads are all logged may still hold this fork (the GetAttr
            # handing its module over was its last read): it ends only when it does not.
            while True:
                parent = stack[-1][0] if stack else -1
                found = [
                    i
                    for i, body in enumerate(bodies)
                    if i not in used and body.parent == parent and body.type_name == type_name
                ]
                if found or not stack:
                    break
                stack.pop()
            used.add(found[0])
            stack.append([found[0], bodies[found[0]].module_reads])
        elif _MODULE_READ.search(line):
            while stack and stack[-1][1] <= 0:
                stack.pop()
            if match := _FOLD_LINE.search(line):
                name = match["const"].removeprefix("self.")
                log.folded.append(name)
                bases = [bodies[i].path for i, _ in reversed(stack)] + [""]
                candidates = [f"{base}.{name}" if base else name for base in bases]
                log.paths.append(next((c for c in candidates if c in known), name))
            if stack:
                stack[-1][1] -= 1
    return log


def torch_freeze(
    module: torch.jit.ScriptModule,
    preserved_attrs: Sequence[str] = (),
    optimize_numerics: bool = True,
) -> torch.jit.ScriptModule:
    """``torch.jit.freeze`` with its DeprecationWarning silenced (torch 2.5+ warns).

    An already-frozen module has no ``training`` attribute, which ``torch.jit.freeze``
    reads before anything else (``AttributeError``); torch's freezing itself accepts such
    a module, so the rest of ``torch.jit.freeze`` is called as it calls it.
    """
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        if module._c.hasattr("training"):
            return torch.jit.freeze(
                module, preserved_attrs=list(preserved_attrs), optimize_numerics=optimize_numerics
            )
        return refreeze(module, preserved_attrs, optimize_numerics)


def refreeze(
    module: torch.jit.ScriptModule,
    preserved_attrs: Sequence[str] = (),
    optimize_numerics: bool = True,
) -> torch.jit.ScriptModule:
    """``torch.jit.freeze``'s own steps (torch/jit/_freeze.py) without its training check.

    For a module torch has frozen already: its ``training`` flag was folded and removed,
    so ``torch.jit.freeze``'s first line cannot read it.
    """
    frozen = torch.jit.RecursiveScriptModule(
        torch._C._freeze_module(module._c, list(preserved_attrs))
    )
    torch.jit.RecursiveScriptModule._finalize_scriptmodule(frozen)
    methods = [name for name in preserved_attrs if module._c._has_method(name)]
    torch.jit.run_frozen_optimizations(frozen, optimize_numerics, methods)
    return frozen


def module_aliases(module: ModuleLike) -> dict[str, str]:
    """Map every submodule path to a canonical path of the same module object.

    A pre-scripted module assigned twice (``s = torch.jit.script(Sub()); self.a = s;
    self.b = s``) is one C++ object reachable by two paths. Python offers no identity for
    C++ modules, so sharing is probed: flip ``training`` on one module and see which
    others of the same type follow, then flip it back. (Scripting an ``nn.Module`` that
    is assigned twice produces two distinct objects that only share tensors.)

    Args:
        module: the original ScriptModule.

    Returns:
        ``{"b": "a", "a": "a", "": "", ...}``: each module path to the first path, in
        ``named_modules`` order, of the same object.
    """
    named = _named_modules(module)
    canonical: dict[str, str] = {}
    for index, (path, sub) in enumerate(named):
        if path in canonical:
            continue
        canonical[path] = path
        others = [
            (other_path, other)
            for other_path, other in named[index + 1 :]
            if other_path not in canonical and other._type() == sub._type()
        ]
        if not others or not sub.hasattr("training"):
            continue
        before = sub.getattr("training")
        try:
            sub.setattr("training", not before)
            for other_path, other in others:
                if other.getattr("training") != before:
                    canonical[other_path] = path
        finally:
            sub.setattr("training", before)
    return canonical


def _canonical_attr(path: str, aliases: dict[str, str]) -> str:
    owner, _, name = path.rpartition(".")
    owner = aliases.get(owner, owner)
    return f"{owner}.{name}" if owner else name


def torch_inlined_paths(
    module: torch.jit.ScriptModule,
    preserved_attrs: Sequence[str] = (),
    log: FreezeLog | None = None,
) -> set[str]:
    """The attribute paths torch folds into constants when it freezes ``module``.

    Read from torch's own log. Every path of the original module that reaches the same
    module object and attribute name as a logged constant counts as folded, so a shared
    submodule's attribute is folded under every path it has.

    Args:
        module: the original eval-mode ScriptModule.
        preserved_attrs: as for ``torch.jit.freeze``.
        log: a :class:`FreezeLog` already computed for this module and plan.

    Returns:
        Dotted paths of the original module (never submodules themselves: torch cannot
        make a module a constant).
    """
    log = log or freeze_with_log(module, preserved_attrs)
    aliases = module_aliases(module)
    folded = {_canonical_attr(path, aliases) for path in log.paths}
    return {path for path in attribute_paths(module) if _canonical_attr(path, aliases) in folded}


def status_from_torch(
    module: torch.jit.ScriptModule, preserved_attrs: Sequence[str] = ()
) -> dict[str, str]:
    """torch's verdict for every attribute path of ``module``.

    ``kept``: the path is still on ``torch.jit.freeze(module, preserved_attrs)`` (or
    another path to the same object and name is); ``inlined``: torch folded it into a
    graph as a constant and did not keep it; ``dropped``: neither.

    torch never folds a module itself (a module has no constant form). A submodule that
    is not kept counts as ``inlined`` when torch folded something under it (its code was
    inlined and its contents became constants) and as ``dropped`` when nothing under it
    was folded.

    Args:
        module: the original eval-mode ScriptModule.
        preserved_attrs: as for ``torch.jit.freeze``.

    Returns:
        ``{path: "inlined" | "kept" | "dropped"}`` over every path of
        :func:`attribute_paths` of the original module.
    """
    aliases = module_aliases(module)
    kept = {
        _canonical_attr(path, aliases)
        for path in frozen_attribute_paths(torch_freeze(module, preserved_attrs))
    }
    inlined = torch_inlined_paths(module, preserved_attrs)
    paths = attribute_paths(module)
    status: dict[str, str] = {}
    for path, value in paths.items():
        contents_folded = isinstance(value, torch._C.ScriptModule) and any(
            inner.startswith(f"{path}.") for inner in inlined
        )
        if _canonical_attr(path, aliases) in kept:
            status[path] = "kept"
        elif path in inlined or contents_folded:
            status[path] = "inlined"
        else:
            status[path] = "dropped"
    return status


def _walk_nodes(block: torch._C.Block, into_forks: bool = True) -> Iterable[torch._C.Node]:
    for node in block.nodes():
        yield node
        for sub in node.blocks():
            yield from _walk_nodes(sub, into_forks)
        # A forked call's body lives in a subgraph attribute, not in a block; freezing
        # folds attributes there too, so it belongs to the signature.
        if into_forks and node.kind() == "prim::fork" and node.hasAttribute("Subgraph"):
            yield from _walk_nodes(node.g("Subgraph").block(), into_forks)


def frozen_graph_signature(graph: torch._C.Graph) -> Counter[str]:
    """Node kinds and their counts over every nested block of ``graph``.

    Args:
        graph: a TorchScript graph (e.g. ``frozen.graph``).

    Returns:
        ``Counter({"aten::conv2d": 3, "prim::Constant": 12, ...})``, including the
        nodes of ``prim::fork`` subgraphs.
    """
    return Counter(node.kind() for node in _walk_nodes(graph.block()))
