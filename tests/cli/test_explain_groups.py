"""explain's human output prints alike submodules once, titled with exactly their paths.

A stack of n identical blocks printed n tables per module type; now alike modules (same
type, same rows but for the module path and the IR's value names) are one table titled
``[0-1,3,5-6,8-9].1  BatchNorm1d  (7 alike)``, and a container's alike children are one
row. Kept attributes and distinct rows are never merged; ``--each-module`` lists every
module; ``--json`` is the same either way. Statuses come from explain (torch's own).
"""

from __future__ import annotations

import io
import itertools
import json
import re
from pathlib import Path

import pytest
import torch
from rich.console import Console
from torch import nn

from freezeview.cli import main
from freezeview.cli.explain import render_explanation
from freezeview.cli.explain_groups import path_pattern
from freezeview.engine import explain

BLOCKS = 10
_HOUSEKEEPING = ("training", "_is_full_backward_hook")


def _stack() -> torch.jit.ScriptModule:
    """Ten Linear-BN-ReLU blocks of width 4 but block 4 (width 6: its Linear's and block
    5's Linear's rows differ, its BatchNorm is another class, num_features being one of
    its constants); block 2's BatchNorm has another momentum (a constant too: another
    class, with rows that read the same). The caller preserves block 7's running mean."""
    blocks = []
    for i in range(BLOCKS):
        width = 6 if i == 4 else 4
        bn = nn.BatchNorm1d(width, momentum=0.5 if i == 2 else 0.1)
        blocks.append(nn.Sequential(nn.Linear(6 if i == 5 else 4, width), bn, nn.ReLU()))
    return torch.jit.script(nn.Sequential(*blocks).eval())


@pytest.fixture(scope="module")
def result():  # type: ignore[no-untyped-def]
    return explain(_stack(), ["7.1.running_mean"])


def _render(result, **kwargs) -> str:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    render_explanation(Console(file=out, width=200, color_system=None), result, **kwargs)
    return out.getvalue()


def _titles(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line and line[0] not in "┏┃┡│└ "]


_INT = r"(?:0|[1-9]\d*)"
_RUN = rf"{_INT}(?:-{_INT})?"
_RUNS = re.compile(rf"{_RUN}|\[{_RUN}(?:,{_RUN})+\]")


def _expand(pattern: str) -> set[str]:
    """Every path a title's pattern stands for (the inverse of path_pattern)."""
    paths: set[str] = set()
    for item in re.split(r", (?![^\[]*\])", pattern):
        choices = []
        for part in item.split("."):
            runs = part.strip("[]").split(",") if _RUNS.fullmatch(part) else []
            if not runs:
                choices.append([part])
                continue
            numbers: list[str] = []
            for run in runs:
                lo, _, hi = run.partition("-")
                numbers += [str(n) for n in range(int(lo), int(hi or lo) + 1)]
            choices.append(numbers)
        paths |= {".".join(c) for c in itertools.product(*choices)}
    return paths


@pytest.mark.parametrize(
    ("paths", "pattern"),
    [
        (["blocks.0.bn", "blocks.1.bn", "blocks.2.bn"], "blocks.0-2.bn"),
        ([f"{i}.1" for i in (0, 1, 2, 3, 5, 7, 8, 9)], "[0-3,5,7-9].1"),
        ([f"s.{a}.b.{b}.bn" for a in range(2) for b in range(3)], "s.0-1.b.0-2.bn"),
        (["s.0.b.0", "s.0.b.1", "s.1.b.0"], "s.0.b.0-1, s.1.b.0"),
        (["enc.norm1", "enc.norm2"], "enc.norm1, enc.norm2"),
        (["l.01", "l.1"], "l.01, l.1"),  # "01" is a name: as an index it would read "1"
        (["a.7"], "a.7"),
    ],
)
def test_path_patterns_are_exact(paths: list[str], pattern: str) -> None:
    assert path_pattern(paths) == pattern
    assert _expand(pattern) == set(paths)


