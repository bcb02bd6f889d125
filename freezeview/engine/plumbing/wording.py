"""Words that agree with their counts: ``1 pass``, ``2 passes``, never ``1 passes`` or
``pass(es)``."""

from __future__ import annotations

__all__ = ["plural"]

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
