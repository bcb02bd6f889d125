"""Words users read the same everywhere: counts that agree with their nouns (``1 pass``,
``2 passes``, never ``1 passes`` or ``pass(es)``), and one "did you mean" for a
mistyped name."""

from __future__ import annotations

import difflib
from collections.abc import Iterable

__all__ = ["did_you_mean", "plural"]

_ES = ("s", "x", "z", "ch", "sh")


def plural(count: int, word: str, words: str | None = None) -> str:
    """``count`` and ``word`` agreed: ``1 constant``, ``3 constants``, ``2 passes``.

    Args:
        count: how many (printed with thousands separators).
        word: the singular noun, or a phrase ending in it (``kept attribute read``).
        words: the plural when adding ``s`` (``es`` after s, x, z, ch, sh) is wrong.
    """
    if count == 1:
        noun = word
    elif words is not None:
        noun = words
    else:
        noun = word + ("es" if word.endswith(_ES) else "s")
    return f"{count:,} {noun}"


def did_you_mean(name: str, known: Iterable[str]) -> str:
    """`` did you mean 'x'?`` for the known names closest to a mistyped ``name`` (spaces
    and dashes read as underscores, case ignored), or ``""`` when none is close."""
    folded = {n.lower().replace("-", "_").replace(" ", "_"): n for n in known}
    key = name.lower().replace("-", "_").replace(" ", "_")
    close = [folded[c] for c in difflib.get_close_matches(key, list(folded), n=2, cutoff=0.6)]
    if not close:
        return ""
    return " did you mean " + " or ".join(repr(c) for c in close) + "?"


def unknown_pass(name: str, known: Iterable[str], where: str = "") -> str:
    """The one sentence for a pass id freezeview does not know, wherever it was given
    (``--passes``, an expectations file's ``[passes]`` or ``plan.passes``: ``where``
    says which, e.g. `` in [passes]``): the closest ids, then every valid one."""
    ids = sorted(known) if isinstance(known, (set, frozenset)) else list(known)
    hint = did_you_mean(name, ids)
    return (
        f"unknown pass {name!r}{where};{hint} {'V' if hint else 'v'}alid passes are: "
        f"{', '.join(ids)}."
    )
