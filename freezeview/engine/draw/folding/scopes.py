"""Where each drawn op sits: module scopes, and the box a scope falls into at a level.

torch records the module hierarchy of every inlined node; freezeview draws each op in
its *effective* scope (control flow takes the scope of what it tests, ModuleList items
their real path), and at collapse level ``d`` every scope ``d`` names deep becomes one
box. These functions answer both questions on plain strings, without building a drawing.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from ...diff import NodeInfo

__all__ = [
    "box_prefix",
    "count_at_level",
    "module_paths",
    "opened_scopes",
    "resolve_scope",
    "scope_depth",
]

#: Names of the blocks of the control-flow nodes, as clusters label them.
BLOCK_NAMES = {"prim::If": ("then", "else"), "prim::Loop": ("body",)}


def scopes_by_producer(
    info: Mapping[int, NodeInfo], producer: Mapping[str, int], modules: frozenset[str] | None
) -> dict[int, str]:
    """The module scope each node is drawn in, given the node producing each value (a
    snapshot drawn has that map already; every value is read after it is produced, so
    the full map answers as the map of the values produced so far would).

    torch's inliner leaves the module hierarchy of ``prim::If``/``prim::Loop`` nodes and
    of the nodes inside their blocks empty (a scripted BatchNorm's training checks all
    land in the root scope), which would pile hundreds of nodes into the root of every
    picture. Such nodes take the scope of the block owner they are nested in, and a
    control-flow node the scope of the values it tests.

    torch also names a module reached by iterating an ``nn.ModuleList`` (``for layer in
    self.layers``) by its index alone: the ops of ``layers.0.self_attn`` carry the scope
    ``0.self_attn``. Given ``modules`` (:func:`module_paths` of the model), such scopes
    are drawn under the module's real path (see :func:`resolve_scope`).

    Args:
        info: :func:`~freezeview.engine.diff.diff.index_nodes` of the graph.
        producer: value name -> id of the node producing it.
        modules: dotted paths of the model's submodules, or None to keep torch's names.

    Returns:
        Node id -> dotted scope.
    """
    scopes: dict[int, str] = {}
    # Scope of the last op (not a constant) seen in each block, by (owner id, block).
    last_in_block: dict[tuple[int | None, int], str] = {}
    constant = "prim::Constant"
    for node_id, i in info.items():
        node = i.node
        scope = node.scope
        if not scope and i.parent is not None:
            scope = scopes.get(i.parent, "")
        if not scope and node.kind in BLOCK_NAMES:
            tested = [producer.get(value) for value in node.inputs]
            for pid in tested:
                # torch pools equal constants into one at the top of the graph, with
                # the scope of whichever module came first: no clue where an If is.
                if pid is not None and scopes.get(pid) and info[pid].node.kind != constant:
                    scope = scopes[pid]
                    break
            else:
                if tested and all(p is not None and info[p].node.kind == constant for p in tested):
                    # A check freezing decided (``if self.training`` became
                    # ``if False``): it sits among the ops of the module it came from.
                    scope = last_in_block.get((i.parent, i.block), "")
        scopes[node_id] = scope
        if scope and node.kind != constant:
            last_in_block[(i.parent, i.block)] = scope
    if modules:
        # A few hundred distinct scopes among up to 17k nodes: resolve each scope once.
        resolve = _resolver(modules)
        real = {scope: resolve(scope) for scope in set(scopes.values())}
        scopes = {node_id: real[scope] for node_id, scope in scopes.items()}
    return scopes


def module_paths(module: Any) -> frozenset[str]:
    """Dotted paths of every submodule of ``module`` (from ``named_modules``).

    Args:
        module: an ``nn.Module`` or ``torch.jit.ScriptModule``.

    Returns:
        The paths (``layers``, ``layers.0``, ``layers.0.self_attn``, ...), for
        :func:`scopes_by_producer` and :class:`~.plan.RenderOptions`.
    """
    return frozenset(name for name, _ in module.named_modules() if name)


class _ScopeResolver:
    """Maps torch's scope names onto the model's module paths (see :func:`resolve_scope`)."""

    def __init__(self, modules: frozenset[str]) -> None:
        self.modules = modules
        # ancestor path -> last name -> the ancestor's descendants with that last name.
        self.below: dict[str, dict[str, list[str]]] = {}
        for path in modules:
            parts = path.split(".")
            for k in range(len(parts) - 1):
                ancestor = ".".join(parts[:k])
                self.below.setdefault(ancestor, {}).setdefault(parts[-1], []).append(path)
        self.cache: dict[str, str] = {"": ""}

    def __call__(self, scope: str) -> str:
        hit = self.cache.get(scope)
        if hit is not None:
            return hit
        current = ""
        for name in scope.split("."):
            direct = f"{current}.{name}" if current else name
            if direct not in self.modules:
                # Not a child: an item of a container the module iterates (a ModuleList
                # or ModuleDict is never called, so it is not in torch's hierarchy).
                # Only an unambiguous, shallowest match is taken.
                found = self.below.get(current, {}).get(name, [])
                if found:
                    depth = min(p.count(".") for p in found)
                    shallow = [p for p in found if p.count(".") == depth]
                    if len(shallow) == 1:
                        direct = shallow[0]
            current = direct
        self.cache[scope] = current
        return current


@lru_cache(maxsize=8)
def _resolver(modules: frozenset[str]) -> _ScopeResolver:
    return _ScopeResolver(modules)


def resolve_scope(scope: str, modules: frozenset[str]) -> str:
    """The module path torch's dotted ``scope`` stands for.

    ``0.self_attn`` becomes ``layers.0.self_attn`` when the model has ``layers.0`` (an
    ``nn.ModuleList`` item) and no child called ``0``. A name that is a child of the
    module before it is kept; one that several containers hold (two ModuleLists
    iterated in one ``forward``) is kept as torch wrote it, since the scope alone cannot
    tell them apart.

    Args:
        scope: dotted scope from a snapshot (``NodeSnapshot.scope``).
        modules: :func:`module_paths` of the model.

    Returns:
        The resolved dotted path.
    """
    return _resolver(modules)(scope)


def scope_depth(scope: str) -> int:
    """Number of components of a dotted scope (``""`` -> 0, ``layer1.0`` -> 2)."""
    return scope.count(".") + 1 if scope else 0


def opened_ancestors(expand: Sequence[str]) -> set[str]:
    opened: set[str] = set()
    for scope in expand:
        parts = scope.split(".")
        for k in range(1, len(parts) + 1):
            opened.add(".".join(parts[:k]))
    return opened


def box_prefix(
    scope: str, level: int | None, expand: Sequence[str] = (), opened: set[str] | None = None
) -> str | None:
    """The collapsed box a node of ``scope`` falls into at ``level``, or None (drawn as an op).

    Args:
        scope: the node's dotted module scope.
        level: box depth (``1``: one box per child of the root module), None for ops.
        expand: scopes opened down to their ops; their ancestors are opened one level
            at a time so that the expanded scope's siblings stay boxes.
        opened: ``opened_ancestors(expand)``, when the caller has it already.

    Returns:
        The dotted prefix naming the box, or None.
    """
    if level is None or not scope:
        return None
    for e in expand:
        if scope == e or scope.startswith(e + "."):
            return None
    if opened is None:
        opened = opened_ancestors(expand)
    parts = scope.split(".")
    for k in range(max(level, 1), len(parts) + 1):
        prefix = ".".join(parts[:k])
        if prefix not in opened:
            return prefix
    return None


def opened_scopes(expand: Sequence[str] = (), split: Iterable[str] = ()) -> set[str]:
    """Scopes whose boxes are opened: ancestors of ``expand``, plus ``split``."""
    return opened_ancestors(expand) | set(split)


def count_at_level(
    scopes: Iterable[str] | Mapping[str, int],
    level: int | None,
    expand: Sequence[str] = (),
    split: Iterable[str] = (),
) -> int:
    """How many boxes the drawn nodes with ``scopes`` make at ``level`` (single-member boxes
    are drawn as the op itself and count once either way).

    Args:
        scopes: the scope of every drawn node (repeats count), or scope -> node count.
        level: box depth, or None for every op.
        expand: scopes opened down to their ops.
        split: scopes drawn one level finer (see :func:`build_drawing`).
    """
    opened = opened_scopes(expand, split)
    boxes: set[str] = set()
    ops = 0
    # Real graphs have tens of thousands of nodes in a few hundred scopes.
    counts = scopes if isinstance(scopes, Mapping) else Counter(scopes)
    for scope, n in counts.items():
        prefix = box_prefix(scope, level, expand, opened)
        if prefix is None:
            ops += n
        else:
            boxes.add(prefix)
    return ops + len(boxes)
