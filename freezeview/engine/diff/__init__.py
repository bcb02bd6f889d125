"""Diff: two graph snapshots in, what was added, removed and changed out. Uses graph and
plumbing.

- :mod:`.diff`: :func:`diff_snapshots`, a :class:`GraphDiff` of two snapshots, and the
  recent diffs kept;
- :mod:`.diff_match`: which nodes of two snapshots are the same node, across renamings;
- :mod:`.diff_values`: :class:`GraphDiff` and its facts;
- :mod:`.text_diff`: :func:`unified_ir_diff`, ``diff -u`` text of two IR printouts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .diff import adopt_diff, diff_snapshots, forget_recent, index_nodes
    from .diff_values import DiffFacts, GraphDiff, NodeInfo, diff_facts, notable_kind_changes
    from .text_diff import unified_ir_diff

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "adopt_diff": "diff",
        "diff_snapshots": "diff",
        "forget_recent": "diff",
        "index_nodes": "diff",
        "DiffFacts": "diff_values",
        "GraphDiff": "diff_values",
        "NodeInfo": "diff_values",
        "diff_facts": "diff_values",
        "notable_kind_changes": "diff_values",
        "unified_ir_diff": "text_diff",
    },
)

__all__ = [
    "DiffFacts",
    "GraphDiff",
    "NodeInfo",
    "adopt_diff",
    "diff_facts",
    "diff_snapshots",
    "forget_recent",
    "index_nodes",
    "notable_kind_changes",
    "unified_ir_diff",
]
