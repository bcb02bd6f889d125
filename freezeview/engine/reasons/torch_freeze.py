"""What torch's real freeze does with a model: the statuses freezeview shows.

freezeview explains freezing; torch decides it. :func:`torch_outcome` runs
``torch._C._freeze_module`` (the call ``torch.jit.freeze`` makes before its graph
optimizations, which never add or remove attributes) on the model and plan, and reads
two facts off the result:

* the attribute paths still present on the frozen module (``kept``);
* the attributes torch folded into constants, from torch's own freezing log: with the
  logging option ``>>freeze_module``, ``freeze_module.cpp`` writes one line per folded
  ``prim::GetAttr`` (``[UPDATE freeze_module.cpp:716] Folding GetAttr %x with
  self.conv.weight``) to the process's C-level standard error.

:func:`torch_statuses` turns them into ``inlined`` / ``kept`` / ``dropped`` per path.
freezeview's replay of freeze_module.cpp (:mod:`.replay`) only supplies the reasons.
torch freezes a clone: the model itself is never modified.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from ..graph import attribute_paths, attribute_values
from ..plumbing import capture_stderr_fd

__all__ = [
    "FREEZE_LOG_LINE",
    "ForkBody",
    "TorchOutcome",
    "folded_paths",
    "module_statuses",
    "release_clone",
    "torch_outcome",
    "torch_statuses",
]

# The GRAPH_UPDATE line AttributePropagator writes for each folded prim::GetAttr; the
# constant is named "self." + the GetAttr chain from the graph's module.
_FOLD_LINE = re.compile(r"Folding GetAttr %\S+ with self\.(?P<path>\S+)\s*$")
# torch's freezing log lines (``torch._C._jit_set_logging_option('>>freeze_module')``).
FREEZE_LOG_LINE = re.compile(r"^\[(DUMP|UPDATE|DEBUG) freeze_module\.cpp:\d+\]")


@dataclass(frozen=True, slots=True)
class TorchOutcome:
    """What ``torch._C._freeze_module`` did with one model and plan.

    Attributes:
        kept: attribute paths (submodules included) present on the frozen module.
        folded: the constants torch's log says it folded, as attribute chains from the
            module of the graph being frozen (``"conv.weight"``), in log order.
        log: torch's freezing log lines (for ``--debug`` and bug reports).
        seconds: how long torch's freeze took, log capture included.
        frozen: the frozen C++ module itself (the stepwise pipeline shows it; explain
            only reads the fields above).
    """

    kept: frozenset[str]
    folded: tuple[str, ...]
    log: tuple[str, ...]
    seconds: float
    frozen: Any = field(default=None, compare=False, repr=False)


def torch_outcome(
    cmod: torch._C.ScriptModule,
    preserved_attrs: Sequence[str] = (),
    freeze_interfaces: bool = True,
) -> TorchOutcome:
    """Freeze a clone of ``cmod`` with torch and report what it kept and folded.

    Args:
        cmod: the C++ module (``module._c``), in eval mode.
        preserved_attrs: as for ``torch.jit.freeze``.
        freeze_interfaces: as for ``torch.jit.freeze``.

    Returns:
        A :class:`TorchOutcome`.

    Raises:
        RuntimeError: torch refuses to freeze the model (its own message).
    """
    start = time.perf_counter()
    # The logging option is the process's, as is the descriptor captured: both are set
    # inside the capture, which one thread holds at a time. (Set before it, a freeze
    # waiting for the capture -- an explain the user abandoned still freezing -- found
    # logging switched off again by the one before, and its folds went unseen.)
    with capture_stderr_fd(FREEZE_LOG_LINE) as lines:
        previous = torch._C._jit_get_logging_option()
        torch._C._jit_set_logging_option(">>freeze_module")
        try:
            frozen = torch._C._freeze_module(cmod, list(preserved_attrs), freeze_interfaces)
        finally:
            torch._C._jit_set_logging_option(previous)
    folded = tuple(found["path"] for line in lines if (found := _FOLD_LINE.search(line)))
    return TorchOutcome(
        kept=frozenset(attribute_paths(frozen)),
        folded=folded,
        log=tuple(lines),
        seconds=time.perf_counter() - start,
        frozen=frozen,
    )


# What freeze_module.cpp's AttributePropagator writes while it walks a graph: the module
# a graph (or a fork's body) is frozen against, and one line per prim::GetAttr of a module
# (folded, a value with no constant form, or a slot that stays).
_FREEZING_MODULE = re.compile(r"Freezing Module: (?P<type>\S+)\s*$")
_MODULE_READ = re.compile(
    r"\] (?:(?P<module>\w+) is not materializable\."
    r"|attribute: \w+ is (?:not materializable|mutable)\."
    r"|Folding GetAttr )"
)


@dataclass(frozen=True, slots=True)
class ForkBody:
    """A ``torch.jit.fork`` body freezing folds against a module: how to read torch's log.

    torch logs the constants it folds in a fork's body relative to the module the fork
    was handed, after a ``Freezing Module: <type>`` line, and writes no line where the body
    ends; one line per module read tells where it does.

    Attributes:
        path: the module's path (its first, when it has several).
        type_name: its TorchScript class name as torch's log writes it (``Branch``).
        attr: the name of the ``prim::GetAttr`` that hands the module to the fork.
        module_reads: ``prim::GetAttr`` nodes of a module in the body (nested forks apart).
        parent: the index of the body holding this fork, -1 for a method's graph.
    """

    path: str
    type_name: str
    attr: str
    module_reads: int
    parent: int = -1


def folded_paths(
    log: Sequence[str], paths: Mapping[str, bool], bodies: Sequence[ForkBody] = ()
) -> list[str]:
    """The attribute path of every constant torch's freezing log says it folded.

    A method's own graph names constants from the root; a fork's body from the module
    the fork was handed. The log is read in order: each ``Freezing Module`` line after a
    method's first opens the next fork body of that type (the one whose module the
    preceding ``... is not materializable`` line named, when several could be), and the
    body ends after its module reads. Two forks of submodules of one type are told apart
    by their order, never by chance.

    Args:
        log: torch's freezing log lines (:attr:`TorchOutcome.log`).
        paths: every attribute path of the model (mapped to whether it is a submodule).
        bodies: the fork bodies of the preserved methods, each graph's forks in order.

    Returns:
        Full attribute paths, in log order; a name that resolves nowhere stays as logged.
    """
    found: list[str] = []
    stack: list[list[int]] = []  # [body index (-1: unknown), module reads left]
    used: set[int] = set()
    in_method = False
    pending = ""
    for line in log:
        if "Propagating function:" in line:
            stack, in_method, pending = [], False, ""
            continue
        if entered := _FREEZING_MODULE.search(line):
            if not in_method:
                in_method = True  # the method's own graph, frozen against the root
                continue
            # A body whose reads are all logged may still hold this fork (the GetAttr
            # handing the module over was its last read): it ends only when it does not.
            while True:
                parent = stack[-1][0] if stack else -1
                same = [
                    i
                    for i, body in enumerate(bodies)
                    if i not in used and body.parent == parent and body.type_name == entered["type"]
                ]
                if same or not stack or stack[-1][1] != 0:
                    break
                stack.pop()
            named = [i for i in same if bodies[i].attr == pending]
            chosen = (named or same or [-1])[0]
            used.add(chosen)
            stack.append([chosen, bodies[chosen].module_reads if chosen >= 0 else -1])
            pending = ""
            continue
        read = _MODULE_READ.search(line)
        if read is None:
            continue
        while stack and stack[-1][1] == 0:
            stack.pop()  # every read of that body is logged: it has ended
        if read["module"]:
            pending = read["module"]
        if (fold := _FOLD_LINE.search(line)) is not None:
            found.append(_resolve(fold["path"], stack, bodies, paths))
        if stack and stack[-1][1] > 0:
            stack[-1][1] -= 1
    return found


def _resolve(
    name: str, stack: list[list[int]], bodies: Sequence[ForkBody], paths: Mapping[str, bool]
) -> str:
    """``name`` (logged relative to the innermost body) as a path from the root."""
    bases = [bodies[i].path for i, _ in reversed(stack) if i >= 0]
    if stack and stack[-1][0] < 0:
        bases += [body.path for body in bodies]  # an unknown body: any fork's module
    for base in [*bases, ""]:
        full = f"{base}.{name}" if base else name
        if full in paths:
            return full
    return name


def torch_statuses(
    outcome: TorchOutcome,
    paths: Mapping[str, bool],
    canonical: Mapping[str, str],
    fork_bodies: Sequence[ForkBody] = (),
) -> dict[str, str]:
    """torch's status for every attribute path of the original model.

    Args:
        outcome: what torch's freeze did.
        paths: every attribute path of the original model, mapped to whether it is a
            submodule.
        canonical: each path to one name of the same (module object, attribute) slot,
            so a submodule shared under two names gets one status.
        fork_bodies: the ``torch.jit.fork`` bodies torch froze against a submodule: its
            log names the constants folded there relative to that submodule
            (:func:`folded_paths`).

    Returns:
        ``{path: "kept" | "inlined" | "dropped"}``: kept when torch's frozen module
        still has it; inlined when torch folded it into a constant (a submodule: when
        something under it was folded, its code having been inlined); dropped otherwise.
    """
    kept = {canonical.get(path, path) for path in outcome.kept}
    folded = {
        canonical.get(full, full)
        for full in (folded_paths(outcome.log, paths, fork_bodies) if fork_bodies else ())
        if full in paths
    }
    if not fork_bodies:
        folded = {canonical.get(name, name) for name in outcome.folded if name in paths}
    # A submodule counts as inlined when anything under it was folded.
    folded_prefixes = {p.rsplit(".", i)[0] for p in folded for i in range(1, p.count(".") + 1)}
    statuses: dict[str, str] = {}
    for path, is_module in paths.items():
        key = canonical.get(path, path)
        if key in kept:
            statuses[path] = "kept"
        elif key in (folded_prefixes if is_module else folded):
            statuses[path] = "inlined"
        else:
            statuses[path] = "dropped"
    return statuses


def module_statuses(
    outcome: TorchOutcome, cmod: torch._C.ScriptModule
) -> tuple[dict[str, str], frozenset[str]] | None:
    """torch's status for every attribute path of ``cmod``, from one listing by torch.

    The statuses :func:`torch_statuses` gives with explain's module view, without that
    view: torch lists every attribute path with its value in one call, and a submodule
    shared under several names is named by the first of them (the order of that listing
    is the module view's depth-first declaration order).

    Args:
        outcome: what torch's freeze of ``cmod`` did.
        cmod: the C++ module that was frozen.

    Returns:
        ``({path: status}, submodule paths)``, or None when the answer needs the module
        view: torch cannot list the attributes in one call (a TorchScript class object
        whose Python class is not importable here), or its log names a constant relative
        to a ``torch.jit.fork`` body.
    """
    named = attribute_values(cmod)
    if named is None:
        return None
    paths = {path: isinstance(value, torch._C.ScriptModule) for path, value in named}
    if any(name not in paths for name in outcome.folded):
        return None
    canonical: dict[str, str] = {}
    seen: dict[int, tuple[torch._C.ScriptModule, str]] = {}
    for path, value in named:
        if not isinstance(value, torch._C.ScriptModule):
            continue
        # As the module view tells modules apart: by the C++ object (its hash is the
        # object's; Python wrappers differ per access).
        known = seen.get(hash(value))
        first = known[1] if known is not None and known[0] == value else None
        if first is None:
            seen[hash(value)] = (value, path)
        canonical[path] = first or path
    for path, is_module in paths.items():
        if not is_module:
            owner, _, name = path.rpartition(".")
            canonical[path] = f"{canonical[owner]}.{name}" if owner else name
    submodules = frozenset(path for path, is_module in paths.items() if is_module)
    return torch_statuses(outcome, paths, canonical), submodules


def _type_names(cmod: torch._C.ScriptModule) -> set[str]:
    """The qualified names of every class type a module's type holds (its own included),
    read off the types alone: no attribute value is converted."""
    names: set[str] = set()
    todo = [cmod._type()]
    while todo:
        kind = todo.pop()
        name = kind.qualified_name()
        if name not in names:
            names.add(name)
            todo.extend(t for t in kind.containedTypes() if isinstance(t, torch._C.ClassType))  # type: ignore[attr-defined]
    return names


def _module_types(cmod: torch._C.ScriptModule) -> dict[str, torch._C.ScriptModule]:
    """One module of each class type in ``cmod``'s module tree (itself included)."""
    found: dict[str, torch._C.ScriptModule] = {}
    todo = [cmod]
    while todo:
        module = todo.pop()
        name = module._type().qualified_name()
        if name not in found:  # same type, same methods
            found[name] = module
            todo.extend(child for _, child in torch._C.ModuleDict(module).items())
    return found


def release_clone(clone: Any, original: Any) -> int:
    """Free what a frozen clone of ``original`` keeps alive after its last use.

    torch registers every class type of a clone, with its methods, in the compilation
    unit of the module it was cloned from, and that unit lives as long as the loaded
    model does: each freeze of one loaded model leaves its frozen graphs and their folded
    constants there for good (the size of the folded weights per freeze, with plain
    ``torch.jit.freeze`` as well). The app freezes one loaded model again at every
    re-run, so once a run's frozen module is no longer needed its methods' graphs are
    emptied. Only types the clone does not share with ``original`` are touched: the
    loaded model keeps all of its own code.

    A method of the clone that was called keeps its executor's own copy of the graph,
    which torch offers no way to drop: freezeview never calls a frozen clone's methods
    (sample inputs run a function made from a copy of the graph, which goes with it).

    Args:
        clone: the frozen module (a ScriptModule or its ``_c``); unusable afterwards.
        original: the module it was cloned from.

    Returns:
        How many method graphs were emptied.
    """
    clone_c = clone._c if hasattr(clone, "_c") else clone
    original_c = original._c if hasattr(original, "_c") else original
    own = _type_names(original_c)
    emptied = 0
    for name, module in _module_types(clone_c).items():
        if name in own:
            continue
        for method_name in module._method_names():
            # (Not _debug_flush_compilation_cache: it would make an executor, and with it
            # a copy of the graph, for a method that never ran.)
            _empty_graph(module._get_method(method_name).graph)
            emptied += 1
    return emptied


def _empty_graph(graph: torch._C.Graph) -> None:
    """Remove every node of ``graph`` (its inputs stay): the constants they hold go."""
    graph.return_node().removeAllInputs()  # type: ignore[call-arg]
    torch._C._jit_pass_dce(graph)  # in C++: everything without side effects
    # What is left has side effects: users come after producers, so go backwards.
    for node in reversed(list(graph.nodes())):
        if not any(output.uses() for output in node.outputs()):
            node.destroy()
