"""Unified text diffs of IR printouts, as ``diff -u`` prints them.

An export writes one for the whole freeze and one per step, and the printouts of real
models run to tens of thousands of lines, so the line matching is a minimal line diff
in C (rapidfuzz) with the common head and tail cut off first, not :mod:`difflib`.
Freezing rewrites most lines of a big graph, and the matcher's time grows with the
product of the two lengths, so the lines only one side has are taken out before
rapidfuzz sees them (:func:`_shortened_blocks`); the diff comes out the same.
"""

from __future__ import annotations

import bisect
import difflib
import threading
from collections import Counter, OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from itertools import chain, compress, count

from ..graph import GraphSnapshot
from ..plumbing import renewed_in_children

try:  # a minimal line diff in C; difflib (pure Python) does the same job more slowly
    from rapidfuzz.distance import Indel as _Indel
except ImportError:  # pragma: no cover - rapidfuzz is a declared dependency
    _Indel = None  # type: ignore[assignment]

__all__ = ["Opcode", "forget_printouts", "line_opcodes", "unified_ir_diff", "unified_text_diff"]


def unified_ir_diff(
    before: GraphSnapshot,
    after: GraphSnapshot,
    *,
    before_label: str = "before",
    after_label: str = "after",
    context: int = 3,
) -> str:
    """A unified text diff of the two graphs' IR printouts.

    The printouts of real models run to tens of thousands of lines (a scripted
    12-layer ``nn.TransformerEncoder`` prints 27k inlined), and an export diffs every
    step, so the line matching is done by :func:`line_opcodes` (a minimal line diff in
    C through rapidfuzz) rather than :mod:`difflib`, which took seconds per step there.

    Args:
        before: the earlier snapshot.
        after: the later snapshot.
        before_label: file name shown on the ``---`` line.
        after_label: file name shown on the ``+++`` line.
        context: lines of context around each change.

    Returns:
        The diff text in ``diff -u`` format; empty when the printouts are identical.
    """
    # A step that changed nothing shares its snapshot with the step before it.
    if before is after or before.text == after.text:
        return ""
    old, new = _printout(before.text), _printout(after.text)
    # The new printout's numbers serve the pair; old lines the new printout lacks get
    # numbers past the new ones.
    past = range(len(new.numbers), len(new.numbers) + len(old.numbers))
    renumbered = list(map(new.numbers.get, old.numbers, past))
    opcodes = _code_opcodes(list(map(renumbered.__getitem__, old.codes)), new.codes)
    return _unified(old.lines, new.lines, opcodes, before_label, after_label, context)


@dataclass(frozen=True, slots=True)
class _Printout:
    """One IR printout as lines, and each line as a number (its first appearance)."""

    text: str
    lines: list[str]
    numbers: dict[str, int]
    codes: list[int]


# An export diffs each step's printout twice (against the step before and the step
# after), and the first graph's a third time (against the last), so the last few
# printouts keep their lines and numbers. Entries hold their text, so that a hit is
# the same str object, not one that got its id after the first was freed; three of
# them keep a few megabytes alive at most, until later diffs push them out.
_PRINTOUTS: OrderedDict[int, _Printout] = OrderedDict()
_PRINTOUTS_KEPT = 3
_PRINTOUTS_LOCK = renewed_in_children(threading.Lock())  # the forked helper diffs too


def forget_printouts() -> None:
    """Drop the printouts kept for the next diffs (see :func:`.diff.forget_recent`)."""
    with _PRINTOUTS_LOCK:
        _PRINTOUTS.clear()


def _printout(text: str) -> _Printout:
    """``text`` split and numbered, from the cache when it was diffed just before."""
    with _PRINTOUTS_LOCK:
        kept = _PRINTOUTS.get(id(text))
        if kept is not None and kept.text is text:
            _PRINTOUTS.move_to_end(id(text))
            return kept
    lines = text.splitlines()
    numbers = dict(zip(dict.fromkeys(lines), count()))
    printout = _Printout(text, lines, numbers, list(map(numbers.__getitem__, lines)))
    with _PRINTOUTS_LOCK:
        _PRINTOUTS[id(text)] = printout
        _PRINTOUTS.move_to_end(id(text))
        while len(_PRINTOUTS) > _PRINTOUTS_KEPT:
            _PRINTOUTS.popitem(last=False)
    return printout


