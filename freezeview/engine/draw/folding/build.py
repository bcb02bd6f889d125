"""Turn a graph snapshot (and optionally a diff) into the picture freezeview draws.

A one-node-per-IR-op picture does not scale (DESIGN.md, issue 7): a handful of
constants (``1``, ``[1, 1]``, ``None``) feed 50-120 users each and ``dot`` spends
minutes routing those edges, while the reader learns nothing from them. So the drawn
graph, a :class:`Drawing`, is built in three moves:

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

The values live in :mod:`.drawing`, scopes and levels in :mod:`.scopes`, the rows of
folded nodes in :mod:`.rows`, what is computed once per snapshot in :mod:`.prepared` and
the module boxes in :mod:`.module_boxes`; this module builds the drawing. Nothing is
rendered here; :mod:`freezeview.engine.draw.pictures.render` turns a Drawing into
DOT and runs Graphviz.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from ...diff import GraphDiff, NodeInfo
from ...graph import GraphSnapshot, NodeSnapshot
from .drawing import CONSTANT_MODES, Box, BoxEdge, Cluster, Drawing
from .module_boxes import ModuleBox, box_of_module, scope_clusters
from .prepared import PreparedSide, prepare_snapshot, readers_of
from .rows import MAX_ROWS, clip_row, short_type
from .scopes import BLOCK_NAMES, box_prefix, opened_ancestors, scope_depth

__all__ = ["build_drawing"]


def build_drawing(
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
) -> Drawing:
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
        The :class:`Drawing`.
    """
    if constants not in CONSTANT_MODES:
        raise ValueError(f"constants must be one of {', '.join(CONSTANT_MODES)}")
    builder = _DrawingBuilder(
        level=level,
        expand=tuple(expand),
        diff=diff,
        side=side,
        reasons=reasons or {},
        prefix=key_prefix,
        edge_labels=edge_labels,
        split=tuple(split),
    )
    builder.add_graph(prepare_snapshot(snapshot, constants, modules))
    if diff is not None and side == "after" and ghosts:
        builder.add_ghosts(prepare_snapshot(diff.before, constants, modules))
    return builder.finish()


class _DrawingBuilder:
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
        self.opened = opened_ancestors(expand) | set(split)
        self.diff = diff
        self.side = side
        self.reasons = reasons
        self.prefix = prefix
        self.edge_labels = edge_labels
        self.nodes: dict[str, Box] = {}
        self.clusters: dict[tuple[str, ...], Cluster] = {}
        self.edges: dict[tuple[str, str], BoxEdge] = {}
        self.folded: set[int] = set()
        self.ghost_folded: set[int] = set()
        # Snapshot id -> key of the ops drawn as boxes of their own; an op in a module
        # box is found through its scope (see _key_of).
        self.key: dict[int, str] = {}
        # Effective scope -> key of the module box holding its ops (None: drawn as ops).
        self.box_of: dict[str, str | None] = {}
        self.boxes: dict[str, ModuleBox] = {}
        self.scopes: dict[int, str] = {}
        self.ghost_scopes: dict[int, str] = {}
        self.box_cache: dict[str, str | None] = {}
        self.sides: dict[str, PreparedSide] = {}

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

    def _cluster_path(
        self, side: PreparedSide, node_id: int, drawn: dict[int, str]
    ) -> tuple[str, ...]:
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
            names = BLOCK_NAMES.get(owner.kind, ())
            name = names[index] if index < len(names) else f"block {index}"
            self.clusters[path] = Cluster(path, f"{owner.kind.split('::')[-1]} {name}", "block")

    # -- the drawn graph --------------------------------------------------------

    def add_graph(self, side: PreparedSide) -> None:
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
            self.nodes[key] = Box(
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
                held = boxes[key] = ModuleBox()
            held.scopes.append(ops)
            held.live += len(ops.ids)
        self._count_changes(side)
        loose.sort()  # drawing order is walk order, and node ids are walk positions
        for node_id in loose:
            op_box = self._op_box(side, node_id, "n", self._status(node_id))
            op_box.cluster = self._cluster_path(side, node_id, drawn)
            drawn[node_id] = op_box.key
            self.node_cluster[op_box.key] = op_box.cluster
            self.nodes[op_box.key] = op_box
            self.key[node_id] = op_box.key
        out_key = f"{p}out"
        self.nodes[out_key] = Box(out_key, "output", "return", tooltip="graph outputs")
        self._edges_for(side, out_key)

    def _count_changes(self, side: PreparedSide) -> None:
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

    def _op_box(self, side: PreparedSide, node_id: int, letter: str, status: str) -> Box:
        i = side.info[node_id]
        role, title, kept, tip = self._describe(i)
        if letter == "g":
            role, tip = "ghost", "removed: " + tip
        else:
            tip += self._change_text(node_id)
        return Box(
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

    def _edges_for(self, side: PreparedSide, out_key: str) -> None:
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
        side: PreparedSide,
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
                label = clip_row(short_type(v.type), 32)
        self.edges[(tail, head)] = BoxEdge(tail, head, label, tooltip, status, style)

    # -- ghosts -----------------------------------------------------------------

    def add_ghosts(self, side: PreparedSide) -> None:
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
        placed: dict[str, tuple[str, ModuleBox] | None] = {}
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
            op_box = self._op_box(side, node_id, "g", "removed")
            op_box.cluster = self._scope_path(scope)
            self.nodes[op_box.key] = op_box
            ghost_keys[node_id] = op_box.key

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
        users = readers_of(side.edges, ghost_keys)
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

    def _ghost_box(self, scope: str) -> tuple[str, ModuleBox] | None:
        """The key and contents of the module box ghosts of ``scope`` are counted in."""
        box = self._box(scope)
        if box is None:
            return None
        key = f"{self.prefix}s_{box}"
        held = self.boxes.get(key)
        if held is None:
            held = self.boxes[key] = ModuleBox()
        return key, held

    def _ghost_edge(self, tail: str, head: str, side: PreparedSide, value: str) -> None:
        if tail == head or (tail, head) in self.edges:
            return
        self._edge(tail, head, side, value, style="dashed", status="removed")

    # -- finishing ----------------------------------------------------------------

    def finish(self) -> Drawing:
        self._make_boxes()
        self._drop_dangling_edges()
        self.clusters = scope_clusters(self.nodes, self.clusters)
        return Drawing(
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
                only = self._op_box(self.sides[letter], node_id, letter, status)
                only.cluster = self._scope_path(scope)[:-1]
                only.rows = [*only.rows, f"in {scope}"][-MAX_ROWS:]
                renames[key] = only.key
                self.nodes[only.key] = only
                continue
            self.nodes[key] = box_of_module(
                key, scope, held, self.reasons, self._scope_path(scope)[:-1]
            )
        self._rekey(renames)

    def _rekey(self, renames: Mapping[str, str]) -> None:
        """Point edges at new node keys (one pass for all renames)."""
        if not renames:
            return
        edges: dict[tuple[str, str], BoxEdge] = {}
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
