"""The fold step's picture: attribute reads in an inlined graph, folded as torch does.

torch folds attributes inside ``torch._C._freeze_module`` and shows nothing of it; the
stepwise pipeline draws that moment itself: every attribute read from ``self`` (a chain
of ``prim::GetAttr``), and the same graph with each attribute torch folded replaced by
its constant. Also the small module walks the run needs (dotted paths, the attribute
paths of a module tree, calls left in a graph).
"""

from __future__ import annotations

import threading
import weakref
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

import torch

from ..graph import attribute_paths
from .lazy_graph import OnceGraphs

__all__: list[str] = []


def resolve_attribute(cmod: torch._C.ScriptModule, dotted: str) -> tuple[Any, str] | None:
    """Owner object and last name of a dotted path, or None if a part is missing."""
    *parts, last = dotted.split(".")
    obj: Any = cmod
    for part in parts:
        if not (hasattr(obj, "hasattr") and obj.hasattr(part)):
            return None
        obj = obj.getattr(part)
    return obj, last


def is_module_value(value: Any) -> bool:
    return isinstance(value, torch._C.ScriptModule)


def module_paths(module: Any) -> tuple[set[str], set[str]]:
    """``(attribute paths, all paths)`` of a module tree, from one torch call.

    ``all paths`` includes submodules. torch walks the whole tree in C++ once; asking
    per attribute would walk it once per attribute.
    """
    paths = attribute_paths(getattr(module, "_c", module))
    return {path for path, is_module in paths.items() if not is_module}, set(paths)


def pick_graph(graphs: OnceGraphs, method: str) -> Callable[[], torch._C.Graph]:
    """A builder for one method's graph out of a lazily built ``{method: graph}``."""

    def build() -> torch._C.Graph:
        return graphs.get()[method]  # type: ignore[no-any-return]

    return build


_CALL_KINDS = ("prim::CallMethod", "prim::CallFunction")


def call_count(graph: torch._C.Graph) -> int:
    """Calls left in a graph (nested blocks included), counted by torch in C++."""
    found: list[list[torch._C.Node]] = [graph.findAllNodes(k) for k in _CALL_KINDS]  # type: ignore[attr-defined]
    return sum(len(nodes) for nodes in found)


def _attribute_chains(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule
) -> Iterator[tuple[torch._C.Node, str, Any]]:
    """Every attribute read from ``self`` in ``graph``: ``(node, dotted path, value)``.

    A read is a chain of ``prim::GetAttr`` starting at ``self``; torch finds the nodes
    in C++ (pre-order, nested blocks included), so a chain's earlier links come first.
    """
    inputs = list(graph.inputs())
    if not inputs:
        return
    # Each module a chain reaches, by the value holding it: a link is one getattr on
    # its owner, not a walk from the root (a 512-block stack reads 12k attributes).
    modules: dict[torch._C.Value, tuple[str, Any]] = {inputs[0]: ("", cmod)}
    for node in graph.findAllNodes("prim::GetAttr"):  # type: ignore[attr-defined]
        base = modules.get(node.input())
        if base is None:
            continue
        name = node.s("name")
        prefix, owner = base
        path = f"{prefix}.{name}" if prefix else name
        try:
            value = owner.getattr(name)
        except (RuntimeError, AttributeError):
            continue
        if is_module_value(value):
            modules[node.output()] = (path, value)
        yield node, path, value


def attribute_reads(
    graph: torch._C.Graph,
    cmod: torch._C.ScriptModule,
    kept_paths: set[str],
    chains: list[tuple[torch._C.Node, str, Any]] | None = None,
) -> tuple[set[str], set[str]]:
    """``(folded, kept)`` attribute paths read in ``graph``, as torch decided them
    (``chains``: :func:`attribute_chains` of the graph, if taken already)."""
    folded: set[str] = set()
    kept: set[str] = set()
    for _node, path, value in _attribute_chains(graph, cmod) if chains is None else chains:
        if is_module_value(value):
            continue
        (kept if path in kept_paths else folded).add(path)
    return folded, kept


# The reads found in graphs still alive that nothing changes any more, by graph: the
# app's run with other preserved names folds the inline step shown again, the very same
# inlined graph, and finding its reads anew is a walk of the whole graph.
_KEPT_CHAINS: weakref.WeakKeyDictionary[
    torch._C.Graph, tuple[int, list[tuple[torch._C.Node, str, Any]]]
] = weakref.WeakKeyDictionary()
_kept_lock = threading.Lock()


def attribute_chains(
    graph: torch._C.Graph, cmod: torch._C.ScriptModule, *, unchanging: bool = False
) -> list[tuple[torch._C.Node, str, Any]]:
    """Every attribute read from ``self`` in ``graph`` (:func:`attribute_reads` and
    :func:`fold_graph` can share one list while the graph is unchanged).

    With ``unchanging`` (nothing will change ``graph`` while it lives), the list is kept
    with the graph and handed out again for the same graph and module: read it only.
    """
    if not unchanging:
        return list(_attribute_chains(graph, cmod))
    with _kept_lock:
        known = _KEPT_CHAINS.get(graph)
    # The module by its C++ object (its Python wrappers differ per access).
    if known is not None and known[0] == hash(cmod):
        return known[1]
    found = list(_attribute_chains(graph, cmod))
    with _kept_lock:
        _KEPT_CHAINS[graph] = (hash(cmod), found)
    return found


