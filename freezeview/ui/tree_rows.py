"""The rows of the Model pane's tree, laid out from an explanation: pure, so off the event
loop.

:func:`lay_out` takes every attribute's verdict and the tree's status filter and says
which rows show under which module, in what order, with what the tree needs to draw
and update them (each row's place, the kept verdicts under each module, the header's
counts). A big model's explanation has tens of thousands of verdicts, too many to lay
out on the event loop between two keys, so the explain worker lays them out as it
receives them (``MainScreen.work_out_verdicts``) and the tree only makes the nodes that
show (ui/widgets/model_tree.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from ..session import (
    HOUSEKEEPING,  # torch-free values
    AttrSummary,
)

__all__ = ["RANGE_ROWS", "Rows", "TreeRows", "lay_out", "ranges"]

#: The rows a status filter shows: each module's children (path, data, whether a module),
#: in order, by the module's path ("" for the root's).
Rows = dict[str, list[tuple[str, AttrSummary | str, bool]]]

#: A module with more rows than this shows them folded in ranges of this many (of
#: ranges, past this many squared), as debuggers show long arrays: a module of thousands
#: of blocks opens on a few range rows, not on every row made at once.
RANGE_ROWS = 100


@dataclass(frozen=True, slots=True, eq=False)
class TreeRows:
    """An explanation's rows under one status filter."""

    status_filter: str
    #: Each module's rows, in order.
    children: Rows
    #: Each row's module.
    parent_of: dict[str, str]
    #: Each row's number among its module's rows.
    place: dict[str, int]
    #: Each row's data (its verdict, or a module's path).
    data_of: dict[str, AttrSummary | str]
    #: Kept verdicts at or under each row (rows with none are left out).
    kept_under: dict[str, int]
    #: Every verdict's status, counted (the header's counts: filtered rows included).
    counts: dict[str, int]
    #: The rows without their verdicts: equal shapes, the same nodes.
    shape: tuple[tuple[str, tuple[str, ...], tuple[bool, ...]], ...]


def lay_out(summaries: Sequence[AttrSummary], status_filter: str = "all") -> TreeRows:
    """The rows ``status_filter`` (``all``, or a status) shows of ``summaries``: modules first
    (submodules carry verdicts too), then their attributes, in the model's order."""
    # Every module carries `training` and a hook placeholder; hundreds of those rows
    # would hide what matters, so they show only when kept (as in `freezeview explain`).
    shown = [
        v
        for v in summaries
        if status_filter in ("all", v.status)
        and (v.path.rsplit(".", 1)[-1] not in HOUSEKEEPING or v.status == "kept")
    ]
    shown_ids = {id(v) for v in shown}
    # A module without a verdict of its own goes where its first attribute is (a parent
    # before its children).
    wanted: dict[str, None] = {}
    for v in shown:
        parts = v.path.split(".")
        for i in range(1, len(parts)):
            wanted.setdefault(".".join(parts[:i]))
    children: Rows = {}
    parent_of: dict[str, str] = {}
    modules = {""}

    def place(path: str, owner: str, data: AttrSummary | str, module: bool) -> None:
        parent = owner if owner in modules else ""
        children.setdefault(parent, []).append((path, data, module))
        parent_of[path] = parent
        if module:
            modules.add(path)

    for v in summaries:
        if v.kind == "submodule" and (v.path in wanted or id(v) in shown_ids):
            place(v.path, v.owner, v, True)
    for path in [path for path in wanted if path not in modules]:
        place(path, path.rsplit(".", 1)[0] if "." in path else "", path, True)
    for v in shown:
        if v.kind != "submodule":
            place(v.path, v.owner, v, False)

    counts = {s: 0 for s in ("inlined", "kept", "dropped")}
    for v in summaries:
        counts[v.status] = counts.get(v.status, 0) + 1
    data_of = {path: data for rows in children.values() for path, data, _ in rows}
    kept_under: dict[str, int] = {}
    for path, data in data_of.items():
        if isinstance(data, AttrSummary) and data.status == "kept":  # a row reading "kept"
            while path:
                kept_under[path] = kept_under.get(path, 0) + 1
                path = parent_of.get(path, "")
    return TreeRows(
        status_filter=status_filter,
        children=children,
        parent_of=parent_of,
        place={path: i for rows in children.values() for i, (path, _, _) in enumerate(rows)},
        data_of=data_of,
        kept_under=kept_under,
        counts=counts,
        shape=tuple(
            (parent, tuple(row[0] for row in rows), tuple(row[2] for row in rows))
            for parent, rows in children.items()
        ),
    )


def ranges(rows: int) -> list[tuple[int, int]]:
    """How ``rows`` rows fold: ``(start, stop)`` of each range, or none if they fit."""
    if rows <= RANGE_ROWS:
        return []
    size = RANGE_ROWS
    while rows > size * RANGE_ROWS:
        size *= RANGE_ROWS
    return [(start, min(start + size, rows)) for start in range(0, rows, size)]
