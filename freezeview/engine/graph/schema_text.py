"""Operator schemas' alias annotations, read from the schema's text without torch.

The app's screen process never imports torch (about 300 MB and a second of frozen
screen): marking an attribute's writers and the inspector's node facts read what a
schema writes and aliases here. ``tests/engine/graph/test_schema_text.py`` holds it to
``torch._C.parse_schema`` on every schema torch registers.
"""

from __future__ import annotations

__all__ = ["schema_args", "schema_effects_text"]

import functools
import re
from collections.abc import Iterator

_ANNOTATION_RE = re.compile(r"\(([^()]*)\)")


def _depths(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, bracket depth after it) of each character of ``text`` from
    ``start`` that is outside quotes: the one walk both splitters below share."""
    depth = 0
    quote = ""
    for i in range(start, len(text)):
        ch = text[i]
        if quote:
            if ch == quote and text[i - 1] != "\\":
                quote = ""
            continue
        if ch in "\"'":
            quote = ch
            continue
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        yield i, ch, depth


def _split_top(text: str) -> list[str]:
    """``text`` split at the commas outside brackets and quotes."""
    parts: list[str] = []
    start = 0
    for i, ch, depth in _depths(text):
        if ch == "," and depth == 0:
            parts.append(text[start:i])
            start = i + 1
    parts.append(text[start:])
    return [p.strip() for p in parts if p.strip()]


def _matching(text: str, open_at: int) -> int:
    """Index of the bracket closing the one at ``open_at``."""
    for i, ch, depth in _depths(text, open_at):
        if ch in ")]" and depth == 0:
            return i
    return len(text) - 1


# Types written with brackets of their own: ``Dict(str, t)``, ``Future(t)``.
_CONTAINERS = frozenset({"Dict", "Future", "RRef", "Await", "Union", "Optional", "Tuple"})


def _annotation(arg: str, returned: bool = False) -> tuple[bool, tuple[str, ...]] | None:
    """(writes, alias sets before ``->``) of one argument's or return's type, or None.

    The annotation is the bracket after a type (``Tensor(a!)``, ``Tensor(a)[]``,
    ``Dict(str, t)(a!)``), not a container type's own (``Dict(str, t)``) nor a tuple
    type's (``(str, t)[]``).
    """
    text = arg.split("=", 1)[0]
    i = 0
    depth_start = 0
    while True:
        open_at = text.find("(", i)
        if open_at < 0:
            return None
        close = _matching(text, open_at)
        before = text[depth_start:open_at].rstrip()
        word = re.search(r"(\w+)$", before)
        is_type_bracket = (
            not before
            or before[-1] in "(,["
            or (
                word is not None and word.group(1) in _CONTAINERS and before.endswith(word.group(1))
            )
        )
        if not is_type_bracket:
            if returned and text[close + 1 :].lstrip().startswith("["):
                return None  # a list's elements' annotation (``Tensor(a)[]``), not its own
            body = text[open_at + 1 : close].split("->", 1)[0]
            names = tuple(sorted(n.strip().rstrip("!").strip() for n in body.split("|")))
            return "!" in body, names
        i = close + 1


@functools.lru_cache(maxsize=4096)
def schema_effects_text(schema: str) -> tuple[tuple[int, ...], tuple[tuple[int, int], ...]]:
    """What an operator schema says about memory, as ``torch._C.parse_schema`` reads it.

    Returns:
        (indices of arguments written, (output index, argument index) alias pairs);
        a list argument's elements' annotation (``Tensor(a!)[]``) counts as the list's,
        a returned list's (``-> Tensor(a)[]``) does not, as in torch.
    """
    open_at = schema.find("(")
    if open_at < 0:
        return (), ()
    close = _matching(schema, open_at)
    args = [a for a in _split_top(schema[open_at + 1 : close]) if a != "*"]
    rest = schema[close + 1 :].strip()
    rets_text = rest[2:].strip() if rest.startswith("->") else ""
    if rets_text.startswith("("):
        rets = _split_top(rets_text[1 : _matching(rets_text, 0)])
    else:
        rets = [rets_text] if rets_text else []
    written: list[int] = []
    sets: dict[str, int] = {}
    for i, arg in enumerate(args):
        info = _annotation(arg)
        if info is None:
            continue
        if info[0]:
            written.append(i)
        for name in info[1]:
            sets.setdefault(name, i)
    aliases: list[tuple[int, int]] = []
    for j, ret in enumerate(rets):
        info = _annotation(ret, returned=True)
        if info is None:
            continue
        for name in info[1]:
            if name in sets:
                aliases.append((j, sets[name]))
    return tuple(written), tuple(aliases)


@functools.lru_cache(maxsize=4096)
def schema_args(schema: str) -> tuple[tuple[str, str], ...]:
    """(type, name) of each argument of an operator schema, in order, keyword-only ones
    included: ``(("Tensor", "self"), ("float", "scale"), ("int", "zero_point"),
    ("ScalarType", "dtype"))`` for ``aten::quantize_per_tensor``."""
    open_at = schema.find("(")
    if open_at < 0:
        return ()
    close = _matching(schema, open_at)
    out = []
    for arg in _split_top(schema[open_at + 1 : close]):
        if arg == "*":
            continue
        decl = arg.split("=", 1)[0].strip()
        type_, _, name = decl.rpartition(" ")
        out.append((type_.strip(), name))
    return tuple(out)
