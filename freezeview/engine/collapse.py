"""Turn a graph snapshot (and optionally a diff) into the picture freezeview draws.

A one-node-per-IR-op picture does not scale (DESIGN.md, issue 7): a handful of
constants (``1``, ``[1, 1]``, ``None``) feed 50-120 users each and ``dot`` spends
minutes routing those edges, while the reader learns nothing from them. So the drawn
graph, a :class:`ViewGraph`, is built in three moves:

1. **Folding.** ``prim::Constant``, lists/tuples built only from constants, and
   ``prim::GetAttr`` reads of submodules become rows *inside* the node that uses them
   (``weight = Float(64, 3, 7, 7) <conv1.weight>``). A ``prim::GetAttr`` that reads a
   value (a kept attribute, after freezing) stays a node of its own and stands out.
2. **Clusters.** Every drawn node sits in the clusters of its module scope
   (``layer1`` > ``layer1.0`` > ``layer1.0.bn1``) and of the ``prim::If``/``prim::Loop``
   blocks it is nested in.
3. **Collapsing.** At level ``d`` every scope ``d`` names deep becomes one box with the
   count of ops inside and, in a diff, how many were added/removed/changed in it;
   ``expand`` opens chosen scopes down to their ops. Level ``None`` draws every op.

The engine never renders here; :mod:`freezeview.engine.render` turns a ViewGraph into
DOT and runs Graphviz.
"""

from __future__ import annotations

import re
import threading
from collections import Counter, OrderedDict
from collections.abc import Container, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from itertools import chain
from typing import Any

from .diff import GraphDiff, NodeInfo, index_nodes
from .snapshot import GraphSnapshot, NodeSnapshot, demangle

__all__ = [
    "CONSTANT_MODES",
    "Cluster",
    "ViewEdge",
    "ViewGraph",
    "ViewNode",
    "box_prefix",
    "build_view",
    "count_at_level",
    "drawn_scope_counts",
    "drawn_scopes",
    "effective_scopes",
    "levels",
    "module_paths",
    "opened_scopes",
    "resolve_scope",
    "scope_depth",
]

#: How constants are shown: folded into their users as rows, folded but with trivial
#: ones (None, bools, small ints, short int lists) left out, or as nodes of their own.
CONSTANT_MODES = ("fold", "hide-trivial", "nodes")

_LIST_KINDS = frozenset({"prim::ListConstruct", "prim::TupleConstruct"})
#: The only kinds ever drawn inside their users (see ``_Folder._fold_text``).
_FOLDABLE_KINDS = _LIST_KINDS | {"prim::Constant", "prim::GetAttr"}
_BLOCK_NAMES = {"prim::If": ("then", "else"), "prim::Loop": ("body",)}
_MAX_ROWS = 6
_MAX_ROW_CHARS = 48
_TYPE_DETAIL_RE = re.compile(r",\s*(strides|requires_grad|device)=.*?(?=\)$|,\s*\w+=)")
_SCHEMA_ARGS_RE = re.compile(r"\(([^)]*)\)")
_BRACKETS_RE = re.compile(r"\[[^\]]*\]|\([a-z]+!?(?:\s*->\s*\*)?\)")


@dataclass
class ViewNode:
    """One box in the picture.

    Attributes:
        key: the DOT node id (also the ``id`` of its ``<g>`` element in the SVG).
        role: ``op``, ``attribute`` (a value read by ``prim::GetAttr``), ``constant``
            (only with ``constants="nodes"``), ``input``, ``output``, ``scope`` (a
            collapsed submodule) or ``ghost`` (a removed op drawn where it was).
        title: first label line (op kind, attribute path, scope name).
        rows: further label lines (folded inputs, counts).
        cluster: path of the clusters holding it (see :class:`Cluster`).
        status: ``same``, ``added``, ``changed`` or ``removed``.
        tooltip: text shown when hovering the node in an SVG viewer.
        node_ids: snapshot node ids it stands for (before-graph ids for ghosts).
        ghost_ids: for ``scope`` boxes in a diff, the before-graph ids of removed ops
            counted in the box.
        counts: for ``scope`` boxes, ``ops``/``added``/``removed``/``changed`` counts.
        kept: an attribute freezing kept (drawn to stand out).
    """

    key: str
    role: str
    title: str
    rows: list[str] = field(default_factory=list)
    cluster: tuple[str, ...] = ()
    status: str = "same"
    tooltip: str = ""
    node_ids: list[int] = field(default_factory=list)
    ghost_ids: list[int] = field(default_factory=list)
    counts: Counter[str] = field(default_factory=Counter)
    kept: bool = False


@dataclass
class ViewEdge:
    """A drawn edge (one per pair of boxes; ``count`` values merged into it)."""

    tail: str
    head: str
    label: str = ""
    tooltip: str = ""
    status: str = "same"
    style: str = ""
    count: int = 1


@dataclass
class Cluster:
    """A cluster: a module scope or a block of a ``prim::If``/``prim::Loop``.

    Clusters are keyed by their path, a tuple of segments from the outermost one
    (``("s:layer1", "s:layer1.0", "b:57.0")``), so that the same scope nested in two
    different blocks gives two clusters and the nesting Graphviz needs is a prefix tree.
    """

    path: tuple[str, ...]
    label: str
    kind: str  # "scope" or "block"
    status: str = "same"


@dataclass
class ViewGraph:
    """What to draw: nodes, edges, clusters and what was folded away.

    Attributes:
        nodes: drawn boxes by key, in drawing order.
        edges: drawn edges.
        clusters: clusters by path.
        level: collapse level used (``None``: every op drawn).
        folded: snapshot ids drawn inside other nodes rather than as boxes.
        ghost_folded: before-graph ids folded into ghosts (diff pictures only).
        title: a caption for the picture.
    """

    nodes: dict[str, ViewNode]
    edges: list[ViewEdge]
    clusters: dict[tuple[str, ...], Cluster]
    level: int | None
    folded: set[int] = field(default_factory=set)
    ghost_folded: set[int] = field(default_factory=set)
    title: str = ""
    scopes: dict[int, str] = field(default_factory=dict)
    ghost_scopes: dict[int, str] = field(default_factory=dict)

    def drawn_scopes(self) -> list[str]:
        """Effective scopes of every op this graph draws (ghosts included), for budgets."""
        out = [s for i, s in self.scopes.items() if i not in self.folded]
        out += [s for i, s in self.ghost_scopes.items()]
        return out

    def holder(self, node_id: int, *, ghost: bool = False) -> ViewNode | None:
        """The box showing node ``node_id``: its own box or the scope box it is counted in.

        Args:
            node_id: a node id of the drawn graph, or of the before-graph with ``ghost``.
            ghost: look for a removed op (a ghost) instead.
        """
        for node in self.nodes.values():
            if node.role == "scope":
                if node_id in (node.ghost_ids if ghost else node.node_ids):
                    return node
            elif (node.role == "ghost") == ghost and node_id in node.node_ids:
                return node
        return None


