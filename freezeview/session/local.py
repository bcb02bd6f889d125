"""The app's one door into the engine.

Every engine call the app makes goes through :class:`Session`; its methods block (torch
work) and are called from Textual thread workers, never from the event loop. The
session turns the engine's objects into the small, stable summaries the widgets draw
(:class:`AttrSummary`, :class:`StepSummary`, :class:`PassSummary`), so a widget never depends
on an engine class. This module imports torch: ``freezeview MODEL.pt`` runs it in its
engine process (:mod:`freezeview.session.remote`, same methods, torch-free side);
the app uses it directly only when given an already loaded module (Python API, tests).
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import threading
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..engine.freeze import REGISTRY, default_passes
from ..engine.graph import GraphSnapshot
from ..engine.load import (
    LoadedModel,
    attach_weights,
    file_stamp,
    has_code_tensors,
    in_training_mode,
    load_model,
    share_tensors,
)
from ..engine.plumbing import BadInputError, FreezeviewError, PlanError, write_text
from ..engine.reasons import ExplanationMemo, inline_method_graph
from .contract import Preserved, SessionOptions, Written
from .explain_turns import Explainer
from .summaries import (
    AttrSummary,
    MigrationSummary,
    NodeTimes,
    OpenedSummary,
    PassSummary,
    ReasonSummary,
    StepSummary,
    node_times_summary,
)
from .summaries import step_summary as _step_view

# Explain, the pipeline, diffs and numerics are imported where they are used: opening a
# model needs none of them, and the app's engine process answers "open" first.
if TYPE_CHECKING:
    from ..engine.graph import Inventory
    from .canvas import Canvas

__all__ = ["AttrSummary", "OpenedSummary", "PassSummary", "ReasonSummary", "Session", "StepSummary"]

# Graph keys, unique in the process: a key of an earlier run never names a later graph.
_KEYS = itertools.count(1)


@dataclass
class Session:
    """One model opened in the app, and what the engine said about it.

    Args:
        path: the ``.pt`` file (or None when ``loaded`` is given).
        options: how it is opened and run (:class:`~.contract.SessionOptions`).
        loaded: an already loaded model (tests, the Python API).
        code_at_end: read the frozen module's ``.code`` into :attr:`final_code` at the
            end of each run; the engine process says False, and reads it when the
            screen's ``.code`` view asks (:meth:`read_final_code`).
    """

    path: Path | None = None
    options: SessionOptions = field(default_factory=SessionOptions)
    loaded: LoadedModel | None = None
    code_at_end: bool = True
    inventory: Inventory | None = None
    #: ``.code`` of the frozen module at the end of the last run (None before).
    final_code: str | None = None
    _render_options: Any = field(default=None, repr=False)
    _inputs: tuple[Any, ...] | None = field(default=None, repr=False)
    _layouts: Any = field(default=None, repr=False)
    _picture_dir: Path | None = field(default=None, repr=False)
    # The last explain's torch freeze until a run with the same names takes it (its
    # clean-up step), the explanations of the last few sets of names, and the turns of
    # runs and the replay (explain_turns.py).
    _explainer: Explainer = field(default_factory=lambda: Explainer(ExplanationMemo()), repr=False)
    # The last run's inline and fold graphs, their snapshots offered to the next run, and
    # its inline and fold steps themselves (Pipeline.offer_steps).
    _pictures: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    _picture_steps: Any = field(default=None, repr=False)
    # The last run's graphs by key (StepSummary.graph), each snapshotted on first request.
    _step_graphs: dict[int, Any] = field(default_factory=dict, repr=False)
    # The last run's pipeline while its ``.code`` is still to be read (run_steps(code=False)).
    _kept: Any = field(default=None, repr=False)
    _kept_lock: threading.Lock = field(default_factory=threading.Lock, repr=False)
    _opened: OpenedSummary | None = field(default=None, repr=False)
    # The model file as first loaded: loaded again (load_again) only while unchanged.
    _stamp: tuple[int, ...] | None = field(default=None, repr=False)
    # Snapshots of _pictures kept across take_reloaded, offered to the next run.
    _picture_snapshots: dict[tuple[str, str], Any] = field(default_factory=dict, repr=False)
    # The app's ``m``: the last migration and its program (session/migrations.py).
    _migrations: Any = field(default=None, repr=False)
    # The last run's node times (run_steps(profile=True)) by graph key, and the unfrozen
    # module's, which the others are set against.
    _node_times: dict[int, Any] = field(default_factory=dict, repr=False)
    _unfrozen_times: Any = field(default=None, repr=False)

    # -- loading ---------------------------------------------------------------------
    @property
    def name(self) -> str:
        """Display name of the model."""
        if self.loaded is not None:
            return self.loaded.name
        return self.path.name if self.path else "model"

    def load(self) -> LoadedModel:
        """Load the model file."""
        if self.loaded is None:
            if self.path is None:
                raise BadInputError("no model given: freezeview MODEL.pt opens one.")
            before = file_stamp(self.path)
            self.loaded = self._load_file()
            after = file_stamp(self.path)
            self._stamp = before if before == after else None
        elif self.options.eval_mode and in_training_mode(self.loaded.module):
            self.loaded.module.eval()
        return self.loaded

    def _load_file(self, map_location: str = "cpu") -> LoadedModel:
        assert self.path is not None
        return load_model(
            self.path,
            map_location=map_location,
            eval_mode=self.options.eval_mode,
            imports=self.options.imports,
            libraries=self.options.libraries,
        )

    def load_again(self) -> LoadedModel | None:
        """The model file loaded anew into a new compilation unit, holding the loaded
        model's own tensors, for :meth:`take_reloaded` (:mod:`~..engine.load.reload`).
        None for a model given loaded, a file changed on disk since it was first loaded
        (the user's results stay those of the model they opened), or one that no longer
        loads. Blocking; the session may go on using its model meanwhile.
        """
        loaded, path, stamp = self.loaded, self.path, self._stamp
        if loaded is None or path is None or stamp is None or file_stamp(path) != stamp:
            return None
        fresh = None
        if not has_code_tensors(path):  # loaded without its weights, given the old ones
            with contextlib.suppress(FreezeviewError):
                fresh = self._load_file("meta")
            if fresh is not None and not attach_weights(fresh.module, loaded.module):
                fresh = None
        try:
            if fresh is None:
                fresh = self._load_file()
                share_tensors(fresh.module, loaded.module)
        except FreezeviewError:
            return None
        if file_stamp(path) != stamp:  # changed while it was read
            return None
        from ..engine.reasons import carry_inventory

        # The same file: the module tree listed already, and what torch's statuses are
        # read against made here, off the caller's thread, not at the next toggle.
        carry_inventory(fresh.module, loaded.module)
        # What the first load said (its time, warnings, notes) stays what the user saw.
        return dataclasses.replace(loaded, module=fresh.module)

    def take_reloaded(self, fresh: LoadedModel) -> None:
        """Use ``fresh`` (:meth:`load_again`'s, which carried the module tree over) from
        now on, and let go of what was made of the model before but the last run's graphs
        and ``.code`` (the next run's start does). Call it while no other call of this
        session is under way.
        """
        self._explainer.let_go_of_model()  # its held freeze is a clone of the old model
        # The last run's inline and fold steps refer to the old model (a run shows them
        # again and hands them on); their snapshots are values, offered as before.
        self._picture_steps = None
        earlier, self._pictures = self._pictures, {}
        self._picture_snapshots.update({k: g.snapshot() for k, g in earlier.items() if g.built})
        self.loaded = fresh

    @property
    def module(self) -> Any:
        """The loaded ScriptModule (loading it if needed)."""
        return self.load().module

    def first_text(self) -> tuple[str, int]:
        """IR text and node count of the inlined forward graph.

        torch prints the graph in C++, much faster than taking a snapshot: the app shows
        this as soon as the model is loaded, before any step exists.
        """
        from ..engine.graph import printed_kinds

        graph = inline_method_graph(self.module.forward.graph)
        text = str(graph)
        # Counted off the printout: walking every node through torch costs far more.
        return text, len(printed_kinds(text))

    def open(self) -> OpenedSummary:
        """Load the model and describe it for the app's first screen (described once:
        the description is of the model as first loaded)."""
        if self._opened is not None:
            return self._opened
        loaded = self.load()
        text, node_count = self.first_text()
        self._opened = OpenedSummary(
            name=self.name,
            text=text,
            node_count=node_count,
            code=str(loaded.module.code) if hasattr(loaded.module, "code") else "",
            load_seconds=loaded.load_seconds,
            warnings=(
                *loaded.notes,
                *(_frozen_note(loaded, self.build_inventory()) if loaded.already_frozen else ()),
                *loaded.warnings,
            ),
            passes=tuple(self.available_passes()),
        )
        return self._opened

    def check_plan(self, preserved: Preserved, display: str) -> None:
        """Raise PlanError, with explain's sentence, for the first of ``preserved`` the
        model has no attribute, submodule or method of (``display`` names the model
        as the command line does); the app's start-up check, before the screen shows.
        A model that fails to load raises the load's error."""
        from ..engine.plumbing import PlanError
        from ..engine.reasons import unknown_name

        module = self.load().module
        for name in preserved:
            if not _names_something(module, name):
                close = self.build_inventory().suggest(name)
                raise PlanError(unknown_name(name, display, close))

    def build_inventory(self) -> Inventory:
        """The module tree and every attribute."""
        from ..engine.graph import build_inventory

        if self.inventory is None:
            self.inventory = build_inventory(self.module)
        return self.inventory

    # -- explain ---------------------------------------------------------------------
    def explain(
        self,
        preserved: Preserved,
        statuses: Callable[[list[AttrSummary]], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> list[AttrSummary]:
        """Every attribute's verdict with ``preserved`` as ``preserved_attrs``.

        With ``statuses``, torch's statuses go to it first, each attribute's reasons
        :data:`~.explain_turns.PENDING_REASON`, when the reasons are not known yet; the
        replay then waits for a run of the steps and is abandoned (the pending summaries are
        returned) when another explain starts or ``cancel`` is set
        (:mod:`freezeview.session.explain_turns`).

        Raises:
            PlanError: a training-mode module, an unknown name, or torch cannot freeze.
        """
        if in_training_mode(self.module):
            raise PlanError(
                f"{self.name} holds a module in training mode; freezing needs eval mode: "
                "start freezeview with --eval."
            )

        def first(summaries: list[AttrSummary], inventory: Inventory) -> None:
            if self.inventory is None:
                self.inventory = inventory  # explain lists the module tree too
            if statuses is not None:
                statuses(summaries)

        summaries, inventory = self._explainer.verdicts_in_turns(
            self.load(), preserved, first if statuses is not None else None, cancel
        )
        if self.inventory is None and inventory is not None:
            self.inventory = inventory
        return summaries

    # -- passes and steps ------------------------------------------------------------
    @staticmethod
    def available_passes() -> list[PassSummary]:
        """The passes a user can switch on or off, in the order torch runs them."""
        defaults = set(default_passes())
        return [
            PassSummary(pid, info.title, pid in defaults, info.group)
            for pid, info in REGISTRY.items()
            # The guard step is torch's whole call run as a check, not a user's choice.
            if info.group != "guard" and info.available
        ]

    def sample_inputs(self) -> tuple[Any, ...] | None:
        """Sample inputs from ``--inputs`` or ``--input-shape`` (None if neither)."""
        from ..engine.freeze import load_inputs, random_inputs

        if self._inputs is None and self.options.inputs_file is not None:
            self._inputs = tuple(load_inputs(self.options.inputs_file))
        elif self._inputs is None and self.options.input_shapes:
            self._inputs = tuple(random_inputs(self.options.input_shapes))
        return self._inputs

    def run_steps(
        self,
        preserved: Preserved,
        passes: tuple[str, ...],
        profile: bool = False,
        cancel: threading.Event | None = None,
        progress: Callable[[Any], None] | None = None,
    ) -> Iterator[StepSummary]:
        """Freeze with the given plan one step at a time (a blocking generator).

        Args:
            preserved: the preserved attribute names.
            passes: the pass ids to run.
            profile: with sample inputs, time each node of the unfrozen module and of
                every step that changed the graph (:meth:`node_times`), as ``freeze
                --profile`` does.
            cancel: set to stop before the next step.
            progress: called before each step starts.

        With sample inputs, a step that takes the outputs past tolerance is bisected to
        the first node whose value moved (:attr:`StepSummary.moved_node`), as ``freeze``
        does.

        With :attr:`code_at_end` False the run's frozen module is kept until
        :meth:`read_final_code` or the next run, instead of its ``.code`` being read
        into :attr:`final_code` when the last step is done.
        """
        # A replay of an explain's reasons waits for the run's end (explain_turns.py).
        with self._explainer.turns.first():
            yield from self._run(
                preserved, passes, cancel, progress, code=self.code_at_end, profile=profile
            )

    def _run(
        self,
        preserved: Preserved,
        passes: tuple[str, ...],
        cancel: threading.Event | None,
        progress: Callable[[Any], None] | None,
        *,
        code: bool,
        profile: bool = False,
    ) -> Iterator[StepSummary]:
        self._release_kept()
        from ..engine.diff import forget_recent
        from ..engine.draw import forget_prepared
        from ..engine.freeze import Pipeline
        from ..engine.measure import MeasuredRun, NodeTimer, ValueBisector

        # The last run's snapshots are never shown again: what the engine kept of them
        # for reuse (graph-view layouts, prepared pictures, recent diffs) goes now, so
        # memory stays put across re-runs.
        forget_recent()
        forget_prepared()
        self._step_graphs = {}
        self._node_times, self._unfrozen_times = {}, None
        if self._layouts is not None:
            from .layouts import StepLayouts

            self._layouts = StepLayouts(self._layouts.modules)
        pipeline = Pipeline(self.load(), _plan(preserved, passes), inputs=self.sample_inputs())
        held = self._explainer.take(preserved)
        if held is not None:
            # The verdicts on screen and their torch freeze: the run's own (see explain).
            pipeline.adopt(*held)
        # The inline and fold pictures come out the same for the same plan: the last
        # run's snapshots (those somebody asked for) are offered, and taken where the
        # printouts match.
        earlier, self._pictures = self._pictures, {}
        offered, self._picture_snapshots = self._picture_snapshots, {}
        offered.update({k: g.snapshot() for k, g in earlier.items() if g.built})
        pipeline.offer_pictures(offered)
        del earlier, offered
        # The last run's inline and fold steps, shown again where they fit (kept until
        # this run's replace them: no more memory than between two runs).
        pipeline.offer_steps(self._picture_steps)
        self._picture_steps = None
        pictures: dict[tuple[str, str], Any] = {}
        # The run's graphs by key: a step's snapshot is taken when somebody asks for it
        # (step_graph), never for a step nobody looks at.
        graphs: dict[int, Any] = {}
        self._step_graphs = graphs
        keys: dict[int, int] = {}
        # With sample inputs each changed step's forward is timed (the latency column).
        # Constant bytes are on no screen of the app: not counted (nor the fold step's
        # picture built for them).
        measured = MeasuredRun(
            pipeline,
            threads=self.options.threads,
            budget=self.options.time_budget,
            defer_constants=True,
            autograd=self.options.autograd,
        )
        # With sample inputs the step that takes the outputs past tolerance is bisected
        # (freeze does so too); asked, each changed step's nodes are timed. The bisector
        # reads a step's graph before the timer does (node_time.py says why).
        bisector = ValueBisector(pipeline) if pipeline.inputs is not None else None
        timer = (
            NodeTimer(
                pipeline,
                threads=self.options.threads,
                budget=self.options.time_budget,
                autograd=self.options.autograd,
            )
            if profile and pipeline.inputs is not None
            else None
        )
        times = self._node_times
        self.final_code = None
        previous: tuple[int, int] | None = None
        try:
            for step in measured.run(progress=progress, cancel=cancel):
                graph = step.forward_graph
                shown: tuple[int, int] | None = previous
                if graph is not None:
                    key = keys.get(id(graph))
                    if key is None:
                        key = keys[id(graph)] = next(_KEYS)
                        graphs[key] = graph
                    shown = (key, graph.node_count)
                bisection = bisector.observe(step) if bisector is not None else None
                for made in timer.observe(step) if timer is not None else ():
                    if made.step is None:
                        self._unfrozen_times = made
                    if shown is not None and (made.step is not None or step.name == "inline"):
                        # The inline step's graph is the unfrozen module's forward,
                        # inlined: what the unfrozen profile timed.
                        times[shown[0]] = made
                if shown is None:
                    continue  # no forward graph to show yet
                if step.name in ("inline", "fold_attributes") and graph is not None:
                    pictures[(step.name, "forward")] = graph
                named = bisection.node if bisection is not None else None
                yield dataclasses.replace(
                    _step_view(step, *shown, measured.measurement),
                    timed_nodes=shown[0] in times,
                    moved=tuple(bisection.lines()) if bisection is not None else (),
                    moved_node=named.id if named is not None else None,
                )
                previous = shown
            if pipeline.loaded is self.loaded:  # not when the model was loaded again since
                self._pictures = pictures
                self._picture_steps = pipeline.picture_steps
            frozen = pipeline.frozen_module
            if frozen is not None and not code:
                with self._kept_lock:
                    self._kept = pipeline
            elif frozen is not None:
                self.final_code = str(frozen.code)
        finally:
            # Every re-run freezes the same loaded model again: without this, torch
            # keeps each run's frozen graphs and constants as long as the model lives.
            # (The steps' graphs are the run's own copies: they stay for step_graph.)
            if self._kept is not pipeline:
                pipeline.release()

    def step_graph(self, key: int) -> GraphSnapshot:
        """The snapshot of the last run's graph ``key`` (a :class:`StepSummary`'s ``graph``),
        taken now if nobody asked for it before (blocking: workers only).

        Raises:
            FreezeviewError: the key is not the last run's (a new run started since).
        """
        graph = self._step_graphs.get(key)
        if graph is None:
            raise FreezeviewError("that step's graph is no longer kept: press r to re-run.")
        snapshot: GraphSnapshot = graph.snapshot()
        return snapshot

    def node_times(self, key: int) -> NodeTimes | None:
        """Each node's time in graph ``key`` of the last run, when it was profiled
        (``run_steps(profile=True)`` with sample inputs), with the same node's time in
        the unfrozen module; None when it was not."""
        profile = self._node_times.get(key)
        if profile is None:
            return None
        return node_times_summary(key, profile, self._unfrozen_times)

    def known_graph(self, key: int) -> GraphSnapshot | None:
        """The snapshot of graph ``key`` if it has been taken already (never blocks)."""
        graph = self._step_graphs.get(key)
        return graph.snapshot() if graph is not None and graph.built else None

    def settle_last_run(self, stop: Callable[[], bool] | None = None) -> None:
        """Take the snapshots of the last run's small graphs (at most
        :data:`~freezeview.engine.freeze.lazy_graph.FULL_DIFF_LIMIT` nodes) that nobody
        has asked for yet, for the engine's idle time: the torch graphs go, with the
        folded constants they hold, and the C heap's pages they shared with what torch
        freed since (a model loaded again) can be given back. Larger graphs stay torch
        graphs: their snapshot would take long and more memory than the graph itself.
        Blocking; ``stop`` ends it early (somebody has called since).
        """
        from ..engine.freeze import diffed_in_full

        for graph in list(self._step_graphs.values()):
            if stop is not None and stop():
                break
            if graph.built or graph.released:
                continue
            if diffed_in_full(graph):
                graph.snapshot()

    def _pair(
        self, before: GraphSnapshot | int | None, after: GraphSnapshot | int
    ) -> tuple[GraphSnapshot | None, GraphSnapshot]:
        """Two graphs, each given by key (a step's) or as a snapshot, as snapshots."""
        old = self.step_graph(before) if isinstance(before, int) else before
        new = self.step_graph(after) if isinstance(after, int) else after
        return old, new

    def read_final_code(self, timeout: float | None = None) -> str | None:
        """``.code`` of the last run's frozen module: read now if the run kept its
        frozen module (:attr:`code_at_end` False), which is then let go of; otherwise
        :attr:`final_code` as the run left it (None before a run ended, or when it
        failed). ``timeout`` is for a session in another process: here torch prints the
        code in this thread, and nothing else is waited for.
        """
        with self._kept_lock:
            kept, self._kept = self._kept, None
            if kept is None:
                return self.final_code
            try:
                module = kept.frozen_module
                self.final_code = str(module.code) if module is not None else None
            finally:
                kept.release()
        return self.final_code

    def _release_kept(self) -> None:
        """Free the frozen module a run kept for :meth:`read_final_code`."""
        with self._kept_lock:
            kept, self._kept = self._kept, None
            if kept is not None:
                kept.release()

    # -- text, pictures, files -------------------------------------------------------
    @staticmethod
    def diff_text(before: GraphSnapshot, after: GraphSnapshot, a: str, b: str) -> str:
        """Unified IR diff between two snapshots."""
        from ..engine.diff import unified_ir_diff

        return unified_ir_diff(before, after, before_label=a, after_label=b)

    def render_step(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        out_dir: Path,
        stem: str,
    ) -> Written:
        """Write the step's graph (and its diff against ``before``) into ``out_dir``;
        a graph is a snapshot or a step's key (:meth:`step_graph`)."""
        old, new = self._pair(before, after)
        from ..engine.diff import diff_snapshots
        from ..engine.draw import (
            Overruns,
            RenderOptions,
            module_paths,
            render_diff,
            render_snapshot,
        )

        out_dir.mkdir(parents=True, exist_ok=True)
        notes: list[str] = []
        # The same box names (layers.0.self_attn) and dot-timeout memory as export's.
        if self._render_options is None:
            self._render_options = RenderOptions(
                modules=module_paths(self.module), overruns=Overruns()
            )
        options = self._render_options
        result = render_snapshot(new, out_dir / f"{stem}.svg", title=stem, options=options)
        written = [Path(result.path)]
        notes.extend(result.notes)
        if old is not None:
            diff = diff_snapshots(old, new)
            result = render_diff(
                diff, out_dir / f"{stem}-diff.svg", title=f"{stem} (diff)", options=options
            )
            written.append(Path(result.path))
            notes.extend(result.notes)
            text = self.diff_text(old, new, "before", stem)
            written.append(write_text(out_dir / f"{stem}.diff", text))
        return Written(tuple(written), tuple(notes))

    def graph_canvas(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
        rows: int | None = None,
    ) -> Canvas | None:
        """The step's graph (its diff against ``before`` when given) laid out by dot in
        terminal cells and drawn for the graph view; kept per step, level and opened
        boxes; a module level fitted to a pane ``rows`` high (a graph is a snapshot or a
        step's key). None when another layout was asked for before this one was made."""
        from ..engine.draw import module_paths

        old, new = self._pair(before, after)
        from .layouts import StepLayouts

        if self._layouts is None:
            self._layouts = StepLayouts(module_paths(self.module))
        layouts: StepLayouts = self._layouts
        return layouts.canvas(old, new, level=level, expand=expand, reasons=reasons, rows=rows)

    def graph_picture(
        self,
        before: GraphSnapshot | int | None,
        after: GraphSnapshot | int,
        level: int | str | None = "auto",
        expand: Sequence[str] = (),
        reasons: Mapping[str, str] | None = None,
    ) -> Path:
        """The graph view's picture as a PNG drawn by Graphviz (for terminals that show
        pictures), in a temporary folder of this session."""
        import tempfile

        old, new = self._pair(before, after)
        self.graph_canvas(old, new, level, expand, reasons)  # the layouts' keeper
        if self._picture_dir is None:
            self._picture_dir = Path(tempfile.mkdtemp(prefix="freezeview-view-"))
        layouts = self._layouts
        return layouts.picture(
            old, new, self._picture_dir, level=level, expand=expand, reasons=reasons
        )

    def export(self, out_dir: Path, preserved: Preserved, passes: tuple[str, ...]) -> Written:
        """Write everything ``freezeview export`` writes into ``out_dir``."""
        from ..engine.output import export_model as export

        out_dir.parent.mkdir(parents=True, exist_ok=True)
        result = export(self.load(), out_dir, plan=_plan(preserved, passes), force=True)
        return Written(tuple(Path(f) for f in result.files), tuple(result.notes))

    def migrate(
        self, output: Path | None = None, force: bool = False, again: bool = False
    ) -> MigrationSummary:
        """``freezeview migrate`` on the model file with :meth:`sample_inputs` and the
        session's options, run once (``again`` runs it anew); with ``output``, the
        program written there when it behaves the same, or with ``force``
        (:mod:`~freezeview.session.migrations`).

        Raises:
            BadInputError: no model file, no sample inputs, or inputs it rejects.
        """
        from .migrations import NO_INPUTS, Migrations

        if self._migrations is None:
            options = self.options
            self._migrations = Migrations(
                threads=options.threads,
                budget=options.time_budget,
                eval_mode=options.eval_mode,
                imports=options.imports,
                libraries=options.libraries,
            )
        if not (self.options.inputs_file or self.options.input_shapes):
            raise BadInputError(NO_INPUTS)  # before loading anything
        path = self.path if self.path is not None else self.load().path
        migrations: Migrations = self._migrations
        return migrations.migrate(path, self.sample_inputs(), output, force=force, again=again)

    def close(self) -> None:
        """Nothing to let go of: the session lives in this process (the protocol's
        :meth:`~.contract.EngineSession.close` is for the engine process)."""


def _names_something(module: Any, name: str) -> bool:
    """Whether dotted ``name`` is an attribute, a submodule or a method of ``module`` (a
    ScriptModule), as torch's ``preserved_attrs`` reads it."""
    *path, leaf = name.split(".")
    for part in path:
        child = dict(module.named_children()).get(part)
        if child is None:
            return False
        module = child
    return bool(leaf) and bool(module._c.hasattr(leaf) or module._c._has_method(leaf))


def _frozen_note(loaded: LoadedModel, inventory: Inventory) -> tuple[str, ...]:
    """The status line's sentence for an already-frozen model: what freezing left in it."""
    from ..engine.graph import frozen_contents

    contents = frozen_contents(loaded.module, inventory)
    return (f"{contents.summary()}: freezing it again runs only what still changes it",)


def _plan(preserved: Preserved, passes: tuple[str, ...]) -> Any:
    """The pipeline plan for the app's preserved names and ticked passes."""
    from ..engine.freeze import Plan

    # Ticking an optimize_for_inference pass is asking for optimize_for_inference.
    inference = any(REGISTRY[p].group == "inference" for p in passes if p in REGISTRY)
    return Plan.default(tuple(preserved), optimize_for_inference=inference).replace(
        passes=tuple(passes)
    )
