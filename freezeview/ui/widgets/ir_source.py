"""What the IR pane asks of the engine session, and what its workers answer.

:class:`DocumentSource` is the part of the engine session (``Session`` in-process,
``RemoteSession`` through the engine process) the IR pane uses: step graphs by key, IR
diffs and the final frozen module's ``.code``. The messages are the pane's own workers'
answers (a step's graphs taken, a whole-graph question answered), posted to the pane.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from textual.message import Message

if TYPE_CHECKING:
    from ...engine.graph.snapshot_values import GraphSnapshot

__all__ = ["DocumentSource", "GraphRead", "GraphsTaken"]


class DocumentSource(Protocol):
    """What the pane asks of the engine session: diffs, and the final module's code."""

    @property
    def final_code(self) -> str | None:
        """``.code`` of the last run's frozen module (None before a run ends, and
        through the engine process until :meth:`read_final_code` asked for it)."""

    def read_final_code(self) -> str | None:
        """``.code`` of the last run's frozen module, read now if need be (blocking)."""

    def diff_text(self, before: GraphSnapshot, after: GraphSnapshot, a: str, b: str) -> str:
        """The unified IR diff between two snapshots (blocking)."""

    def step_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of a step's graph (blocking: taken by the engine if need be;
        None when a re-run made it stale on the way)."""

    def known_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of a step's graph if the screen has it already (never blocks)."""


@dataclass
class GraphsTaken(Message):
    """A worker has taken the graphs of run ``run_id``'s steps the pane waited for."""

    run_id: int


@dataclass
class GraphRead(Message):
    """A worker's answer to a whole-graph question (see ``IRPane._read_graph``)."""

    snapshot: int
    what: str
    arg: Any
    result: Any
    scroll: bool
