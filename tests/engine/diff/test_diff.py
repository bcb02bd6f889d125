"""Tests for freezeview.engine.diff.diff: node matching across torch's own rewrites.

Every expected set is computed from the graphs torch produces in this run (which kinds
disappear, which attributes torch turned into constants), never copied from a past run.
"""

from __future__ import annotations

import difflib
import re
import time
from collections import Counter

import pytest
import torch
from render_models import ConvBnRelu, KeepsBuffer, resnet50_scripted, scripted

from freezeview.engine.diff import diff as diff_module
from freezeview.engine.diff import text_diff
from freezeview.engine.diff.diff import diff_snapshots, unified_ir_diff
from freezeview.engine.graph.snapshot import GraphSnapshot, snapshot_graph


def inlined(module: torch.jit.ScriptModule) -> GraphSnapshot:
    graph = module.forward.graph.copy()
    torch._C._jit_pass_inline(graph)
    return snapshot_graph(graph)


def frozen_graph(module: torch.jit.ScriptModule) -> torch._C.Graph:
    """The graph of ``torch._C._freeze_module`` (freezing without optimization passes)."""
    return torch._C._freeze_module(module._c)._get_method("forward").graph


@pytest.mark.parametrize("make", [ConvBnRelu, KeepsBuffer, resnet50_scripted])
def test_graph_against_itself_reports_nothing(make: type[torch.nn.Module]) -> None:
    module = scripted(make())
    for snap in (inlined(module), snapshot_graph(torch.jit.freeze(module).forward.graph)):
        d = diff_snapshots(snap, snap)
        assert d.is_empty
        assert not d.added and not d.removed and not d.changed
        assert len(d.matched) == snap.node_count
        assert d.summary() == "no change"


def test_two_snapshots_of_an_identical_graph_match() -> None:
    module = resnet50_scripted()
    a, b = inlined(module), inlined(module)
    assert a is not b
    assert diff_snapshots(a, b).is_empty


def test_conv_bn_fold_removes_batch_norm_and_changes_conv() -> None:
    module = scripted(ConvBnRelu())
    graph = frozen_graph(module)
    before = snapshot_graph(graph)
    torch._C._jit_pass_fold_frozen_conv_bn(graph)
    after = snapshot_graph(graph)
    # torch's verdict: which kinds vanished.
    gone = before.kinds() - after.kinds()
    assert gone["aten::batch_norm"] == 1  # the fold fired

    d = diff_snapshots(before, after)
    removed_kinds = Counter(d.before_info[i].node.kind for i in d.removed)
    assert removed_kinds["aten::batch_norm"] == gone["aten::batch_norm"]
    assert not d.added
    changed_kinds = Counter(d.after_info[i].node.kind for i in d.changed)
    assert changed_kinds["aten::conv2d"] == 1
    conv_id = next(i for i in d.changed if d.after_info[i].node.kind == "aten::conv2d")
    assert any("weight_fused_bn" in reason for reason in d.changed[conv_id])
    # relu now reads the conv directly: re-wired, not changed.
    relu = next(n for n in after.walk() if n.kind == "aten::relu")
    assert relu.id not in d.changed and relu.id in d.matched.values()
    # Every node torch kept is matched to a node of the same kind.
    for b, a in d.matched.items():
        assert d.before_info[b].node.kind == d.after_info[a].node.kind


def test_optimization_passes_match_torch_kind_counts() -> None:
    module = scripted(ConvBnRelu())
    before = snapshot_graph(frozen_graph(module))
    # torch.jit.freeze = _freeze_module + the frozen optimizations (dropout, conv-bn...).
    after = snapshot_graph(torch.jit.freeze(module).forward.graph)
    d = diff_snapshots(before, after)
    torch_removed = before.kinds() - after.kinds()
    ours = Counter(d.before_info[i].node.kind for i in d.removed) - Counter(
        d.after_info[i].node.kind for i in d.added
    )
    for kind in ("aten::dropout", "aten::batch_norm"):
        assert ours[kind] == torch_removed[kind]


def test_getattr_replaced_by_constant() -> None:
    module = scripted(KeepsBuffer())
    before = inlined(module)
    after_graph = frozen_graph(module)
    after = snapshot_graph(after_graph)
    d = diff_snapshots(before, after)
    # Attributes torch folded: constants it named `self.<path>`.
    folded = {
        n.output().debugName().removeprefix("self.")
        for n in after_graph.nodes()
        if n.kind() == "prim::Constant" and n.output().debugName().startswith("self.")
    }
    assert folded == {"lin.weight", "lin.bias"}
    paths = before.attribute_paths()
    replaced = {d.before_info[b].attribute for b in d.replaced}
    assert replaced == folded
    for b, a in d.replaced.items():
        assert b in d.removed and a in d.added
        assert d.before_info[b].node.kind == "prim::GetAttr"
        assert d.after_info[a].node.kind == "prim::Constant"
    # The buffer written in forward stays a GetAttr on both sides: matched.
    kept_reads = [i for i in d.matched.values() if d.after_info[i].attribute == "count"]
    assert kept_reads and all(d.after_info[i].node.kind == "prim::GetAttr" for i in kept_reads)
    assert "count" in paths.values()


