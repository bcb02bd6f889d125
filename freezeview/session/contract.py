"""What a session offers the screen, and what it is opened with.

The screen talks to one model through an :class:`EngineSession`: the in-process
:class:`~freezeview.session.local.Session` (the Python API, tests) and the
:class:`~freezeview.session.remote.RemoteSession` (``freezeview MODEL.pt``, torch in a
child process) both satisfy it, and the child's side of the wire answers exactly the
calls listed in :data:`ENGINE_CALLS`, derived from this protocol.

Imports no torch.
"""

from __future__ import annotations

import inspect
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, runtime_checkable

if TYPE_CHECKING:
    from ..engine.graph import GraphSnapshot, Inventory
    from .canvas import Canvas
    from .summaries import AttrSummary, MigrationSummary, NodeTimes, OpenedSummary, StepSummary

__all__ = [
    "ENGINE_CALLS",
    "SCREEN_SIDE_CALLS",
    "EngineSession",
    "Preserved",
    "SessionOptions",
    "Written",
    "protocol_methods",
]

#: The preserved attribute names of a plan, in the user's order, each once: one type
#: from the command line and the tree's space key down to torch's ``preserved_attrs``.
Preserved = tuple[str, ...]


@dataclass(frozen=True)
class SessionOptions:
    """How a model is opened and run: what ``freezeview MODEL.pt``'s options say.

    Args:
        preserved: names for ``preserved_attrs`` at start (``--preserve``).
        passes: pass ids to run; None means torch's default plan (``--passes``).
        inputs_file: sample inputs saved with ``torch.save`` (``--inputs``).
        input_shapes: shapes of random sample inputs (``--input-shape 1,3,224,224``).
        eval_mode: switch a training-mode module to eval mode (``--eval``).
        imports: packages that register the model's custom operators (``--import``).
        libraries: shared libraries that do (``--load-library``).
        threads: torch threads when timing each step's forward (with inputs).
        time_budget: seconds per step for that timing.
        autograd: time those forwards with autograd on (``--autograd``) instead of
            under ``torch.inference_mode()``.
    """

    preserved: Preserved = ()
    passes: tuple[str, ...] | None = None
    inputs_file: Path | None = None
    input_shapes: tuple[str, ...] = ()
    eval_mode: bool = False
    imports: tuple[str, ...] = ()
    libraries: tuple[str, ...] = ()
    threads: int = 1
    time_budget: float = 0.25
    autograd: bool = False

    def __post_init__(self) -> None:
        # Any sequence given becomes the one type; each preserved name counts once.
        set_ = object.__setattr__
        set_(self, "preserved", tuple(dict.fromkeys(self.preserved)))
        if self.passes is not None:
            set_(self, "passes", tuple(self.passes))
        if self.inputs_file is not None:
            set_(self, "inputs_file", Path(self.inputs_file))
        for name in ("input_shapes", "imports", "libraries"):
            set_(self, name, tuple(getattr(self, name)))


@dataclass(frozen=True)
class Written:
    """Files a session wrote, and what it has to say about them (Graphviz fallbacks,
    pictures left out), for the status line."""

    paths: tuple[Path, ...] = ()
    notes: tuple[str, ...] = field(default=())


@runtime_checkable
class EngineSession(Protocol):
    """One model opened, as the screen uses it. Every method blocks (torch work, or
    waiting for the engine process): the screen calls them from workers.

    A graph argument (``before``, ``after``) is a step's key (:attr:`StepSummary.graph
    <freezeview.session.summaries.StepSummary.graph>`), a snapshot, or None for none.
    """

    #: The module tree and every attribute, from the first explain (None before).
    inventory: Inventory | None
    #: ``.code`` of the frozen module at the end of the last run, once read.
    final_code: str | None

    @property
    def name(self) -> str:
        """The model's display name."""
        ...

    def open(self) -> OpenedSummary:
        """Load the model (if not yet) and describe it for the first screen."""
        ...

    def check_plan(self, preserved: Preserved, display: str) -> None:
        """Raise the load's error, or PlanError with explain's sentence for a preserved
        name the model lacks (``display`` names the model as the command line did)."""
        ...

    def explain(
        self,
        preserved: Preserved,
        statuses: Callable[[list[AttrSummary]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> list[AttrSummary]:
        """Every attribute's verdict under ``preserved``; torch's statuses (reasons
        pending) go to ``statuses`` first when they come before the reasons."""
        ...

    def run_steps(
        self,
        preserved: Preserved,
        passes: tuple[str, ...],
        profile: bool = False,
        cancel: threading.Event | None = None,
    ) -> Iterator[StepSummary]:
        """Freeze with the plan one step at a time (a blocking generator); with
        ``profile`` (and sample inputs) each changed step's nodes are timed too."""
        ...

    def step_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of the last run's graph ``key``, taken now if need be."""
        ...

    def node_times(self, key: int) -> NodeTimes | None:
        """Each node's time in the last run's graph ``key`` against the unfrozen
        module's, when the run profiled it; else None."""
        ...

    def known_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of graph ``key`` if this side has it already (never blocks)."""
        ...

    def read_final_code(self, timeout: float | None = None) -> str | None:
        """``.code`` of the last run's frozen module, read when first asked; waits at
        most ``timeout`` seconds for another process (TimeoutError after that)."""
        ...

    def diff_text(self, before: GraphSnapshot, after: GraphSnapshot, a: str, b: str) -> str:
        """Unified IR diff between two snapshots, labelled ``a`` and ``b``."""
        ...

    def render_step(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        out_dir: Path,
        stem: str,
    ) -> Written:
        """Write the step's graph (and its diff against ``before``) into ``out_dir``."""
        ...

    def graph_canvas(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
        rows: int | None = None,
    ) -> Canvas | None:
        """The step's graph (or its diff) laid out and drawn in terminal cells; None
        when another layout was asked for before this one was made."""
        ...

    def graph_picture(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
    ) -> Path:
        """The graph view's picture as a PNG drawn by Graphviz."""
        ...

    def export(self, out_dir: Path, preserved: Preserved, passes: tuple[str, ...]) -> Written:
        """Write everything ``freezeview export`` writes into ``out_dir``."""
        ...

    def migrate(
        self, output: Path | None = None, force: bool = False, again: bool = False
    ) -> MigrationSummary:
        """Will the model survive ``torch.export``? ``freezeview migrate`` on the model
        file with the session's sample inputs, run once (``again`` runs it anew); with
        ``output``, the program written there, whole, when it behaves the same, or with
        ``force`` (else ``not_written`` says why)."""
        ...

    def close(self) -> None:
        """Let go of the session's process and files (nothing to do in-process)."""
        ...


def protocol_methods(protocol: type) -> tuple[str, ...]:
    """The methods ``protocol`` declares (its own, in declaration order; properties and
    attributes excluded)."""
    return tuple(
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and inspect.isfunction(value)
    )


#: Calls a :class:`~freezeview.session.remote.RemoteSession` answers on the screen's
#: side, without the engine process: what it holds already, or computes torch-free.
SCREEN_SIDE_CALLS = frozenset({"known_graph", "diff_text", "close"})

#: The calls the engine process answers: the protocol's methods but those.
ENGINE_CALLS = tuple(m for m in protocol_methods(EngineSession) if m not in SCREEN_SIDE_CALLS)