def effective_scopes(
    snapshot: GraphSnapshot,
    info: Mapping[int, NodeInfo],
    modules: frozenset[str] | None = None,
) -> dict[int, str]:
    """The module scope each node is drawn in.

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
        snapshot: the graph.
        info: :func:`~freezeview.engine.diff.index_nodes` of it.
        modules: dotted paths of the model's submodules, or None to keep torch's names.

    Returns:
        Node id -> dotted scope.
    """
    producer = {out.name: node_id for node_id, i in info.items() for out in i.node.outputs}
    return _effective_scopes(info, producer, modules)


def _effective_scopes(
    info: Mapping[int, NodeInfo], producer: Mapping[str, int], modules: frozenset[str] | None
) -> dict[int, str]:
    """:func:`effective_scopes`, given the node producing each value (a snapshot drawn
    has that map already; every value is read after it is produced, so the full map
    answers as the map of the values produced so far would)."""
    scopes: dict[int, str] = {}
    # Scope of the last op (not a constant) seen in each block, by (owner id, block).
    last_in_block: dict[tuple[int | None, int], str] = {}
    constant = "prim::Constant"
    for node_id, i in info.items():
        node = i.node
        scope = node.scope
        if not scope and i.parent is not None:
            scope = scopes.get(i.parent, "")
        if not scope and node.kind in _BLOCK_NAMES:
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
        :func:`effective_scopes` and :class:`~freezeview.engine.render.RenderOptions`.
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


