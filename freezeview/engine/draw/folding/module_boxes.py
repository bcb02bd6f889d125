"""Module boxes and scope clusters: what a collapsed module says, which clusters stay.

At a collapse level every scope that deep becomes one box (a :class:`ModuleBox` gathers the
ops of the scopes it holds); :func:`box_of_module` writes the box a reader sees (op count,
changes, kept attribute reads, the commonest ops) and :func:`scope_clusters` keeps the
module clusters worth their layout time.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from itertools import chain

from ...plumbing import plural
from .drawing import Box, Cluster
from .prepared import ScopeOps
from .rows import MAX_ROWS

__all__ = ["box_of_module", "scope_clusters"]


@dataclass(slots=True)
class ModuleBox:
    """What one module box of a picture holds.

    Attributes:
        scopes: the drawn side's ops of each scope the box gathers, in order of
            first occurrence.
        live: how many ops of the drawn side it holds.
        ghost_ids: before-graph ids of the removed ops (ghosts) it holds, in id order.
        statuses: how many of its live ops the diff marks ``added``/``changed`` (or
            ``removed`` on the before side).
    """

    scopes: list[ScopeOps] = field(default_factory=list)
    live: int = 0
    ghost_ids: list[int] = field(default_factory=list)
    statuses: Counter[str] = field(default_factory=Counter)


def _top_kinds(scopes: Sequence[ScopeOps], n: int = 3) -> list[tuple[str, int]]:
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


def box_of_module(
    key: str,
    scope: str,
    held: ModuleBox,
    reasons: Mapping[str, str],
    cluster: tuple[str, ...],
) -> Box:
    """The ``scope`` node of a module box holding more than one op.

    Args:
        key: the box's node key.
        scope: the dotted scope the box stands for.
        held: what the box holds.
        reasons: attribute path -> why freezing kept it (kept reads are counted).
        cluster: the path of the cluster the box is drawn in.
    """
    live = held.live
    counts: Counter[str] = Counter()
    counts["ops"] = live
    counts.update(held.statuses)
    if held.ghost_ids:
        counts["removed"] += len(held.ghost_ids)
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
    rows = [plural(counts["ops"], "op") if live else "removed"]
    delta = " ".join(
        f"{sign}{counts[name]}"
        for sign, name in (("+", "added"), ("-", "removed"), ("~", "changed"))
        if counts[name]
    )
    if delta:
        rows.append(delta)
    if counts["kept"]:
        rows.append(plural(counts["kept"], "kept attribute read"))
    top = ", ".join(f"{k} x{n}" for k, n in _top_kinds(held.scopes))
    if len(held.scopes) == 1:
        ids = list(held.scopes[0].ids)
    else:
        # Listed in walk order (node ids are walk positions), as the ops were met.
        ids = sorted(chain.from_iterable(ops.ids for ops in held.scopes))
    return Box(
        key=key,
        role="scope",
        title=scope,
        rows=rows,
        cluster=cluster,
        status=status,
        tooltip=f"module {scope}: {plural(counts['ops'], 'op')} ({top})"
        + (f"; {delta}" if delta else "")
        + "; expand it to see the ops",
        node_ids=ids,
        ghost_ids=list(held.ghost_ids),
        counts=counts,
        kept=counts["kept"] > 0,
    )


def scope_clusters(
    nodes: Mapping[str, Box], clusters: dict[tuple[str, ...], Cluster]
) -> dict[tuple[str, ...], Cluster]:
    """The clusters a picture keeps, module scope clusters added where its boxes sit.

    Block clusters that ended up empty are dropped, and a scope cluster around a single
    box moves the box to its parent cluster (its rows then name the scope).

    Args:
        nodes: the picture's boxes (a moved box's cluster and rows are updated).
        clusters: the block clusters made while placing the ops (updated).

    Returns:
        The clusters to draw, by path.
    """
    members: Counter[tuple[str, ...]] = Counter()
    for node in nodes.values():
        for k in range(1, len(node.cluster) + 1):
            members[node.cluster[:k]] += 1
    changed_paths: dict[tuple[str, ...], str] = {}
    for node in nodes.values():
        if node.status != "same":
            for k in range(1, len(node.cluster) + 1):
                changed_paths[node.cluster[:k]] = "changed"
    for path in members:
        last = path[-1]
        if path not in clusters and last.startswith("s:"):
            scope = last[2:]
            clusters[path] = Cluster(path, scope, "scope")
        if path in clusters:
            clusters[path].status = changed_paths.get(path, "same")
    # Block clusters that ended up empty (their ops all boxed) are dropped.
    clusters = {p: c for p, c in clusters.items() if members.get(p)}
    # A scope cluster around a single box (no sub-cluster) only costs layout time:
    # the box moves to the parent cluster and names its scope in a row instead.
    has_child = {path[:-1] for path in clusters if len(path) > 1}
    for node in nodes.values():
        path = node.cluster
        if path and members[path] == 1 and path not in has_child and clusters[path].kind == "scope":
            scope = clusters.pop(path).label
            node.cluster = path[:-1]
            if node.role != "scope" and len(node.rows) < MAX_ROWS:
                node.rows.append(f"in {scope}")
    return clusters