def unified_text_diff(
    old: Sequence[str],
    new: Sequence[str],
    *,
    before_label: str = "before",
    after_label: str = "after",
    context: int = 3,
) -> str:
    """Unified diff of two lists of lines (without line ends), as ``diff -u`` prints it.

    Args:
        old: lines before.
        new: lines after.
        before_label: name on the ``---`` line.
        after_label: name on the ``+++`` line.
        context: lines of context around each change.

    Returns:
        The diff text; empty when the lines are equal.
    """
    return _unified(old, new, line_opcodes(old, new), before_label, after_label, context)


def _unified(
    old: Sequence[str],
    new: Sequence[str],
    opcodes: list[Opcode],
    before_label: str,
    after_label: str,
    context: int,
) -> str:
    """The ``diff -u`` text of ``opcodes`` turning ``old`` into ``new``."""
    hunks = _hunks(opcodes, context)
    if not hunks:
        return ""
    out = [f"--- {before_label}\n", f"+++ {after_label}\n"]
    for hunk in hunks:
        i1, i2, j1, j2 = hunk[0][1], hunk[-1][2], hunk[0][3], hunk[-1][4]
        out.append(f"@@ -{_hunk_range(i1, i2)} +{_hunk_range(j1, j2)} @@\n")
        minus: list[str] = []
        plus: list[str] = []
        for tag, a1, a2, b1, b2 in hunk:
            if tag == "equal":
                # A run of deletions and insertions reads best as all "-" then all "+".
                out += minus
                out += plus
                minus, plus = [], []
                out.append(_marked(" ", old, a1, a2))
            else:
                minus.append(_marked("-", old, a1, a2))
                plus.append(_marked("+", new, b1, b2))
        out += minus
        out += plus
    return "".join(out)


def _marked(mark: str, lines: Sequence[str], start: int, stop: int) -> str:
    """Lines ``start:stop``, each with ``mark`` before it and a line end after it."""
    # One join per run of lines rather than one string per line: a transformer's
    # per-step diffs print tens of thousands of lines.
    if start == stop:
        return ""
    return mark + f"\n{mark}".join(lines[start:stop]) + "\n"


def _hunk_range(start: int, stop: int) -> str:
    # The same convention as difflib and GNU diff: 1-based start, ",length" unless 1,
    # and an empty range names the line before it.
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


Opcode = tuple[str, int, int, int, int]
# A run of equal lines: (start in the old lines, start in the new lines, length).
Block = tuple[int, int, int]


def _hunks(opcodes: list[Opcode], context: int) -> list[list[Opcode]]:
    """Group opcodes into hunks with ``context`` equal lines around each change."""
    if not any(op[0] != "equal" for op in opcodes):
        return []
    ops = list(opcodes)
    # Trim the leading and trailing equal runs to the context shown.
    if ops[0][0] == "equal":
        _tag, i1, i2, j1, j2 = ops[0]
        ops[0] = ("equal", max(i1, i2 - context), i2, max(j1, j2 - context), j2)
    if ops[-1][0] == "equal":
        _tag, i1, i2, j1, j2 = ops[-1]
        ops[-1] = ("equal", i1, min(i2, i1 + context), j1, min(j2, j1 + context))
    hunks: list[list[Opcode]] = []
    current: list[Opcode] = []
    for tag, i1, i2, j1, j2 in ops:
        if tag == "equal" and i2 - i1 > 2 * context and current:
            # A long equal run ends this hunk and starts the next one.
            current.append(("equal", i1, i1 + context, j1, j1 + context))
            hunks.append(current)
            current = [("equal", i2 - context, i2, j2 - context, j2)]
            continue
        current.append((tag, i1, i2, j1, j2))
    if current and not (len(current) == 1 and current[0][0] == "equal"):
        hunks.append(current)
    return hunks


# Above this many cells (lines before x lines after, once the common head and tail are
# cut off) the minimal diff's bit matrix would need hundreds of megabytes, so the
# texts are first split at lines found exactly once in each (patience diff anchors).
_DIRECT_CELLS = 400_000_000

# From this many cells on, taking out the lines only one side has before calling
# rapidfuzz costs less than the cells it saves (the Python work per line is worth
# thousands of rapidfuzz's cells; benchmarks/bench_text_diff.py measures it).
_SHORTEN_CELLS = 4_000_000

