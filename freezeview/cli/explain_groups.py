"""Alike submodules printed once: explain's human output on models of repeated blocks.

A stack of 512 Conv-BN-ReLU blocks has 512 BatchNorm2d tables that differ in nothing but
the module's path. As torch's own ``ModuleList`` repr collapses repeated children
(``(0-11): 12 x TransformerEncoderLayer(...)``), explain prints such modules once,
titled with the paths they cover: ``0-511.1  BatchNorm2d  (512 alike)``.

Two modules are alike when they have the same TorchScript class and the same shown
rows, row for row: attribute, kind, type, value, status and every reason field. The
only difference allowed is the IR's value names (``%num_batches_tracked.2`` against
``.7``), which number each inlined copy of the same code; a group whose members' names
differ says whose names are shown. A module with a kept attribute, or a folded one the
frozen graph still writes (``written-constant``), is never grouped: that is what a user
reads explain for. Integer-named rows of one table (a container's children, ``0``
to ``511``) collapse the same way into one row.

``--json`` is untouched by all this; ``--each-module`` turns it off.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ..engine.ci import group_paths, is_index

if TYPE_CHECKING:
    from ..engine.reasons import AttributeVerdict

__all__ = [
    "ModuleGroup",
    "RowGroup",
    "collapse_rows",
    "group_modules",
    "path_pattern",
    "row_keys",
]

# An IR value name: `%x`, `%num_batches_tracked.2`, `%36`.
_VALUE_NAME = re.compile(r"%[\w.]+")


@dataclass
class ModuleGroup:
    """One table of explain's output: one module, or alike modules printed once.

    Attributes:
        owners: the module paths, in the order explain met them.
        rows: the first module's rows, as printed.
        names_differ: the members' reasons differ in IR value names (shown: the first's).
    """

    owners: list[str]
    rows: list[AttributeVerdict]
    names_differ: bool = False

    @property
    def title_paths(self) -> str:
        """The paths the table covers, exactly (see :func:`path_pattern`)."""
        if len(self.owners) == 1:
            return self.owners[0] or "(root module)"
        return path_pattern(self.owners)


@dataclass
class RowGroup:
    """Rows of one table that differ only in their integer names (a container's
    children): printed as one row named by :func:`path_pattern` of the names."""

    rows: list[AttributeVerdict] = field(default_factory=list)
    names_differ: bool = False

    @property
    def name(self) -> str:
        """The row's attribute cell: ``0-511 (512 alike)``, or the one name."""
        if len(self.rows) == 1:
            return self.rows[0].info.name
        return f"{path_pattern([v.info.name for v in self.rows])} ({len(self.rows)} alike)"


def _news(v: AttributeVerdict) -> bool:
    """A row that must print under its own name: kept, or a written folded constant."""
    return v.status == "kept" or any(r.code == "written-constant" for r in v.reasons)


def _norm(text: str | None) -> str | None:
    return _VALUE_NAME.sub("%", text) if text and "%" in text else text


def row_keys(
    v: AttributeVerdict, cells: Callable[[AttributeVerdict], tuple[str, ...]]
) -> tuple[tuple[Hashable, ...], tuple[Hashable, ...]]:
    """A row's key without its IR value names, and its exact key."""
    exact = tuple((r.code, r.message, r.node, r.source, r.method, r.source_text) for r in v.reasons)
    loose = tuple(
        (code, _norm(message), _norm(node), *rest) for code, message, node, *rest in exact
    )
    head = (v.kind, v.type, v.status, cells(v))
    return (*head, loose), (*head, exact)


def group_modules(
    owners: dict[str, list[AttributeVerdict]],
    type_of: Callable[[str], str | None],
    cells: Callable[[AttributeVerdict], tuple[str, ...]],
    *,
    each: bool = False,
) -> list[ModuleGroup]:
    """The tables to print, in ``owners``' order, alike modules in one group.

    Args:
        owners: each module's shown rows, in print order, by module path.
        type_of: a module path's TorchScript class (None when unknown: never grouped).
        cells: the printed type and value cells of a row, compared with the rest.
        each: one group per module (``--each-module``).
    """
    groups: list[ModuleGroup] = []
    by_key: dict[Hashable, ModuleGroup] = {}
    exact_of: dict[int, tuple[Hashable, ...]] = {}
    for owner, rows in owners.items():
        type_name = type_of(owner)
        groupable = (
            not each
            and owner != ""
            and type_name is not None
            and rows
            # A kept or written attribute is the news explain is read for: never folded away.
            and not any(_news(v) for v in rows)
        )
        if not groupable:
            groups.append(ModuleGroup([owner], rows))
            continue
        keys = [row_keys(v, cells) for v in rows]
        key = (type_name, tuple((v.info.name, k[0]) for v, k in zip(rows, keys, strict=True)))
        exact = tuple(k[1] for k in keys)
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = ModuleGroup([owner], rows)
            exact_of[id(group)] = exact
            groups.append(group)
        else:
            group.owners.append(owner)
            group.names_differ = group.names_differ or exact != exact_of[id(group)]
    return groups


def collapse_rows(
    rows: list[AttributeVerdict],
    cells: Callable[[AttributeVerdict], tuple[str, ...]],
    *,
    each: bool = False,
) -> list[RowGroup]:
    """``rows`` with integer-named, alike rows merged (never a kept or written one), in
    first-seen order."""
    out: list[RowGroup] = []
    by_key: dict[Hashable, RowGroup] = {}
    exact_of: dict[int, tuple[Hashable, ...]] = {}
    for v in rows:
        if each or _news(v) or not is_index(v.info.name):
            out.append(RowGroup([v]))
            continue
        key, exact = row_keys(v, cells)
        group = by_key.get(key)
        if group is None:
            group = by_key[key] = RowGroup([v])
            exact_of[id(group)] = exact
            out.append(group)
        else:
            group.rows.append(v)
            group.names_differ = group.names_differ or exact != exact_of[id(group)]
    return out


def path_pattern(paths: Sequence[str]) -> str:
    """``paths`` written compactly and exactly: ``blocks.0-511.bn``.

    A component that is a set of indices reads ``0-511`` (one run) or ``[0-3,5,7-9]``;
    a pattern stands for every combination of its components, and patterns that cannot
    merge are listed with ", ". ``layers.0-11.linear1`` is 12 paths, no more, no fewer.
    """
    return ", ".join(group_paths(paths, brackets="[]"))