def _opened(expand: Sequence[str]) -> set[str]:
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
        opened: ``_opened(expand)``, when the caller has it already.

    Returns:
        The dotted prefix naming the box, or None.
    """
    if level is None or not scope:
        return None
    for e in expand:
        if scope == e or scope.startswith(e + "."):
            return None
    if opened is None:
        opened = _opened(expand)
    parts = scope.split(".")
    for k in range(max(level, 1), len(parts) + 1):
        prefix = ".".join(parts[:k])
        if prefix not in opened:
            return prefix
    return None


def levels(
    snapshot: GraphSnapshot, constants: str = "fold", modules: frozenset[str] | None = None
) -> list[int | None]:
    """Collapse levels that make a difference for ``snapshot``, coarsest first, then None.

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES`.
        modules: :func:`module_paths` of the model, to count depth on real module paths.
    """
    return list(_prepared(snapshot, constants, modules).levels)


def opened_scopes(expand: Sequence[str] = (), split: Iterable[str] = ()) -> set[str]:
    """Scopes whose boxes are opened: ancestors of ``expand``, plus ``split``."""
    return _opened(expand) | set(split)


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
        split: scopes drawn one level finer (see :func:`build_view`).
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


@lru_cache(maxsize=4096)
def _schema_arg_names(schema: str) -> tuple[str, ...]:
    """Argument names from an operator schema (``aten::conv2d(Tensor input, ...)``)."""
    # Defaults such as `stride=[1, 1]`, types such as `int[2]` and alias sets such as
    # `Tensor(a!)` hold commas and brackets; drop them so commas separate arguments only.
    match = _SCHEMA_ARGS_RE.search(_BRACKETS_RE.sub("", schema))
    if not match:
        return ()
    names = []
    for arg in match.group(1).split(","):
        arg = arg.strip()
        if not arg or arg == "*":
            continue
        decl = arg.split("=", 1)[0].strip()
        names.append(decl.rsplit(" ", 1)[-1])
    return tuple(names)


def short_type(type_text: str) -> str:
    """A value type as a label: ``Float(1, 64, 56, 56)``; strides and devices left out."""
    text = demangle(type_text)
    return _TYPE_DETAIL_RE.sub("", text)


def _clip(text: str, limit: int = _MAX_ROW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_trivial(node: NodeSnapshot) -> bool:
    c = node.constant
    if c is None or c.attribute or c.kind == "tensor":
        return False
    return c.kind in {"none", "bool", "int", "float", "device"} or (
        c.kind == "list" and len(c.text) <= 12
    )


class _Folder:
    """Decides which nodes are drawn inside their users and what text they get."""

    def __init__(self, snapshot: GraphSnapshot, info: dict[int, NodeInfo], constants: str) -> None:
        self.snapshot = snapshot
        self.info = info
        self.constants = constants
        self.producer: dict[str, int] = {
            out.name: node_id for node_id, i in info.items() for out in i.node.outputs
        }
        self.self_name = snapshot.inputs[0].name if snapshot.inputs else ""
        self.text: dict[int, str | None] = {}
        self.folded: set[int] = set()
        # Most nodes cannot be folded; only the others are asked (in walk order, since a
        # list folds when what it holds did).
        foldable = [(n, i) for n, i in info.items() if i.node.kind in _FOLDABLE_KINDS]
        for node_id, i in foldable:
            text = self._fold_text(i)
            if text is not None:
                self.folded.add(node_id)
                self.text[node_id] = text

    def _fold_text(self, info: NodeInfo) -> str | None:
        node = info.node
        if node.kind == "prim::Constant" and node.constant is not None:
            if self.constants == "nodes":
                return None
            c = node.constant
            # Only tensors keep a trustworthy origin: torch pools equal scalars into one
            # constant named after whichever attribute came first (`False <bn1.training>`).
            return f"{c.text} <{c.attribute}>" if c.attribute and c.is_tensor else c.text
        if node.kind in _LIST_KINDS and node.outputs:
            parts = []
            for name in node.inputs:
                pid = self.producer.get(name)
                if pid is None or pid not in self.folded:
                    return None
                parts.append(self.text[pid] or "")
            brackets = "[]" if node.kind == "prim::ListConstruct" else "()"
            return brackets[0] + ", ".join(parts) + brackets[1]
        if node.kind == "prim::GetAttr" and node.outputs and self._is_module_read(node):
            return f"self.{info.attribute}" if info.attribute else node.attribute("name")
        return None

    def _is_module_read(self, node: NodeSnapshot) -> bool:
        # Reads of submodules (typed `__torch__.…`) are plumbing; reads of values are
        # what freezing inlines or keeps, so those stay visible.
        rooted = node.inputs and (
            node.inputs[0] == self.self_name or self.producer.get(node.inputs[0]) in self.folded
        )
        return bool(rooted) and node.outputs[0].type.startswith("__torch__.")

    def hidden(self, node_id: int) -> bool:
        """Folded and left out entirely (``hide-trivial`` mode)."""
        return self.constants == "hide-trivial" and _is_trivial(self.info[node_id].node)

    def rows(self, node: NodeSnapshot) -> list[str]:
        """Label rows for the folded inputs of ``node``."""
        names = _schema_arg_names(node.schema) if node.schema else ()
        rows = []
        for index, value in enumerate(node.inputs):
            pid = self.producer.get(value)
            if pid is None or pid not in self.folded or self.hidden(pid):
                continue
            text = self.text[pid] or ""
            if text.startswith("self.") and self.info[pid].node.kind == "prim::GetAttr":
                continue  # a submodule handle passed on (CallMethod); the tooltip has it
            name = names[index] if index < len(names) else f"#{index}"
            rows.append(_clip(f"{name} = {text}"))
        if len(rows) > _MAX_ROWS:
            rows = [*rows[: _MAX_ROWS - 1], f"… {len(rows) - _MAX_ROWS + 1} more"]
        return rows


@dataclass(slots=True)
class _ScopeOps:
    """The drawn ops of one effective scope (see :attr:`_Side.ops_by_scope`).

    Attributes:
        ids: their node ids, in walk order.
        kinds: op kind -> ``[count, id of the first]`` (value reads and
            constants are not ops here, as in a module box's tooltip).
        reads: attribute paths of the ``prim::GetAttr`` value reads among them.
    """

    ids: list[int] = field(default_factory=list)
    kinds: dict[str, list[int]] = field(default_factory=dict)
    reads: list[str] = field(default_factory=list)


class _Side:
    """One snapshot prepared for drawing: folding, scopes and edges, computed once."""

    def __init__(
        self,
        snapshot: GraphSnapshot,
        info: dict[int, NodeInfo],
        folder: _Folder,
        modules: frozenset[str] | None = None,
    ) -> None:
        self.snapshot = snapshot
        self.info = info
        self.folder = folder
        self.scopes = _effective_scopes(info, folder.producer, modules)

    @cached_property
    def levels(self) -> list[int | None]:
        """Collapse levels that make a difference, coarsest first, then None."""
        depth = max((scope_depth(s) for s in set(self.scopes.values())), default=0)
        return [*range(1, depth + 1), None]

    @cached_property
    def edges(self) -> list[tuple[int, int | str, str, str]]:
        """Every edge between drawn nodes, as ``(head id, tail, value, style)``.

        ``tail`` is a node id, or ``"i<k>"`` for graph input ``k``. What a view draws
        only depends on where each id ends up (its own box or a module box), so the
        walk over the graph is done once per snapshot, not once per picture.
        """
        return self._layout[0]

    @cached_property
    def edge_groups(self) -> dict[tuple[str, str, str], list[int]]:
        """Indices into :attr:`edges`, grouped by ``(input tail, tail scope, head scope)``.

        ``input tail`` is the ``"i<k>"`` of a graph input tail (its tail scope then
        ``""``), else ``""``. Every edge of a group joins the same two module boxes
        whenever both scopes are collapsed, so a collapsed picture counts a group in one
        step instead of edge by edge.
        """
        return self._layout[1]

    @cached_property
    def ops_by_scope(self) -> dict[str, _ScopeOps]:
        """The drawn (not folded) ops of each effective scope, scopes in the order they
        first occur.

        A collapsed picture needs only each module box's totals, and a box is a union of
        scopes: gathering the ops by scope once per snapshot lets every picture of it
        place a few hundred scopes instead of visiting each of up to 17k nodes.
        """
        return self._layout[2]

    @cached_property
    def _layout(
        self,
    ) -> tuple[
        list[tuple[int, int | str, str, str]],
        dict[tuple[str, str, str], list[int]],
        dict[str, _ScopeOps],
    ]:
        """:attr:`edges`, :attr:`edge_groups` and :attr:`ops_by_scope`, from one walk over
        the drawn nodes (each picture needs all three, and on a 17k-node graph the walk,
        one value-name lookup per input, is most of their cost).

        The walk goes backwards: every reader of a value comes after its producer in a
        snapshot (ids are walk positions), so by the time an op is reached it is known
        whether anything reads it, which is what its dotted edge depends on, without a
        first pass collecting every value name read. Edges and ids are turned round at
        the end.
        """
        info, scopes = self.info, self.scopes
        folded, get_producer = self.folder.folded, self.folder.producer.get
        inputs = {v.name: f"i{k}" for k, v in enumerate(self.snapshot.inputs)}
        owner_of, read = self._block_links()
        # What the walk gives back to front: edges, and per head scope the edge indices
        # by tail scope or by graph input (keyed by strings at hand rather than a tuple
        # built and hashed per edge).
        edges: list[tuple[int, int | str, str, str]] = []
        from_scopes: dict[str, dict[str, list[int]]] = {}
        from_inputs: dict[str, dict[str, list[int]]] = {}
        by_scope: dict[str, _ScopeOps] = {}
        edges_append, read_add = edges.append, read.add

        def add(head_scope: str, tail: int | str, edge: tuple[int, int | str, str, str]) -> None:
            if isinstance(tail, str):
                groups, key = from_inputs.setdefault(head_scope, {}), tail
            else:
                groups, key = from_scopes.setdefault(head_scope, {}), scopes[tail]
            group = groups.get(key)
            if group is None:
                groups[key] = [len(edges)]
            else:
                group.append(len(edges))
            edges.append(edge)

        def tail_of(value: str) -> int | str | None:
            # Its producer (none when that is folded), else a graph input, else the
            # If/Loop whose block takes it.
            pid = get_producer(value)
            if pid is not None:
                read.add(pid)
                return None if pid in folded else pid
            return inputs.get(value) or owner_of.get(value)

        for node_id, i in reversed(info.items()):
            if node_id in folded:
                continue
            node = i.node
            scope = scopes[node_id]
            ops = by_scope.get(scope)
            if ops is None:
                ops = by_scope[scope] = _ScopeOps()
            ops.ids.append(node_id)
            kind = node.kind
            if kind == "prim::GetAttr":
                ops.reads.append(i.attribute or node.attribute("name") or "?")
            elif kind != "prim::Constant":
                seen = ops.kinds.get(kind)
                if seen is None:
                    ops.kinds[kind] = [1, node_id]
                else:
                    seen[0] += 1
                    seen[1] = node_id  # walking backwards: the first so far
            # Ops that end a block without returning anything (prim::RaiseException)
            # get a dotted edge to the owner so the branch sits next to its If. A
            # folded node never reads a drawn one (it reads constants, `self` and
            # other folded nodes only), so the drawn readers walked so far are all.
            if i.parent is not None and node_id not in read:
                add(scopes[i.parent], node_id, (i.parent, node_id, "", "dotted"))
            # Values returned by a block flow into the If/Loop that owns it.
            for block in reversed(node.blocks) if node.blocks else ():
                for value in reversed(block.outputs):
                    tail = tail_of(value)
                    if tail is not None:
                        add(scope, tail, (node_id, tail, value, "dashed"))
            # The hot loop (one pass per input of up to 17k nodes), so the common case,
            # a drawn producer, is written out here rather than through tail_of and add.
            head_groups = from_scopes.get(scope)
            if head_groups is None:
                head_groups = from_scopes[scope] = {}
            for value in reversed(node.inputs):
                pid = get_producer(value)
                if pid is None:
                    tail = inputs.get(value) or owner_of.get(value)
                    if tail is not None:
                        add(scope, tail, (node_id, tail, value, ""))
                    continue
                read_add(pid)
                if pid in folded:
                    continue
                group = head_groups.get(scopes[pid])
                if group is None:
                    head_groups[scopes[pid]] = [len(edges)]
                else:
                    group.append(len(edges))
                edges_append((node_id, pid, value, ""))
        return _turned(edges, from_scopes, from_inputs, by_scope)

    def _block_links(self) -> tuple[dict[str, int], set[int]]:
        """Block parameter -> the If/Loop owning it, and the ids of the nodes whose values
        a block or the graph returns (they are read, though by no node's inputs)."""
        get_producer = self.folder.producer.get
        owner_of: dict[str, int] = {}
        returned = [*self.snapshot.outputs]
        owners = [(node_id, i.node) for node_id, i in self.info.items() if i.node.blocks]
        for node_id, node in owners:
            for block in node.blocks:
                returned += block.outputs
                for v in block.inputs:
                    owner_of[v.name] = node_id
        read = {pid for pid in map(get_producer, returned) if pid is not None}
        return owner_of, read

    @cached_property
    def output_tails(self) -> list[tuple[int | str, str]]:
        """``(tail, value)`` for each graph output, as in :attr:`edges`."""
        inputs = {v.name: f"i{k}" for k, v in enumerate(self.snapshot.inputs)}
        out: list[tuple[int | str, str]] = []
        for value in self.snapshot.outputs:
            pid = self.folder.producer.get(value)
            if pid is not None and pid not in self.folder.folded:
                out.append((pid, value))
            elif pid is None and value in inputs:
                out.append((inputs[value], value))
        return out


# Snapshots are immutable: folding decisions, scopes and edges are reused across the
# several pictures an export draws of one snapshot (a reference keeps each id unique;
# the lock because the app draws from worker threads).
_prepared_cache: OrderedDict[
    tuple[int, str, frozenset[str] | None], tuple[GraphSnapshot, _Side]
] = OrderedDict()
_prepared_lock = threading.Lock()


def _prepared(
    snapshot: GraphSnapshot, constants: str, modules: frozenset[str] | None = None
) -> _Side:
    key = (id(snapshot), constants, modules)
    with _prepared_lock:
        hit = _prepared_cache.get(key)
        if hit is not None and hit[0] is snapshot:
            _prepared_cache.move_to_end(key)
            return hit[1]
    info = index_nodes(snapshot)
    side = _Side(snapshot, info, _Folder(snapshot, info, constants), modules)
    with _prepared_lock:
        _prepared_cache[key] = (snapshot, side)
        while len(_prepared_cache) > 16:
            _prepared_cache.popitem(last=False)
    return side


def drawn_scopes(
    snapshot: GraphSnapshot,
    constants: str = "fold",
    ids: Iterable[int] | None = None,
    modules: frozenset[str] | None = None,
) -> list[str]:
    """The scope each drawn op of ``snapshot`` is placed in (for counting boxes per level).

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES` (what is folded).
        ids: only these node ids (e.g. a diff's removed nodes); default: all.
        modules: :func:`module_paths` of the model (real paths for ModuleList items).
    """
    side = _prepared(snapshot, constants, modules)
    chosen = side.info if ids is None else ids
    return [side.scopes[i] for i in chosen if i not in side.folder.folded]


def drawn_scope_counts(
    snapshot: GraphSnapshot,
    constants: str = "fold",
    ids: Iterable[int] | None = None,
    modules: frozenset[str] | None = None,
) -> Counter[str]:
    """:func:`drawn_scopes` counted: scope -> how many drawn ops it holds.

    What choosing a level needs (:func:`count_at_level` takes it as is); for a whole
    snapshot it comes from the ops already gathered by scope, not from a 17k-long list.

    Args:
        snapshot: the graph.
        constants: one of :data:`CONSTANT_MODES` (what is folded).
        ids: only these node ids (e.g. a diff's removed nodes); default: all.
        modules: :func:`module_paths` of the model (real paths for ModuleList items).
    """
    if ids is not None:
        return Counter(drawn_scopes(snapshot, constants, ids, modules))
    side = _prepared(snapshot, constants, modules)
    return Counter({scope: len(ops.ids) for scope, ops in side.ops_by_scope.items()})


def build_view(
    snapshot: GraphSnapshot,
    *,
    level: int | None = None,
    expand: Sequence[str] = (),
    constants: str = "fold",
    diff: GraphDiff | None = None,
    side: str = "after",
    ghosts: bool = True,
    reasons: Mapping[str, str] | None = None,
    key_prefix: str = "",
    edge_labels: bool = True,
    split: Sequence[str] = (),
    modules: frozenset[str] | None = None,
) -> ViewGraph:
    """Build the drawn graph for ``snapshot``.

    Args:
        snapshot: the graph to draw.
        level: collapse level (box depth); None draws every op.
        expand: scopes to open down to their ops whatever the level.
        constants: one of :data:`CONSTANT_MODES`.
        diff: colour the picture with this diff; ``snapshot`` must be ``diff.after``
            (``side="after"``) or ``diff.before`` (``side="before"``).
        side: which side of ``diff`` ``snapshot`` is.
        ghosts: with a diff on the after side, draw removed ops as ghosts where they were.
        reasons: attribute path -> why freezing kept it; ``prim::GetAttr`` reads of
            those paths are drawn as kept attributes with the reason as tooltip.
        key_prefix: prefix for every node key (side-by-side pictures hold two graphs).
        edge_labels: label edges whose type carries a shape.
        split: module boxes drawn one level finer: each of these scopes is opened into
            its submodules' boxes and its own ops (how a diff picture opens the boxes
            where freezing acted, within its budget).
        modules: :func:`module_paths` of the model, so that ModuleList items are drawn
            under their real path (``layers.0``, not ``0``); scopes in ``expand`` and
            ``split`` use the same names.

    Returns:
        The :class:`ViewGraph`.
    """
    if constants not in CONSTANT_MODES:
        raise ValueError(f"constants must be one of {', '.join(CONSTANT_MODES)}")
    builder = _ViewBuilder(
        level=level,
        expand=tuple(expand),
        diff=diff,
        side=side,
        reasons=reasons or {},
        prefix=key_prefix,
        edge_labels=edge_labels,
        split=tuple(split),
    )
    builder.add_graph(_prepared(snapshot, constants, modules))
    if diff is not None and side == "after" and ghosts:
        builder.add_ghosts(_prepared(diff.before, constants, modules))
    return builder.finish()


def _top_kinds(scopes: Sequence[_ScopeOps], n: int = 3) -> list[tuple[str, int]]:
    """The ``n`` commonest op titles over ``scopes``, ties in order of first occurrence
    (what ``Counter.most_common`` gives over the ops listed in walk order)."""
    merged: dict[str, list[int]] = {}
    for ops in scopes:
        for kind, (count, first) in ops.kinds.items():
            # A title is its kind without the `aten::` namespace, so titles and kinds
            # are counted alike; the title is made here, once per kind and box.
            title = kind.removeprefix("aten::")
            seen = merged.get(title)
            if seen is None:
                merged[title] = [count, first]
            else:
                seen[0] += count
                seen[1] = min(seen[1], first)
    ranked = sorted(merged.items(), key=lambda item: (-item[1][0], item[1][1]))
    return [(title, count) for title, (count, _first) in ranked[:n]]


def _turned(
    edges: list[tuple[int, int | str, str, str]],
    from_scopes: dict[str, dict[str, list[int]]],
    from_inputs: dict[str, dict[str, list[int]]],
    by_scope: dict[str, _ScopeOps],
) -> tuple[
    list[tuple[int, int | str, str, str]],
    dict[tuple[str, str, str], list[int]],
    dict[str, _ScopeOps],
]:
    """What :attr:`_Side._layout` gathered walking backwards, put in walk order."""
    edges.reverse()
    last = len(edges) - 1
    groups: dict[tuple[str, str, str], list[int]] = {}
    for head_scope, tails in from_scopes.items():
        for tail_scope, indices in tails.items():
            groups[("", tail_scope, head_scope)] = [last - k for k in reversed(indices)]
    for head_scope, tails in from_inputs.items():
        for tail, indices in tails.items():
            groups[(tail, "", head_scope)] = [last - k for k in reversed(indices)]
    for ops in by_scope.values():
        ops.ids.reverse()
        ops.reads.reverse()
    # Scopes in the order they first occur, as pictures place them.
    ordered = dict(sorted(by_scope.items(), key=lambda item: item[1].ids[0]))
    return edges, groups, ordered


def _readers(
    edges: Iterable[tuple[int, int | str, str, str]], tails: Container[int]
) -> dict[str, list[int]]:
    """Value name -> ids of the nodes reading it, for the values of ``tails``, in walk
    order (what ``snapshot.consumers()`` gives for them).

    Taken from a snapshot's drawn edges: a folded node never reads a drawn one (it reads
    constants, ``self`` and other folded nodes only), so for drawn ``tails`` the heads
    of their plain edges are all their readers.
    """
    readers: dict[str, list[int]] = {}
    for head_id, tail, value, style in edges:
        if not style and tail in tails:
            found = readers.get(value)
            if found is None:
                readers[value] = [head_id]
            else:
                found.append(head_id)
    return readers


@dataclass(slots=True)
class _Box:
    """What one module box of a picture holds.

    Attributes:
        scopes: the drawn side's ops of each scope the box gathers, in order of
            first occurrence.
        live: how many ops of the drawn side it holds.
        ghost_ids: before-graph ids of the removed ops (ghosts) it holds, in id order.
        statuses: how many of its live ops the diff marks ``added``/``changed`` (or
            ``removed`` on the before side).
    """

    scopes: list[_ScopeOps] = field(default_factory=list)
    live: int = 0
    ghost_ids: list[int] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)


class _ViewBuilder:
    def __init__(
        self,
        *,
        level: int | None,
        expand: tuple[str, ...],
        diff: GraphDiff | None,
        side: str,
        reasons: Mapping[str, str],
        prefix: str,
        edge_labels: bool,
        split: tuple[str, ...] = (),
    ) -> None:
        self.level = level
        self.expand = expand
        self.opened = _opened(expand) | set(split)
        self.diff = diff
        self.side = side
        self.reasons = reasons
        self.prefix = prefix
        self.edge_labels = edge_labels
        self.nodes: dict[str, ViewNode] = {}
        self.clusters: dict[tuple[str, ...], Cluster] = {}
        self.edges: dict[tuple[str, str], ViewEdge] = {}
        self.folded: set[int] = set()
        self.ghost_folded: set[int] = set()
        # Snapshot id -> key of the ops drawn as boxes of their own; an op in a module
        # box is found through its scope (see _key_of).
        self.key: dict[int, str] = {}
        # Effective scope -> key of the module box holding its ops (None: drawn as ops).
        self.box_of: dict[str, str | None] = {}
        self.boxes: dict[str, _Box] = {}
        self.scopes: dict[int, str] = {}
        self.ghost_scopes: dict[int, str] = {}
        self.box_cache: dict[str, str | None] = {}
        self.sides: dict[str, _Side] = {}

    # -- placement ---------------------------------------------------------------

    def _scope_path(self, scope: str, base: str = "") -> tuple[str, ...]:
        """Cluster segments for the scopes of ``scope`` below ``base``."""
        if not scope or scope == base:
            return ()
        parts = scope.split(".")
        start = scope_depth(base) if base and scope.startswith(base + ".") else 0
        if start == 0 and base:
            return ()  # a different scope inside a block: keep it in the block cluster
        out = []
        for k in range(start + 1, len(parts) + 1):
            prefix = ".".join(parts[:k])
            path_seg = f"s:{prefix}"
            out.append(path_seg)
        return tuple(out)

    def _cluster_path(self, side: _Side, node_id: int, drawn: dict[int, str]) -> tuple[str, ...]:
        info = side.info[node_id]
        if info.parent is not None and info.parent in drawn:
            owner = side.info[info.parent]
            base = self.node_cluster.get(drawn[info.parent], ())
            block = f"b:{self.prefix}{drawn[info.parent]}.{info.block}"
            self._ensure_block((*base, block), owner.node, info.block)
            scope, owner_scope = side.scopes[node_id], side.scopes[owner.node.id]
            return (*base, block, *self._scope_path(scope, owner_scope))
        return self._scope_path(side.scopes[node_id])

    def _ensure_block(self, path: tuple[str, ...], owner: NodeSnapshot, index: int) -> None:
        if path not in self.clusters:
            names = _BLOCK_NAMES.get(owner.kind, ())
            name = names[index] if index < len(names) else f"block {index}"
            self.clusters[path] = Cluster(path, f"{owner.kind.split('::')[-1]} {name}", "block")

    # -- the drawn graph --------------------------------------------------------

    def add_graph(self, side: _Side) -> None:
        snapshot = side.snapshot
        self.folded |= side.folder.folded
        self.scopes = side.scopes
        self.node_cluster: dict[str, tuple[str, ...]] = {}
        drawn: dict[int, str] = {}  # ids drawn as op boxes (not absorbed in a scope box)
        p = self.prefix
        for index, value in enumerate(snapshot.inputs):
            if index == 0 and value.type.startswith("__torch__."):
                continue  # `self`: its reads are folded into the attribute paths
            key = f"{p}i{index}"
            self.nodes[key] = ViewNode(
                key,
                "input",
                f"input {value.name}",
                [short_type(value.type)],
                tooltip=f"graph input %{value.name} : {value.type}",
            )
        self.sides["n"] = side
        # Every op of a scope lands in the same module box, or every one is drawn: the
        # ops are placed a scope at a time (a few hundred of them), and only the ops
        # drawn on their own are visited one by one.
        box_of, boxes = self.box_of, self.boxes
        box_key = f"{p}s_"
        loose: list[int] = []
        for scope, ops in side.ops_by_scope.items():
            box = self._box(scope)
            if box is None:
                box_of[scope] = None
                loose.extend(ops.ids)
                continue
            key = box_key + box
            box_of[scope] = key
            held = boxes.get(key)
            if held is None:
                held = boxes[key] = _Box()
            held.scopes.append(ops)
            held.live += len(ops.ids)
        self._count_changes(side)
        loose.sort()  # drawing order is walk order, and node ids are walk positions
        for node_id in loose:
            view = self._full_view(side, node_id, "n", self._status(node_id))
            view.cluster = self._cluster_path(side, node_id, drawn)
            drawn[node_id] = view.key
            self.node_cluster[view.key] = view.cluster
            self.nodes[view.key] = view
            self.key[node_id] = view.key
        out_key = f"{p}out"
        self.nodes[out_key] = ViewNode(out_key, "output", "return", tooltip="graph outputs")
        self._edges_for(side, out_key)

    def _count_changes(self, side: _Side) -> None:
        """Count the diff's statuses of the ops in module boxes, from the diff's own sets
        (an export's step diffs touch a few hundred of the graph's 17k nodes)."""
        diff = self.diff
        if diff is None:
            return
        changes: list[tuple[Iterable[int], str]]
        if self.side == "after":
            added = diff.added
            changes = [
                (added, "added"),
                ((i for i in diff.changed if i not in added), "changed"),
            ]
        else:
            removed, changed = diff.removed, diff.changed
            was_changed = (b for b, a in diff.matched.items() if a in changed and b not in removed)
            changes = [(removed, "removed"), (was_changed, "changed")]
        folded, scopes, box_of, boxes = side.folder.folded, side.scopes, self.box_of, self.boxes
        for ids, status in changes:
            for node_id in ids:
                if node_id in folded:
                    continue
                key = box_of[scopes[node_id]]
                if key is not None:
                    boxes[key].statuses[status] += 1

    def _key_of(self, node_id: int) -> str | None:
        """The key of the box showing drawn-side op ``node_id`` (None: folded away)."""
        key = self.key.get(node_id)
        if key is None and node_id not in self.folded:
            scope = self.scopes.get(node_id)
            key = self.box_of.get(scope) if scope is not None else None
        return key

    def _box(self, scope: str) -> str | None:
        if scope not in self.box_cache:
            self.box_cache[scope] = box_prefix(scope, self.level, self.expand, self.opened)
        return self.box_cache[scope]

    def _full_view(self, side: _Side, node_id: int, letter: str, status: str) -> ViewNode:
        i = side.info[node_id]
        role, title, kept, tip = self._describe(i)
        if letter == "g":
            role, tip = "ghost", "removed: " + tip
        else:
            tip += self._change_text(node_id)
        return ViewNode(
            key=f"{self.prefix}{letter}{node_id}",
            role=role,
            title=title,
            rows=side.folder.rows(i.node),
            status=status,
            tooltip=tip,
            node_ids=[node_id],
            kept=kept,
        )

    def _status(self, node_id: int) -> str:
        if self.diff is None:
            return "same"
        if self.side == "after":
            return self.diff.status(node_id)
        if node_id in self.diff.removed:
            return "removed"
        other = self.diff.matched.get(node_id)
        return "changed" if other is not None and other in self.diff.changed else "same"

    def _change_text(self, node_id: int) -> str:
        if self.diff is None:
            return ""
        after_id = node_id if self.side == "after" else self.diff.matched.get(node_id)
        reasons = self.diff.changed.get(after_id) if after_id is not None else None
        return ("\nchanged: " + "; ".join(reasons)) if reasons else ""

    def _describe(self, info: NodeInfo) -> tuple[str, str, bool, str]:
        node = info.node
        where = []
        if node.scope:
            where.append(f"scope {node.scope}")
        if node.source:
            where.append(f"{node.source}" + (f": {node.source.text}" if node.source.text else ""))
        tip = node.line + ("\n" + "\n".join(where) if where else "")
        if node.kind == "prim::GetAttr":
            path = info.attribute or node.attribute("name") or "?"
            reason = self.reasons.get(path)
            kept = reason is not None
            if kept:
                tip = f"kept attribute self.{path}: {reason}\n{tip}"
            return "attribute", f"self.{path}", kept, tip
        if node.kind == "prim::Constant" and node.constant is not None:
            c = node.constant
            return "constant", c.text + (f" <{c.attribute}>" if c.attribute else ""), False, tip
        title = node.kind.removeprefix("aten::")
        return "op", title, False, tip

    def _edges_for(self, side: _Side, out_key: str) -> None:
        p, nodes, box_of, keys = self.prefix, self.nodes, self.box_of, self.key
        edges = side.edges
        # Drawn pair -> [index of its first edge in side.edges, how many edges it stands for].
        found: dict[tuple[str, str], list[int]] = {}

        def note(tail: str, head: str, first: int, count: int) -> None:
            seen = found.get((tail, head))
            if seen is None:
                found[(tail, head)] = [first, count]
            else:
                seen[0] = min(seen[0], first)
                seen[1] += count

        for (tail_input, tail_scope, head_scope), indices in side.edge_groups.items():
            head_box = box_of[head_scope]
            if tail_input:
                tail_box: str | None = p + tail_input
                if tail_box not in nodes:
                    continue  # `self`, not drawn
            else:
                tail_box = box_of[tail_scope]
            if head_box is not None and tail_box is not None:
                # The whole group joins two boxes (or stays inside one).
                if head_box != tail_box:
                    note(tail_box, head_box, indices[0], len(indices))
                continue
            for index in indices:
                head_id, tail, _value, _style = edges[index]
                head = head_box or keys[head_id]
                drawn_tail = tail_box or keys[tail]  # type: ignore[index]
                if drawn_tail != head:
                    note(drawn_tail, head, index, 1)
        # Drawn in the order their first edges come in the graph, each first edge's value
        # naming it, as when the edges were walked one at a time.
        for (tail, head), (first, count) in sorted(found.items(), key=lambda item: item[1][0]):
            value, style = edges[first][2], edges[first][3]
            self._edge(tail, head, side, value, style=style)
            self.edges[(tail, head)].count = count
        for out_tail, value in side.output_tails:
            if isinstance(out_tail, str):
                returned = p + out_tail if p + out_tail in nodes else None
            else:
                returned = self._key_of(out_tail)
            if returned is not None:
                self._edge(returned, out_key, side, value)

    def _edge(
        self,
        tail: str,
        head: str,
        side: _Side,
        value: str,
        *,
        style: str = "",
        status: str = "same",
    ) -> None:
        if tail == head:
            return
        existing = self.edges.get((tail, head))
        if existing is not None:
            existing.count += 1
            return
        v = side.snapshot.value(value)
        label = ""
        tooltip = f"%{value}"
        if v is not None:
            tooltip += f" : {v.type}"
            if self.edge_labels and "(" in v.type and not v.type.startswith("__torch__"):
                label = _clip(short_type(v.type), 32)
        self.edges[(tail, head)] = ViewEdge(tail, head, label, tooltip, status, style)

    # -- ghosts -----------------------------------------------------------------

    def add_ghosts(self, side: _Side) -> None:
        """Draw the diff's removed ops (before-graph ids) where they were."""
        assert self.diff is not None
        diff, folder, info = self.diff, side.folder, side.info
        folded = folder.folded
        self.ghost_folded |= folded
        self.sides["g"] = side
        p = self.prefix
        ghost_keys: dict[int, str] = {}
        # A step can remove most of a 17k-node graph: each scope's box is looked up once,
        # and its key is one string shared by all its ghosts.
        placed: dict[str, tuple[str, _Box] | None] = {}
        scopes, ghost_scopes = side.scopes, self.ghost_scopes
        for node_id in sorted(diff.removed):
            if node_id in folded:
                continue
            scope = scopes[node_id]
            ghost_scopes[node_id] = scope
            if scope in placed:
                spot = placed[scope]
            else:
                spot = placed[scope] = self._ghost_box(scope)
            if spot is not None:
                key, held = spot
                held.ghost_ids.append(node_id)
                ghost_keys[node_id] = key
                continue
            view = self._full_view(side, node_id, "g", "removed")
            view.cluster = self._scope_path(scope)
            self.nodes[view.key] = view
            ghost_keys[node_id] = view.key

        matched = diff.matched

        def where(before_id: int) -> str | None:
            key = ghost_keys.get(before_id)
            if key is not None:
                return key
            after_id = matched.get(before_id)
            return self._key_of(after_id) if after_id is not None else None

        params = {v.name: f"{p}i{k}" for k, v in enumerate(side.snapshot.inputs)}
        producer = folder.producer
        # Ops returning a graph output (output names are unique to their producer).
        returning = {producer.get(v) for v in side.snapshot.outputs}
        users = _readers(side.edges, ghost_keys)
        nodes, boxes, edges = self.nodes, self.boxes, self.edges
        for node_id, head in ghost_keys.items():
            node = info[node_id].node
            for value in node.inputs:
                pid = producer.get(value)
                if pid is not None and pid in folded:
                    continue
                tail = where(pid) if pid is not None else params.get(value)
                if (
                    tail is not None
                    and tail != head
                    and (tail in nodes or tail in boxes)
                    and (tail, head) not in edges
                ):
                    self._ghost_edge(tail, head, side, value)
            for out in node.outputs:
                for user_id in users.get(out.name, ()):
                    if user_id in ghost_keys:
                        continue  # drawn from the user's side
                    target = where(user_id)
                    if target is not None and target != head and (head, target) not in edges:
                        self._ghost_edge(head, target, side, out.name)
            if node_id in returning:
                self._ghost_edge(head, f"{p}out", side, node.outputs[0].name)

    def _ghost_box(self, scope: str) -> tuple[str, _Box] | None:
        """The key and contents of the module box ghosts of ``scope`` are counted in."""
        box = self._box(scope)
        if box is None:
            return None
        key = f"{self.prefix}s_{box}"
        held = self.boxes.get(key)
        if held is None:
            held = self.boxes[key] = _Box()
        return key, held

    def _ghost_edge(self, tail: str, head: str, side: _Side, value: str) -> None:
        if tail == head or (tail, head) in self.edges:
            return
        self._edge(tail, head, side, value, style="dashed", status="removed")

    # -- finishing ----------------------------------------------------------------

    def finish(self) -> ViewGraph:
        self._make_boxes()
        self._drop_dangling_edges()
        self._make_scope_clusters()
        return ViewGraph(
            nodes=self.nodes,
            edges=list(self.edges.values()),
            clusters=self.clusters,
            level=self.level,
            folded=self.folded,
            ghost_folded=self.ghost_folded,
            scopes=self.scopes,
            ghost_scopes=self.ghost_scopes,
        )

    def _make_boxes(self) -> None:
        renames: dict[str, str] = {}
        for key, held in self.boxes.items():
            scope = key[len(self.prefix) + 2 :]
            if held.live + len(held.ghost_ids) == 1:
                # A box around one op says less than the op itself.
                if held.ghost_ids:
                    letter, node_id, status = "g", held.ghost_ids[0], "removed"
                else:
                    node_id = held.scopes[0].ids[0]
                    letter, status = "n", self._status(node_id)
                only = self._full_view(self.sides[letter], node_id, letter, status)
                only.cluster = self._scope_path(scope)[:-1]
                only.rows = [*only.rows, f"in {scope}"][-_MAX_ROWS:]
                renames[key] = only.key
                self.nodes[only.key] = only
                continue
            self.nodes[key] = self._box_view(key, scope, held)
        self._rekey(renames)

    def _box_view(self, key: str, scope: str, held: _Box) -> ViewNode:
        """The ``scope`` node of a module box holding more than one op."""
        live = held.live
        counts: Counter[str] = Counter()
        counts["ops"] = live
        counts.update(held.statuses)
        if held.ghost_ids:
            counts["removed"] += len(held.ghost_ids)
        reasons = self.reasons
        kept = sum(path in reasons for ops in held.scopes for path in ops.reads) if reasons else 0
        if kept:
            counts["kept"] = kept
        status = "same"
        if counts["added"] or counts["removed"] or counts["changed"]:
            status = "changed"
            if not live:
                status = "removed"
            elif counts["added"] == live and not counts["removed"]:
                status = "added"
        rows = [f"{counts['ops']} ops" if live else "removed"]
        delta = " ".join(
            f"{sign}{counts[name]}"
            for sign, name in (("+", "added"), ("-", "removed"), ("~", "changed"))
            if counts[name]
        )
        if delta:
            rows.append(delta)
        if counts["kept"]:
            rows.append(f"{counts['kept']} kept attribute read(s)")
        top = ", ".join(f"{k} x{n}" for k, n in _top_kinds(held.scopes))
        if len(held.scopes) == 1:
            ids = list(held.scopes[0].ids)
        else:
            # Listed in walk order (node ids are walk positions), as the ops were met.
            ids = sorted(chain.from_iterable(ops.ids for ops in held.scopes))
        return ViewNode(
            key=key,
            role="scope",
            title=scope,
            rows=rows,
            cluster=self._scope_path(scope)[:-1],
            status=status,
            tooltip=f"module {scope}: {counts['ops']} ops ({top})"
            + (f"; {delta}" if delta else "")
            + "; expand it to see the ops",
            node_ids=ids,
            ghost_ids=list(held.ghost_ids),
            counts=counts,
            kept=counts["kept"] > 0,
        )

    def _rekey(self, renames: Mapping[str, str]) -> None:
        """Point edges at new node keys (one pass for all renames)."""
        if not renames:
            return
        edges: dict[tuple[str, str], ViewEdge] = {}
        for (tail, head), edge in self.edges.items():
            tail = renames.get(tail, tail)
            head = renames.get(head, head)
            edge.tail, edge.head = tail, head
            if tail != head and (tail, head) not in edges:
                edges[(tail, head)] = edge
        self.edges = edges

    def _drop_dangling_edges(self) -> None:
        self.edges = {
            k: e for k, e in self.edges.items() if e.tail in self.nodes and e.head in self.nodes
        }

    def _make_scope_clusters(self) -> None:
        members: Counter[tuple[str, ...]] = Counter()
        for node in self.nodes.values():
            for k in range(1, len(node.cluster) + 1):
                members[node.cluster[:k]] += 1
        changed_paths: dict[tuple[str, ...], str] = {}
        for node in self.nodes.values():
            if node.status != "same":
                for k in range(1, len(node.cluster) + 1):
                    changed_paths[node.cluster[:k]] = "changed"
        for path in members:
            last = path[-1]
            if path not in self.clusters and last.startswith("s:"):
                scope = last[2:]
                self.clusters[path] = Cluster(path, scope, "scope")
            if path in self.clusters:
                self.clusters[path].status = changed_paths.get(path, "same")
        # Block clusters that ended up empty (their ops all boxed) are dropped.
        self.clusters = {p: c for p, c in self.clusters.items() if members.get(p)}
        # A scope cluster around a single box (no sub-cluster) only costs layout time:
        # the box moves to the parent cluster and names its scope in a row instead.
        has_child = {path[:-1] for path in self.clusters if len(path) > 1}
        for node in self.nodes.values():
            path = node.cluster
            if (
                path
                and members[path] == 1
                and path not in has_child
                and self.clusters[path].kind == "scope"
            ):
                scope = self.clusters.pop(path).label
                node.cluster = path[:-1]
                if node.role != "scope" and len(node.rows) < _MAX_ROWS:
                    node.rows.append(f"in {scope}")