# Codes that close the shortened sequences (see _shortened_blocks): line codes are
# counted from 0, so these two match nothing, not even each other.
_END_OLD = 1 << 40
_END_NEW = _END_OLD + 1


def line_opcodes(old: Sequence[str], new: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes (``equal``/``delete``/``insert``) turning ``old`` into ``new``.

    Common leading and trailing lines are matched first; the rest is a minimal line
    diff (rapidfuzz's LCS, in C), split at unique common lines when it is very large.
    Without rapidfuzz, :class:`difflib.SequenceMatcher` is used. Between two runs of
    equal lines there is at most one ``delete`` followed by at most one ``insert``.

    Args:
        old: lines before.
        new: lines after.

    Returns:
        ``(tag, i1, i2, j1, j2)`` tuples covering both sequences in order.
    """
    return _code_opcodes(*_encode(old, new))


def _code_opcodes(a: list[int], b: list[int]) -> list[Opcode]:
    """:func:`line_opcodes` for lines already numbered (equal lines, equal numbers)."""
    n, m = len(a), len(b)
    head = _head_length(a, b)
    tail = _tail_length(a, b, head)
    return _opcodes(_blocks(a[head : n - tail], b[head : m - tail], head, n, m), n, m)


def _blocks(a: list[int], b: list[int], head: int, n: int, m: int) -> list[Block]:
    """The equal runs of ``n`` old against ``m`` new lines whose common head (``head``
    lines) and tail were cut off, leaving ``a`` and ``b``."""
    blocks: list[Block] = [(0, 0, head)] if head else []
    _match(a, b, head, head, blocks)
    tail = n - head - len(a)
    if tail:
        blocks.append((n - tail, m - tail, tail))
    return blocks


def _head_length(a: Sequence[object], b: Sequence[object]) -> int:
    """How many leading items ``a`` and ``b`` share."""
    limit = min(len(a), len(b))
    k = 0
    while k < limit and a[k] == b[k]:
        k += 1
    return k


def _tail_length(a: Sequence[object], b: Sequence[object], head: int) -> int:
    """How many trailing items ``a`` and ``b`` share, leaving their first ``head`` out."""
    n, m = len(a), len(b)
    limit = min(n, m) - head
    k = 0
    while k < limit and a[n - 1 - k] == b[m - 1 - k]:
        k += 1
    return k


def _encode(old: Sequence[str], new: Sequence[str]) -> tuple[list[int], list[int]]:
    """The lines as small ints, equal lines getting equal ints: the matcher then
    compares numbers, not strings."""
    codes = dict(zip(dict.fromkeys(chain(old, new)), count()))
    return list(map(codes.__getitem__, old)), list(map(codes.__getitem__, new))


def _match(a: list[int], b: list[int], i0: int, j0: int, out: list[Block]) -> None:
    """Append the equal runs of ``a`` against ``b`` to ``out``, shifted by ``i0, j0``."""
    if not a or not b:
        return
    if len(a) * len(b) <= _DIRECT_CELLS:
        out += _lcs_blocks(a, b, i0, j0)
        return
    anchors = _unique_anchors(a, b)
    # With no unique line in common, a and b stay unmatched: a valid, coarse diff.
    i = j = 0
    for x, y in anchors:
        _match(a[i:x], b[j:y], i0 + i, j0 + j, out)
        out.append((i0 + x, j0 + y, 1))
        i, j = x + 1, y + 1
    if anchors:
        _match(a[i:], b[j:], i0 + i, j0 + j, out)


def _lcs_blocks(a: list[int], b: list[int], i0: int, j0: int) -> list[Block]:
    """The equal runs of a minimal diff of ``a`` against ``b``, shifted by ``i0, j0``."""
    if _Indel is None:
        matcher = difflib.SequenceMatcher(None, a, b)
        return [(i0 + i, j0 + j, size) for i, j, size in matcher.get_matching_blocks() if size]
    if len(a) * len(b) < _SHORTEN_CELLS:
        return _indel_blocks(a, b, i0, j0)
    # rapidfuzz cuts the common head, then the common tail, before it matches; doing
    # the same here leaves the middle it would match, so shortening that middle (which
    # could create a new common tail) gives rapidfuzz's own answer.
    head = _head_length(a, b)
    tail = _tail_length(a, b, head)
    blocks: list[Block] = [(i0, j0, head)] if head else []
    blocks += _shortened_blocks(
        a[head : len(a) - tail], b[head : len(b) - tail], i0 + head, j0 + head
    )
    if tail:
        blocks.append((i0 + len(a) - tail, j0 + len(b) - tail, tail))
    return blocks


def _indel_blocks(a: list[int], b: list[int], i0: int, j0: int) -> list[Block]:
    """rapidfuzz's equal runs of ``a`` against ``b``, shifted by ``i0, j0``."""
    return [
        (i0 + op.src_start, j0 + op.dest_start, op.src_end - op.src_start)
        for op in _Indel.opcodes(a, b)
        if op.tag == "equal"
    ]


def _shortened_blocks(a: list[int], b: list[int], i0: int, j0: int) -> list[Block]:
    """rapidfuzz's equal runs of ``a`` against ``b`` (no common head or tail), found on
    the lines both have.

    Freezing rewrites most lines of a big graph (a transformer's 27k-line printout
    keeps 10k of its lines after freezing), and rapidfuzz's time and memory grow with
    the product of the lengths. rapidfuzz walks its LCS table back from the end: it
    drops the old line if that keeps the LCS length, else the new line if that does,
    else matches. A line the other side lacks never changes an LCS length, so leaving
    it out changes none of those choices for the other lines: the same lines match.
    The two closing codes keep rapidfuzz from cutting a common tail that shortening
    may have created (cutting a common head is harmless: the walk matches such a head
    line for line anyway). tests/engine/diff/test_text_diff.py checks this against rapidfuzz.
    """
    in_a, in_b = set(a), set(b)
    keep_a = list(compress(range(len(a)), map(in_b.__contains__, a)))
    if not keep_a:
        return []
    keep_b = list(compress(range(len(b)), map(in_a.__contains__, b)))
    if len(keep_a) == len(a) and len(keep_b) == len(b):
        return _indel_blocks(a, b, i0, j0)
    short_a = [*map(a.__getitem__, keep_a), _END_OLD]
    short_b = [*map(b.__getitem__, keep_b), _END_NEW]
    out: list[Block] = []
    for i, j, size in _indel_blocks(short_a, short_b, 0, 0):
        # A run of the shortened lines breaks where either side had lines taken out.
        x0, y0, length = keep_a[i], keep_b[j], 0
        for x, y in zip(keep_a[i : i + size], keep_b[j : j + size], strict=True):
            if x != x0 + length or y != y0 + length:
                out.append((i0 + x0, j0 + y0, length))
                x0, y0, length = x, y, 0
            length += 1
        out.append((i0 + x0, j0 + y0, length))
    return out


def _unique_anchors(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """Lines found exactly once in both, in an order both sequences agree on (the
    longest increasing run of their positions, as in patience diff)."""
    once_a = {x for x, k in Counter(a).items() if k == 1}
    common = [x for x, k in Counter(b).items() if k == 1 and x in once_a]
    # For a line found once, the only index is the one these dicts keep.
    where_a = dict(zip(a, range(len(a)), strict=True))
    where_b = dict(zip(b, range(len(b)), strict=True))
    common.sort(key=where_a.__getitem__)
    positions = list(map(where_b.__getitem__, common))
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(positions)
    for k, j in enumerate(positions):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_index.append(k)
        else:
            tails[pos] = j
            tail_index[pos] = k
        previous[k] = tail_index[pos - 1] if pos else -1
    anchors: list[tuple[int, int]] = []
    k = tail_index[-1] if tail_index else -1
    while k != -1:
        anchors.append((where_a[common[k]], positions[k]))
        k = previous[k]
    return anchors[::-1]


def _opcodes(blocks: list[Block], n: int, m: int) -> list[Opcode]:
    """Opcodes over ``n`` old and ``m`` new lines from their equal runs, in order."""
    ops: list[Opcode] = []
    i = j = 0
    for x, y, size in blocks:
        if x > i:
            ops.append(("delete", i, x, j, j))
        if y > j:
            ops.append(("insert", x, x, j, y))
        if x == i and y == j and ops and ops[-1][0] == "equal":
            # Runs found on either side of a split point join up.
            ops[-1] = ("equal", ops[-1][1], x + size, ops[-1][3], y + size)
        else:
            ops.append(("equal", x, x + size, y, y + size))
        i, j = x + size, y + size
    if n > i:
        ops.append(("delete", i, n, j, j))
    if m > j:
        ops.append(("insert", n, n, j, m))
    return ops
