"""Attribute paths of repeated blocks written once: ``layers.0-11.linear1.weight``.

An expectations file written for a ResNet-50 listed every inlined path of its 16 blocks,
one per line. :func:`group_paths` writes paths that differ only in integer components
(a container's children) as one pattern, and exactly: ``layer1.0-2.conv1.weight`` is
those three paths, no more, no fewer. A component that is a set of indices reads
``0-11`` (one run) or ``{0-3,5,7-9}``. explain titles its groups of alike modules with
it too (with ``[0-3,5]``: explain's patterns are not read back).

:func:`path_matcher` reads such a pattern back (with fnmatch globs, ``* ? [...]``, in
its other components). Neither form can be an attribute's own name: TorchScript names
are identifiers or integers.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Sequence

__all__ = ["group_paths", "has_range", "is_index", "is_pattern", "path_matcher"]

# One component: a name, or a set of integers (one index or many, merged).
_Parts = tuple[str | frozenset[int], ...]

_RANGE = re.compile(r"^(?:\d+-\d+|\{\d+(?:-\d+)?(?:,\d+(?:-\d+)?)*\})$")


def is_index(part: str) -> bool:
    """Whether a path component is a container's integer index (``"01"`` is not)."""
    # "01" stays a name: written back as an integer it would be another path.
    return part.isdigit() and str(int(part)) == part


def _parts(path: str) -> _Parts:
    return tuple(frozenset({int(p)}) if is_index(p) else p for p in path.split("."))


def _merge_at(items: list[_Parts], position: int) -> list[_Parts]:
    """Items equal but at ``position``, where each holds integers, merged into one (the
    merged item's paths are exactly the union of the merged items' paths)."""
    merged: dict[Hashable, set[int]] = {}
    order: list[Hashable] = []
    whole: dict[Hashable, _Parts] = {}
    shape: dict[Hashable, tuple[_Parts, _Parts]] = {}
    for item in items:
        if position >= len(item) or isinstance(item[position], str):
            key: Hashable = ("whole", item)
            whole[key] = item
            order.append(key)
            continue
        key = ("at", len(item), item[:position], item[position + 1 :])
        if key not in merged:
            merged[key] = set()
            shape[key] = (item[:position], item[position + 1 :])
            order.append(key)
        merged[key] |= item[position]  # type: ignore[arg-type]
    result: list[_Parts] = []
    for key in order:
        if key in whole:
            result.append(whole[key])
        else:
            before, after = shape[key]
            result.append((*before, frozenset(merged[key]), *after))
    return result


def _runs(numbers: frozenset[int], brackets: str) -> str:
    """``0-511``, ``7``, or ``{0-3,5,7-9}`` (in ``brackets``) when not one run."""
    ordered = sorted(numbers)
    runs: list[str] = []
    start = prev = ordered[0]
    for n in [*ordered[1:], None]:
        if n is not None and n == prev + 1:
            prev = n
            continue
        runs.append(str(start) if start == prev else f"{start}-{prev}")
        if n is not None:
            start = prev = n
    return runs[0] if len(runs) == 1 else brackets[0] + ",".join(runs) + brackets[1]


def group_paths(paths: Sequence[str], *, brackets: str = "{}") -> list[str]:
    """``paths`` written compactly and exactly, in first-seen order.

    Example: ``["b.0.w", "b.1.w", "b.2.w", "head"]`` -> ``["b.0-2.w", "head"]``.

    Args:
        paths: dotted attribute or module paths.
        brackets: the two characters around a set of indices that is not one run.
            ``{}`` (expectations files: :func:`path_matcher` reads ``[...]`` as a
            glob); explain's titles use ``[]``.
    """
    if not paths:
        return []
    items = list(dict.fromkeys(_parts(p) for p in paths))
    while True:
        before = len(items)
        width = max(len(item) for item in items)
        for position in range(width - 1, -1, -1):
            items = _merge_at(items, position)
        if len(items) == before:
            break
    return [
        ".".join(_runs(c, brackets) if isinstance(c, frozenset) else c for c in item)
        for item in items
    ]


def _numbers(component: str) -> frozenset[int]:
    found: set[int] = set()
    for run in component.strip("{}").split(","):
        low, _, high = run.partition("-")
        found.update(range(int(low), int(high or low) + 1))
    return frozenset(found)


def _glob(component: str) -> str:
    """fnmatch's ``* ? [...]`` in one component, as a regular expression."""
    out: list[str] = []
    i = 0
    while i < len(component):
        c = component[i]
        if c == "*":
            out.append(".*")
        elif c == "?":
            out.append(".")
        elif c == "[" and "]" in component[i + 2 :]:
            end = component.index("]", i + 2)
            body = component[i + 1 : end]
            out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
            i = end
        else:
            out.append(re.escape(c))
        i += 1
    return "".join(out)


def has_range(pattern: str) -> bool:
    """Whether a component of ``pattern`` is an index range (``0-11``, ``{0-3,5}``)."""
    return any(_RANGE.match(part) for part in pattern.split("."))


def is_pattern(pattern: str) -> bool:
    """Whether ``pattern`` can stand for more than one path (a glob or an index range)."""
    return any(c in pattern for c in "*?[") or has_range(pattern)


def path_matcher(pattern: str) -> Callable[[str], bool]:
    """A test of dotted paths against ``pattern``: fnmatch's globs (``*`` reaches across
    dots, as in fnmatch), and index ranges (``0-11``, ``{0-3,5}``) as whole components."""
    regex: list[str] = []
    ranges: list[frozenset[int]] = []
    for part in pattern.split("."):
        if _RANGE.match(part):
            regex.append(r"(\d+)")
            ranges.append(_numbers(part))
        else:
            regex.append(_glob(part))
    compiled = re.compile(r"\.".join(regex), re.DOTALL)

    def matches(path: str) -> bool:
        found = compiled.fullmatch(path)
        if found is None:
            return False
        return all(
            is_index(g) and int(g) in allowed
            for g, allowed in zip(found.groups(), ranges, strict=True)
        )

    return matches
