"""Schemas' alias annotations read from text (engine/graph/schema_text.py) say what
``torch._C.parse_schema`` says, on every operator schema torch registers."""

from __future__ import annotations

import torch

from freezeview.engine.graph.schema_text import schema_effects_text


def _torch_effects(schema: str) -> tuple[tuple[int, ...], set[tuple[int, int]]]:
    parsed = torch._C.parse_schema(schema)
    written: list[int] = []
    sets: dict[str, int] = {}
    for i, arg in enumerate(parsed.arguments):
        info = arg.alias_info
        if info is None:
            continue
        if info.is_write:
            written.append(i)
        for name in sorted(str(n) for n in info.before_set):
            sets.setdefault(name, i)
    aliases = set()
    for j, ret in enumerate(parsed.returns):
        info = ret.alias_info
        if info is not None:
            aliases.update((j, sets[str(n)]) for n in info.before_set if str(n) in sets)
    return tuple(written), aliases


def test_every_registered_schema_reads_as_torch_parses_it() -> None:
    schemas = [str(s) for s in torch._C._jit_get_all_schemas()]
    assert len(schemas) > 1000
    wrong = []
    for schema in schemas:
        try:
            expected = _torch_effects(schema)
        except RuntimeError:
            continue  # torch cannot read back its own printout (a PyObject argument)
        written, aliases = schema_effects_text(schema)
        if (written, set(aliases)) != expected:
            wrong.append(schema)
    assert not wrong, wrong[:5]


def test_brackets_inside_types_and_defaults() -> None:
    schema = (
        "my_ops::scale_(Tensor(a!) self, Dict(str, Tensor) opts, (int, str)[] pairs, "
        'str note="a, (b)", int[2] size=[1, 1]) -> Tensor(a!)'
    )
    assert schema_effects_text(schema) == ((0,), ((0, 0),))
    assert _torch_effects(schema) == ((0,), {(0, 0)})