def test_alike_modules_print_once_and_distinct_ones_apart(result) -> None:  # type: ignore[no-untyped-def]
    text = _render(result)
    titles = _titles(text)
    # Block 7's BatchNorm (a kept running mean), block 4's (another width) and block
    # 2's (another class) are their own tables; the other seven BatchNorms are one.
    assert "[0-1,3,5-6,8-9].1  BatchNorm1d  (7 alike)" in titles
    for alone in ("7.1", "4.1", "2.1"):
        assert f"{alone}  BatchNorm1d" in titles
    assert "[0-3,6-9].0  Linear  (8 alike)" in titles
    assert "4.0  Linear" in titles and "5.0  Linear" in titles
    # Block 7's Sequential holds a kept attribute: alone, and first (kept first).
    assert titles.index("7  Sequential") < titles.index("[0-1,3,6,8-9]  Sequential  (6 alike)")
    # Every module with a row to show is covered by exactly one title (a ReLU has none).
    covered: list[str] = []
    for title in titles[2:-1]:
        paths = title.split("  ")[0]
        covered += ["" if paths == "(root module)" else p for p in _expand(paths)]
    owners = {v.info.owner for v in result.attributes if v.info.name not in _HOUSEKEEPING}
    assert len(covered) == len(set(covered)) and set(covered) == owners
    # The kept attribute's row is printed, and the row that differs.
    assert "preserved: named in preserved attributes ('7.1.running_mean')" in text
    assert "float32[4, 6]" in text.split("\n5.0  Linear")[1]
    # The root's alike children are one row; the one holding a kept attribute is not.
    root = text.split("(root module)")[1].split("┘")[0]
    assert "[0-1,3,6,8-9] (6 alike)" in root and "│ 7 " in root and "│ 4 " in root
    assert "(21 alike modules in 3 tables; --each-module lists each)" in text


def test_ir_value_names_that_differ_are_said_to_be_the_first_modules(result) -> None:  # type: ignore[no-untyped-def]
    text = _render(result)
    bn = text.split("[0-1,3,5-6,8-9].1  BatchNorm1d  (7 alike)")[1]
    # num_batches_tracked is dropped: its aten::add_ sits in the training branch that
    # freezing removes (dead code), and the node's value names are the first module's.
    assert "dead-code" in bn and "aten::add_" in bn
    assert "IR value names (%...) above are 0.1's; the other 6 modules' differ" in bn


def test_each_module_lists_every_module(result) -> None:  # type: ignore[no-untyped-def]
    text = _render(result, each_module=True)
    titles = _titles(text)[2:-1]
    owners = {v.info.owner for v in result.attributes if v.info.name not in _HOUSEKEEPING}
    assert len(titles) == len(owners) == 31
    assert "alike" not in text


def test_narrow_output_groups_too(result) -> None:  # type: ignore[no-untyped-def]
    out = io.StringIO()
    render_explanation(Console(file=out, width=80, color_system=None), result)
    text = out.getvalue()
    assert "[0-1,3,5-6,8-9].1  BatchNorm1d  (7 alike)" in text
    assert "[0-1,3,6,8-9] (6 alike)" in text


def test_the_flag_is_documented_and_json_is_unchanged(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "stack.pt"
    torch.jit.save(_stack(), str(path))
    with pytest.raises(SystemExit):
        main(["explain", "--help"])
    assert "--each-module" in capsys.readouterr().out
    docs = []
    for flag in ([], ["--each-module"]):
        assert main(["explain", str(path), "--json", *flag]) == 0
        docs.append(json.loads(capsys.readouterr().out))
    docs[0].pop("seconds", None), docs[1].pop("seconds", None)
    assert docs[0] == docs[1]
    assert len(docs[0]["attributes"]) == len(explain(_stack()).attributes)


def test_alike_tables_that_cannot_merge_print_as_rich_lays_each_out() -> None:
    """A transformer's layers each hold a kept attribute: one table per layer, the rows
    the same. rich lays such a body out once; the output is what laying out each gives."""
    from freezeview.cli import explain as explain_cli

    layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16)
    encoder = nn.TransformerEncoder(layer, num_layers=3, enable_nested_tensor=False)
    result = explain(torch.jit.script(encoder.eval()))
    original = explain_cli._print_table
    reused = [0]

    def fresh(*args, **kwargs):  # type: ignore[no-untyped-def]
        kwargs["bodies"] = None
        return original(*args, **kwargs)

    def counted(*args, bodies, **kwargs):  # type: ignore[no-untyped-def]
        before = len(bodies)
        original(*args, bodies=bodies, **kwargs)
        reused[0] += len(bodies) == before
        return None

    for width, soft in ((200, False), (10_000, True)):
        outs = []
        for wrapper in (counted, fresh):
            explain_cli._print_table = wrapper  # type: ignore[assignment]
            try:
                out = io.StringIO()
                console = Console(
                    file=out, width=width, soft_wrap=soft, color_system="truecolor", highlight=False
                )
                render_explanation(console, result)
            finally:
                explain_cli._print_table = original  # type: ignore[assignment]
            outs.append(out.getvalue())
        assert outs[0] == outs[1]
        assert "layers.2.self_attn  \x1b[0m\x1b[2;3mMultiheadAttention" in outs[0]
    assert reused[0] >= 4  # layers 1 and 2, and their self_attn, twice over