def test_unified_ir_diff() -> None:
    module = scripted(ConvBnRelu())
    a = inlined(module)
    b = snapshot_graph(torch.jit.freeze(module).forward.graph)
    assert unified_ir_diff(a, a) == ""
    text = unified_ir_diff(a, b, before_label="x", after_label="y")
    assert text.startswith("--- x\n+++ y\n")
    assert any(line.startswith("-") and "aten::batch_norm" in line for line in text.splitlines())


@pytest.mark.slow
def test_diff_is_fast_on_resnet50_sized_graphs() -> None:
    module = resnet50_scripted()
    before = inlined(module)
    after = snapshot_graph(torch.jit.freeze(module).forward.graph)
    assert before.node_count > 1700
    start = time.perf_counter()
    diff_snapshots(before, after)
    diff_snapshots(before, before)
    elapsed = time.perf_counter() - start
    assert elapsed < 1.0, f"two diffs took {elapsed:.2f} s"


def apply_unified(old: list[str], text: str) -> list[str]:
    """Apply a unified diff to ``old`` (checking every context and removed line)."""
    if not text:
        return list(old)
    lines = text.splitlines()
    assert lines[0].startswith("--- ") and lines[1].startswith("+++ ")
    out: list[str] = []
    pos, k = 0, 2
    while k < len(lines):
        m = re.match(r"@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@$", lines[k])
        assert m, lines[k]
        old_len = int(m.group(2) or 1)
        start = int(m.group(1)) - 1 if old_len else int(m.group(1))
        out += old[pos:start]
        pos, k = start, k + 1
        seen_old = seen_new = 0
        while k < len(lines) and not lines[k].startswith("@@"):
            tag, body = lines[k][0], lines[k][1:]
            if tag in " -":
                assert old[pos] == body
                pos, seen_old = pos + 1, seen_old + 1
            if tag in " +":
                out.append(body)
                seen_new += 1
            k += 1
        assert (seen_old, seen_new) == (old_len, int(m.group(4) or 1))
    return out + old[pos:]


def changed_lines(text: str) -> int:
    return sum(1 for line in text.splitlines()[2:] if line[:1] in "+-")


def step_pairs() -> list[tuple[GraphSnapshot, GraphSnapshot]]:
    """Before/after snapshots of real rewrites: freezing, then torch's optimizations."""
    pairs = []
    for module in (scripted(ConvBnRelu()), resnet50_scripted()):
        mid = snapshot_graph(frozen_graph(module))
        final = snapshot_graph(torch.jit.freeze(module).forward.graph)
        pairs += [(inlined(module), mid), (mid, final)]
    return pairs


@pytest.mark.slow
def test_unified_ir_diff_rebuilds_the_after_printout() -> None:
    for before, after in step_pairs():
        old, new = before.text.splitlines(), after.text.splitlines()
        text = unified_ir_diff(before, after)
        assert text and apply_unified(old, text) == new
        # A minimal line diff: never more changed lines than difflib's.
        reference = "\n".join(difflib.unified_diff(old, new, lineterm=""))
        assert changed_lines(text) <= changed_lines(reference)


def test_unified_text_diff_fallbacks(monkeypatch: pytest.MonkeyPatch) -> None:
    before, after = step_pairs()[-1]
    old, new = before.text.splitlines(), after.text.splitlines()
    expected = diff_module.unified_text_diff(old, new)
    # Very large inputs are split at unique common lines first (patience anchors).
    monkeypatch.setattr(text_diff, "_DIRECT_CELLS", 1000)
    split = diff_module.unified_text_diff(old, new)
    assert apply_unified(old, split) == new
    # Without rapidfuzz, difflib does the matching.
    monkeypatch.setattr(text_diff, "_Indel", None)
    monkeypatch.setattr(text_diff, "_DIRECT_CELLS", 10**12)
    plain = diff_module.unified_text_diff(old, new)
    assert apply_unified(old, plain) == new
    assert apply_unified(old, expected) == new
    assert diff_module.unified_text_diff(old, old) == ""
    assert apply_unified([], diff_module.unified_text_diff([], ["a", "b"])) == ["a", "b"]
    assert apply_unified(["a"], diff_module.unified_text_diff(["a"], [])) == []


def test_equal_printouts_and_repeated_diffs_are_cheap() -> None:
    module = scripted(KeepsBuffer())
    a, b = inlined(module), inlined(module)
    d = diff_snapshots(a, b)
    assert d.is_empty and list(d.matched.items()) == list(
        zip(d.before_info, d.after_info, strict=True)
    )
    assert diff_snapshots(a, b) is d  # the same two snapshots: the same result
    frozen = snapshot_graph(torch.jit.freeze(module).forward.graph)
    assert diff_snapshots(a, frozen) is not d
    assert unified_ir_diff(a, b) == ""
