"""Unified text diffs of IR printouts, as ``diff -u`` prints them.

An export writes one for the whole freeze and one per step, and the printouts of real
models run to tens of thousands of lines, so the line matching is a minimal line diff
in C (rapidfuzz) with the common head and tail cut off first, not :mod:`difflib`.
"""

from __future__ import annotations

import bisect
import difflib
from collections import Counter
from collections.abc import Sequence

from .snapshot_values import GraphSnapshot

try:  # a minimal line diff in C; difflib (pure Python) does the same job more slowly
    from rapidfuzz.distance import Indel as _Indel
except ImportError:  # pragma: no cover - rapidfuzz is a declared dependency
    _Indel = None  # type: ignore[assignment]

__all__ = ["Opcode", "line_opcodes", "unified_ir_diff", "unified_text_diff"]


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
    return unified_text_diff(
        before.text.splitlines(),
        after.text.splitlines(),
        before_label=before_label,
        after_label=after_label,
        context=context,
    )


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
    hunks = _hunks(line_opcodes(old, new), context)
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
                out.extend(minus)
                out.extend(plus)
                minus, plus = [], []
                out.extend(f" {line}\n" for line in old[a1:a2])
            else:
                minus.extend(f"-{line}\n" for line in old[a1:a2])
                plus.extend(f"+{line}\n" for line in new[b1:b2])
        out.extend(minus)
        out.extend(plus)
    return "".join(out)


def _hunk_range(start: int, stop: int) -> str:
    # The same convention as difflib and GNU diff: 1-based start, ",length" unless 1,
    # and an empty range names the line before it.
    length = stop - start
    if length == 1:
        return str(start + 1)
    return f"{start if length == 0 else start + 1},{length}"


Opcode = tuple[str, int, int, int, int]


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


def line_opcodes(old: Sequence[str], new: Sequence[str]) -> list[Opcode]:
    """difflib-style opcodes (``equal``/``delete``/``insert``) turning ``old`` into ``new``.

    Common leading and trailing lines are matched first; the rest is a minimal line
    diff (rapidfuzz's LCS, in C), split at unique common lines when it is very large.
    Without rapidfuzz, :class:`difflib.SequenceMatcher` is used.

    Args:
        old: lines before.
        new: lines after.

    Returns:
        ``(tag, i1, i2, j1, j2)`` tuples covering both sequences in order.
    """
    n, m = len(old), len(new)
    head = 0
    while head < min(n, m) and old[head] == new[head]:
        head += 1
    tail = 0
    while tail < min(n, m) - head and old[n - 1 - tail] == new[m - 1 - tail]:
        tail += 1
    # Lines become small ints: the matcher then compares numbers, not strings.
    codes: dict[str, int] = {}
    a = [codes.setdefault(line, len(codes)) for line in old[head : n - tail]]
    b = [codes.setdefault(line, len(codes)) for line in new[head : m - tail]]
    ops: list[Opcode] = []
    if head:
        ops.append(("equal", 0, head, 0, head))
    for tag, i1, i2, j1, j2 in _middle_opcodes(a, b):
        ops.append((tag, i1 + head, i2 + head, j1 + head, j2 + head))
    if tail:
        ops.append(("equal", n - tail, n, m - tail, m))
    return _merge(ops)


def _middle_opcodes(a: list[int], b: list[int]) -> list[Opcode]:
    if not a or not b:
        out: list[Opcode] = []
        if a:
            out.append(("delete", 0, len(a), 0, 0))
        if b:
            out.append(("insert", 0, 0, 0, len(b)))
        return out
    if len(a) * len(b) <= _DIRECT_CELLS:
        return _lcs_opcodes(a, b)
    anchors = _unique_anchors(a, b)
    if not anchors:
        # Nothing in common that is unique: one block replaced (a valid, coarse diff).
        return [("delete", 0, len(a), 0, 0), ("insert", len(a), len(a), 0, len(b))]
    out = []
    i = j = 0
    for x, y in [*anchors, (len(a), len(b))]:
        for tag, i1, i2, j1, j2 in _middle_opcodes(a[i:x], b[j:y]):
            out.append((tag, i1 + i, i2 + i, j1 + j, j2 + j))
        if x < len(a):
            out.append(("equal", x, x + 1, y, y + 1))
        i, j = x + 1, y + 1
    return out


def _lcs_opcodes(a: list[int], b: list[int]) -> list[Opcode]:
    if _Indel is None:
        matcher = difflib.SequenceMatcher(None, a, b)
        out: list[Opcode] = []
        for tag, i1, i2, j1, j2 in matcher.get_opcodes():
            if tag == "replace":
                out += [("delete", i1, i2, j1, j1), ("insert", i2, i2, j1, j2)]
            else:
                out.append((tag, i1, i2, j1, j2))
        return out
    return [
        (op.tag, op.src_start, op.src_end, op.dest_start, op.dest_end)
        for op in _Indel.opcodes(a, b)
    ]


def _unique_anchors(a: list[int], b: list[int]) -> list[tuple[int, int]]:
    """Lines found exactly once in both, in an order both sequences agree on (the
    longest increasing run of their positions, as in patience diff)."""
    count_a = Counter(a)
    count_b = Counter(b)
    where_b = {x: j for j, x in enumerate(b) if count_b[x] == 1}
    pairs = [(i, where_b[x]) for i, x in enumerate(a) if count_a[x] == 1 and x in where_b]
    # Longest increasing subsequence of the b positions (patience sorting).
    tails: list[int] = []
    tail_index: list[int] = []
    previous: list[int] = [-1] * len(pairs)
    for k, (_i, j) in enumerate(pairs):
        pos = bisect.bisect_left(tails, j)
        if pos == len(tails):
            tails.append(j)
            tail_index.append(k)
        else:
            tails[pos] = j
            tail_index[pos] = k
        previous[k] = tail_index[pos - 1] if pos else -1
    chain: list[tuple[int, int]] = []
    k = tail_index[-1] if tail_index else -1
    while k != -1:
        chain.append(pairs[k])
        k = previous[k]
    return chain[::-1]


def _merge(ops: list[Opcode]) -> list[Opcode]:
    """Join neighbouring opcodes of the same tag; drop empty ones."""
    out: list[Opcode] = []
    for op in ops:
        if op[1] == op[2] and op[3] == op[4]:
            continue
        if out and out[-1][0] == op[0] and out[-1][2] == op[1] and out[-1][4] == op[3]:
            last = out[-1]
            out[-1] = (op[0], last[1], op[2], last[3], op[4])
        else:
            out.append(op)
    return out
