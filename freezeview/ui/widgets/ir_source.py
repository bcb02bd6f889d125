"""What the IR pane's own workers answer, posted to the pane: a step's graphs taken
from the engine session, a whole-graph question answered."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from textual.message import Message

__all__ = ["GraphRead", "GraphsTaken"]


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
