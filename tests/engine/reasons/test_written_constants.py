"""Folded attributes the frozen graph still writes: ``written-constant``, checked by torch.

torch folds an attribute that forward writes through a list, a dict or a tuple, or
inside a ``torch.jit.fork`` body; its frozen module then writes into its own constant.
The oracle is torch's frozen module itself: every tensor constant of its graphs (fork
bodies included) is copied, the module is run twice, and the constants whose values
moved are mapped back, by storage, to the attribute they were folded from (a frozen
module shares storage with the module it came from). freezeview must name exactly
those attributes ``written-constant``, and torch's status of each must be ``inlined``.
"""

from __future__ import annotations

from collections.abc import Iterator

import oracle
import pytest
import torch
from corpus import CASES, Case, case_by_name, params

from freezeview.engine import explain

WRITTEN = [case for case in CASES if case.name.startswith("written_")]
OK_CASES = [case for case in CASES if not case.expect_error]


def _tensors(value: object) -> Iterator[torch.Tensor]:
    if isinstance(value, torch.Tensor):
        yield value
    elif isinstance(value, list | tuple):
        for item in value:
            yield from _tensors(item)
    elif isinstance(value, dict):
        for item in value.values():
            yield from _tensors(item)


_HOLDERS = ("TensorType", "ListType", "DictType", "TupleType")


def _constants(graph: torch._C.Graph) -> Iterator[torch.Tensor]:
    """Every tensor held by a prim::Constant of ``graph`` and of its forks' bodies."""
    stack = [graph.block()]
    while stack:
        block = stack.pop()
        for node in block.nodes():
            stack.extend(node.blocks())
            if node.kind() == "prim::fork":
                stack.append(node.g("Subgraph").block())
            if (
                node.kind() == "prim::Constant"
                and node.outputsSize() == 1
                and node.output().type().kind() in _HOLDERS
            ):
                yield from _tensors(node.output().toIValue())


def _storage(t: torch.Tensor) -> int:
    return t.untyped_storage().data_ptr()


def torch_written_paths(case: Case) -> tuple[set[str], bool]:
    """The attributes whose folded constants torch's frozen module writes when run, and
    whether two successive calls gave different outputs."""
    module = case.build()
    by_storage: dict[int, set[str]] = {}
    for path, value in oracle.attribute_paths(module).items():
        for t in _tensors(value):
            if t.layout == torch.strided and t.numel():
                by_storage.setdefault(_storage(t), set()).add(path)
    frozen = oracle.torch_freeze(module, case.preserved_attrs)
    graphs = [frozen._c._get_method(name).graph for name in frozen._c._method_names()]
    constants = [
        t for g in graphs for t in _constants(g) if t.layout == torch.strided and t.numel()
    ]
    before = [t.clone() for t in constants]
    inputs = case.inputs()
    with torch.no_grad():
        first = getattr(frozen, case.method)(*inputs)
        first = first.clone() if isinstance(first, torch.Tensor) else first
        second = getattr(frozen, case.method)(*inputs)
    moved = {
        path
        for t, old in zip(constants, before, strict=True)
        if not torch.equal(t, old)
        for path in by_storage.get(_storage(t), ())
    }
    return moved, not _same(first, second)


def _same(a: object, b: object) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return torch.equal(a, b)
    if isinstance(a, list | tuple) and isinstance(b, list | tuple):
        return len(a) == len(b) and all(map(_same, a, b))
    return a == b


def _check(case: Case) -> None:
    moved, outputs_moved = torch_written_paths(case)
    result = explain(case.build(), case.preserved_attrs)
    named = {v.path for v in result.attributes if "written-constant" in v.codes}
    # A TorchScript object's constant cannot be read from Python (its class is not
    # importable): what it holds is compared through the outputs instead.
    values = oracle.attribute_paths(case.build())
    objects = {p for p in named if not isinstance(values[p], torch.Tensor | list | tuple | dict)}
    assert named - objects == moved, (
        f"{case.name}: freezeview {sorted(named)}, torch writes {sorted(moved)}"
    )
    if objects:
        assert outputs_moved, f"{case.name}: {sorted(objects)} written, outputs the same"
    statuses = oracle.status_from_torch(case.build(), case.preserved_attrs)
    for path in named:
        assert statuses[path] == "inlined"
    if outputs_moved:
        # Outputs that change from call to call come from state the frozen module
        # writes: a written constant, or a kept attribute a mutation reason names.
        kept_written = [
            v
            for v in result.attributes
            if v.status == "kept" and {"set-attr", "in-place-write"} & set(v.codes)
        ]
        assert named or kept_written, f"{case.name}: outputs move, and nothing says why"
    assert not result.disagreements


@pytest.mark.parametrize("case", params(WRITTEN))
def test_written_constants_are_what_torch_s_frozen_module_writes(case: Case) -> None:
    _check(case)


@pytest.mark.slow
@pytest.mark.parametrize("case", params([c for c in OK_CASES if c not in WRITTEN]))
def test_no_other_corpus_model_writes_a_constant(case: Case) -> None:
    _check(case)


def test_the_reason_names_the_writer_and_its_line() -> None:
    verdict = explain(case_by_name("written_list_element").build()).by_path("a")
    assert verdict is not None and verdict.status == "inlined"
    assert verdict.codes == ("written-constant",)
    reason = verdict.reasons[0]
    assert reason.node and "aten::add_" in reason.node
    assert reason.source and reason.source.rsplit(":", 1)[-1].isdigit()
    assert reason.source_text and "+= 10" in reason.source_text
    assert "mutates its own constant" in reason.message


def test_a_fork_body_s_write_freezing_removed_is_named_on_folded() -> None:
    """torch folds a counter a fork body writes; with nothing reading it afterwards,
    freezing's clean-up drops the write: folded, and the reason says the write is gone."""
    module = case_by_name("written_fork_counters").build()
    statuses = oracle.status_from_torch(module)
    result = explain(module)
    assert not result.disagreements
    for path in ("a.calls", "b.calls", "a.bn.num_batches_tracked", "b.bn.num_batches_tracked"):
        verdict = result.by_path(path)
        assert verdict is not None and verdict.status == statuses[path] == "inlined"
        assert verdict.codes == ("folded",)
        assert verdict.reasons[0].node and "aten::add_" in verdict.reasons[0].node
        assert "no longer updates it" in verdict.reasons[0].message
