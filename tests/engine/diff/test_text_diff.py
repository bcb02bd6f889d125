"""The IR text diff's shortcuts give the same diff as matching everything with rapidfuzz.

freezeview takes the lines only one side has out before rapidfuzz matches the rest,
numbers lines once per printout, and writes the diff text run by run; none of that
may change a byte of the ``.diff`` files an export writes.
"""

from __future__ import annotations

import difflib
import random
from dataclasses import dataclass
from itertools import pairwise

import pytest
from rapidfuzz.distance import Indel

from engine.diff.test_diff import apply_unified, changed_lines
from freezeview.engine.diff import text_diff


def rapidfuzz_blocks(a: list[int], b: list[int]) -> list[tuple[int, int, int]]:
    """The equal runs rapidfuzz finds on the whole of ``a`` and ``b``."""
    return [
        (op.src_start, op.dest_start, op.src_end - op.src_start)
        for op in Indel.opcodes(a, b)
        if op.tag == "equal"
    ]


def joined(blocks: list[tuple[int, int, int]]) -> list[tuple[int, int, int]]:
    """``blocks`` with touching runs joined (splitting a run changes no diff)."""
    out: list[tuple[int, int, int]] = []
    for i, j, size in blocks:
        if out and out[-1][0] + out[-1][2] == i and out[-1][1] + out[-1][2] == j:
            out[-1] = (out[-1][0], out[-1][1], out[-1][2] + size)
        else:
            out.append((i, j, size))
    return out


def random_edit(rng: random.Random, n: int, alphabet: int) -> tuple[list[int], list[int]]:
    """A sequence and an edited copy: lines dropped, replaced by new ones, repeated."""
    a = [rng.randrange(alphabet) for _ in range(n)]
    b: list[int] = []
    for x in a:
        roll = rng.random()
        if roll < 0.2:
            continue
        if roll < 0.45:
            b.append(alphabet + rng.randrange(alphabet))  # a line only the new side has
        else:
            b.append(x)
        if rng.random() < 0.1:
            b.append(rng.randrange(2 * alphabet))
    return a, b


@pytest.fixture
def always_shorten(monkeypatch: pytest.MonkeyPatch) -> None:
    """Take the one-sided lines out however small the input."""
    monkeypatch.setattr(text_diff, "_SHORTEN_CELLS", 0)


def assert_same_matching(a: list[int], b: list[int]) -> None:
    """freezeview's matching of ``a`` against ``b`` is rapidfuzz's on the whole."""
    expected = rapidfuzz_blocks(a, b)
    assert joined(text_diff._lcs_blocks(a, b, 5, 7)) == [(i + 5, j + 7, k) for i, j, k in expected]
    # The middle left once the common head and tail are cut, as rapidfuzz cuts them.
    head = text_diff._head_length(a, b)
    tail = text_diff._tail_length(a, b, head)
    middle_a, middle_b = a[head : len(a) - tail], b[head : len(b) - tail]
    shortened = text_diff._shortened_blocks(middle_a, middle_b, 0, 0)
    assert joined(shortened) == rapidfuzz_blocks(middle_a, middle_b)


@pytest.mark.usefixtures("always_shorten")
@pytest.mark.parametrize("seed", range(300))
def test_shortened_matching_is_rapidfuzz_matching(seed: int) -> None:
    rng = random.Random(seed)
    a, b = random_edit(rng, rng.randrange(0, 60), rng.choice([2, 3, 5, 20]))
    if rng.random() < 0.5:
        a, b = b, a
    assert_same_matching(a, b)


@pytest.mark.usefixtures("always_shorten")
def test_shortened_matching_on_long_sequences() -> None:
    rng = random.Random(7)
    for alphabet in (4, 50, 2000):
        assert_same_matching(*random_edit(rng, 3000, alphabet))


@pytest.mark.usefixtures("always_shorten")
def test_one_sided_lines_between_a_repeated_tail() -> None:
    # Taking the 8, 9, 6 and 7 out leaves a common tail (1, 2 / 2, 1 ...) that
    # rapidfuzz would cut off and match differently: the closing codes stop that.
    a = [0, 9, 1, 0, 2, 1, 8, 1, 2]
    b = [3, 1, 7, 0, 2, 1, 6, 2, 1, 2]
    for x, y in ((a, b), (b, a), (a[::-1], b[::-1])):
        assert_same_matching(x, y)


@dataclass(frozen=True)
class Printout:
    """Just what unified_ir_diff reads of a GraphSnapshot."""

    text: str


def test_ir_diff_equals_text_diff_and_reuses_printouts() -> None:
    rng = random.Random(3)
    texts = []
    lines = [f"  %{k} = aten::op(%{k - 1})" for k in range(400)]
    for _ in range(4):
        a, _b = random_edit(rng, len(lines), len(lines))
        lines = [lines[x % len(lines)] if x < len(lines) else f"  new {x}" for x in a]
        texts.append("\n".join(lines) + "\n")
    snaps = [Printout(t) for t in texts]
    for before, after in pairwise(snaps):
        old, new = before.text.splitlines(), after.text.splitlines()
        text = text_diff.unified_ir_diff(before, after)  # type: ignore[arg-type]
        assert text == text_diff.unified_text_diff(old, new)
        assert apply_unified(old, text) == new
        reference = "\n".join(difflib.unified_diff(old, new, lineterm=""))
        assert changed_lines(text) <= changed_lines(reference)
    # Only the last few printouts stay cached, and a hit is the very same text.
    assert len(text_diff._PRINTOUTS) <= text_diff._PRINTOUTS_KEPT
    copy = "".join(list(texts[-1]))
    assert text_diff._printout(copy).text is copy


def test_opcodes_put_deletions_before_insertions() -> None:
    ops = text_diff.line_opcodes(["a", "x", "b"], ["a", "y", "z", "b"])
    assert ops == [
        ("equal", 0, 1, 0, 1),
        ("delete", 1, 2, 1, 1),
        ("insert", 2, 2, 1, 3),
        ("equal", 2, 3, 3, 4),
    ]
    assert text_diff.line_opcodes([], []) == []
    assert text_diff.line_opcodes(["a"], []) == [("delete", 0, 1, 0, 0)]
