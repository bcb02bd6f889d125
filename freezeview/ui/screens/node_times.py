"""The node times of the run on screen: asked of the session once per graph, kept until
the next run.

A run started with time per node (the graph view's ``%``) times each node of every step
that changed the graph (:attr:`StepSummary.timed_nodes
<freezeview.session.StepSummary.timed_nodes>`). The graph view's heat overlay and the
inspector's time rows read them here; each graph's times are asked for in a thread
worker the first time a step showing it is shown, and arrive as
:class:`~freezeview.ui.messages.NodeTimesReady`.
"""

from __future__ import annotations

from functools import partial
from typing import TYPE_CHECKING, Any

from ..messages import NodeTimesReady

if TYPE_CHECKING:
    from textual.screen import Screen

    from ...session import EngineSession, NodeTimes, StepSummary

__all__ = ["NodeTimesBook"]


class NodeTimesBook:
    """The current run's node times by graph key (see the module docstring).

    Args:
        screen: the screen whose workers ask, and which receives the answers.
    """

    def __init__(self, screen: Screen[Any]) -> None:
        self.screen = screen
        self.run_id = 0
        #: Node times by graph key, as they have arrived.
        self.times: dict[int, NodeTimes] = {}
        self._asked: set[int] = set()

    def start_run(self, run_id: int) -> None:
        """A new run: the last run's times go (its graphs' keys are never shown again)."""
        self.run_id = run_id
        self.times = {}
        self._asked = set()

    def get(self, key: int) -> NodeTimes | None:
        """Graph ``key``'s node times, if they have arrived."""
        return self.times.get(key)

    def want(self, session: EngineSession | None, run_id: int, step: StepSummary) -> None:
        """Ask for the times of ``step``'s graph unless they are here or on their way."""
        if session is None or not step.timed_nodes or run_id != self.run_id:
            return
        if step.graph in self._asked:
            return
        self._asked.add(step.graph)
        self.screen.run_worker(
            partial(self._fetch, session, run_id, step.graph),
            thread=True,
            exit_on_error=False,
            group="node-times",
            description="node times",
        )

    def _fetch(self, session: EngineSession, run_id: int, key: int) -> None:
        """(A thread worker.) The session's answer, posted to the screen."""
        self.screen.post_message(NodeTimesReady(run_id, key, session.node_times(key)))

    def arrived(self, message: NodeTimesReady) -> bool:
        """Keep an answer of the current run; whether it was one."""
        if message.run_id != self.run_id or message.times is None:
            return False
        self.times[message.key] = message.times
        return True
