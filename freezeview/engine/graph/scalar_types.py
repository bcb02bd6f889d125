"""The names behind TorchScript's enum ints: ``13`` read as a dtype is ``torch.quint8``.

TorchScript stores a ``torch.dtype``, ``torch.layout`` or ``torch.memory_format`` as a
plain ``int`` (``prim::Constant[value=13]()`` feeding ``aten::quantize_per_tensor``'s
``ScalarType dtype``); torch's printout shows the number. The numbering is torch's
(``c10::ScalarType``) and may change between releases, so the tables are read from the
running torch, never written down: every ``torch.dtype`` and ``torch.layout`` is turned
into a graph constant and read back as its int, and every ``torch.memory_format`` is
compiled into one TorchScript function that returns them.

A constant's summary carries the names its int has (:func:`enum_names`); whoever knows
the argument it feeds (a box's rows, the inspector) picks the one of that argument's
type (``ConstantSummary.name_as``), so a ``13`` passed as a size stays ``13``.
"""

from __future__ import annotations

import functools

__all__ = ["ENUM_TYPES", "enum_names"]

#: The schema argument types TorchScript passes as ints, by the torch class they name.
ENUM_TYPES = ("ScalarType", "Layout", "MemoryFormat")


@functools.lru_cache(maxsize=1)
def _tables() -> dict[int, tuple[tuple[str, str], ...]]:
    """int -> ((schema type, ``torch.name``), ...), read from the running torch."""
    import torch

    found: dict[int, dict[str, str]] = {}

    def add(kind: str, number: int, name: str) -> None:
        # The first name wins: canonical names are offered before aliases.
        found.setdefault(number, {}).setdefault(kind, name)

    graph = torch._C.Graph()
    for kind, cls in (("ScalarType", torch.dtype), ("Layout", torch.layout)):
        members = {getattr(torch, n) for n in dir(torch) if isinstance(getattr(torch, n), cls)}
        for member in sorted(members, key=str):
            try:
                number = graph.insertConstant(member).toIValue()  # type: ignore[attr-defined]
            except (RuntimeError, TypeError):
                continue
            if isinstance(number, int) and not str(member).startswith("torch._"):
                add(kind, number, str(member))  # str() is torch's canonical name
    formats = sorted(
        (n for n in dir(torch) if isinstance(getattr(torch, n), torch.memory_format)),
        key=lambda n: (n.startswith(("_", "legacy")), n),
    )
    if formats:
        source = "def f() -> List[int]:\n    return [" + ", ".join(f"torch.{n}" for n in formats)
        try:
            numbers = torch.jit.CompilationUnit(source + "]\n").f()
        except RuntimeError:  # a format this torch's compiler does not know
            numbers = []
        for name, number in zip(formats, numbers, strict=False):
            add("MemoryFormat", int(number), f"torch.{name}")
    return {
        number: tuple((k, names[k]) for k in ENUM_TYPES if k in names)
        for number, names in found.items()
    }


def enum_names(value: int) -> tuple[tuple[str, str], ...]:
    """The names ``value`` has as each enum TorchScript passes as an int:
    ``(("ScalarType", "torch.quint8"),)`` for 13; ``()`` for an int no enum uses."""
    return _tables().get(value, ())