def fold_graph(
    graph: torch._C.Graph,
    cmod: torch._C.ScriptModule,
    kept_paths: set[str],
    *,
    chains: list[tuple[torch._C.Node, str, Any]] | None = None,
    tally: Counter[str] | None = None,
) -> set[str]:
    """Replace each folded attribute read in ``graph`` by a constant, as torch does.

    An attribute read's dotted path is folded unless it survives on the frozen module
    (``kept_paths``). The constant is the attribute's current value (tensors detached,
    never copied), named ``self.<path>`` like torch's; the reads left without users
    are removed.

    Args:
        graph: the inlined graph, changed in place.
        cmod: the module its ``self`` is.
        kept_paths: the attribute paths torch kept.
        chains: :func:`attribute_chains` of this very graph, if taken already.
        tally: node kinds counted before the fold (nested blocks included); updated to
            the kinds after it (one ``prim::Constant`` per constant inserted, one
            ``prim::GetAttr`` less per read removed), so the picture's counts need no
            printout of it.

    Returns:
        The paths torch folded that have no constant form freezeview can insert from
        Python (they stay attribute reads in the picture).
    """
    top = list(graph.block().nodes())
    if not top:
        return set()
    constants: dict[str, torch._C.Value] = {}
    unshown: set[str] = set()
    touched: list[torch._C.Node] = []
    # One insert point for every constant, set once: torch numbers a block's nodes for
    # their order and, while the insert point stays put, spaces a run of inserts at it
    # for the count it has seen; setting the point again (a guard per constant) resets
    # that count, so each insert halves the gap and the whole graph is renumbered every
    # forty or so (16k constants in a 100k-node graph: quadratic). The constants land in
    # the same order, in front of the graph's first node.
    if chains is None:
        chains = attribute_chains(graph, cmod)
    with graph.insert_point_guard(top[0]):
        for node, path, value in chains:
            if is_module_value(value):
                touched.append(node)
                continue
            if path in kept_paths:
                continue
            const = constants.get(path)
            if const is None:
                if isinstance(value, torch.Tensor):
                    value = value.detach()  # shares storage: a snapshot never copies weights
                try:
                    const = graph.insertConstant(value)  # type: ignore[attr-defined]
                except Exception:
                    unshown.add(path)
                    continue
                const.setDebugName(f"self.{path}")
                constants[path] = const
            node.output().replaceAllUsesWith(const)
            touched.append(node)
    # Remove the reads this fold left without users (deepest first, so chains unwind);
    # other dead code stays for the clean-up step to remove, as torch does.
    removed = 0
    for node in reversed(touched):
        if not node.output().uses():
            node.destroy()
            removed += 1
    if tally is not None:
        # torch's insertConstant makes exactly one prim::Constant node per value, and
        # every node removed here is a prim::GetAttr (the test suite checks the tally
        # against the printout's).
        tally["prim::Constant"] += len(constants)
        tally["prim::GetAttr"] -= removed
        for kind in [k for k, n in tally.items() if n <= 0]:
            del tally[kind]
    return unshown


def _surely_insertable(value: Any) -> bool:
    """True for values torch's ``insertConstant`` always takes: plain scalars, strings,
    None, and dense tensors with storage (detached, as the fold inserts them)."""
    if value is None or isinstance(value, (bool, int, float, str)):
        return True
    if isinstance(value, torch.Tensor):
        return (
            value.layout == torch.strided
            and not value.is_mkldnn
            and not value.is_nested
            and value.device.type in ("cpu", "cuda")
        )
    return False


def fold_tally(
    chains: list[tuple[torch._C.Node, str, Any]],
    kept_paths: set[str],
    tally: Counter[str],
) -> Counter[str] | None:
    """The node kinds :func:`fold_graph` would leave, worked out without folding.

    ``chains`` are :func:`attribute_chains` of the unfolded graph and ``tally`` its
    kinds. The fold inserts one ``prim::Constant`` per folded path and removes each read
    left without users: a folded read always (its uses go to the constant), a read of a
    submodule when every user of it goes too. That is counted here on the uses as they
    are, deepest read first, as :func:`fold_graph` removes them.

    Returns:
        The kinds after the fold, or None when a folded value might have no constant
        form (then only the fold itself can tell: build the picture).
    """
    paths: set[str] = set()
    touched: list[tuple[torch._C.Node, bool]] = []
    for node, path, value in chains:
        if is_module_value(value):
            touched.append((node, True))
            continue
        if path in kept_paths:
            continue
        if path not in paths:
            if not _surely_insertable(value):
                return None
            paths.add(path)
        touched.append((node, False))
    gone: Counter[torch._C.Value] = Counter()
    removed = 0
    for node, is_module in reversed(touched):
        if is_module and len(node.output().uses()) > gone[node.output()]:
            continue
        removed += 1
        gone[node.input()] += 1
    after = Counter(tally)
    after["prim::Constant"] += len(paths)
    after["prim::GetAttr"] -= removed
    for kind in [k for k, n in after.items() if n <= 0]:
        del after[kind]
    return after
