"""Write the pictures and diffs of a freeze to a directory, plus one page to read them.

``export`` runs the stepwise pipeline (:mod:`freezeview.engine.freeze.pipeline`) and writes:

- ``before.svg`` (the inlined graph), ``after.svg`` (the final frozen graph),
  ``diff.svg`` (after, coloured: added green, changed amber, removed as red ghosts),
  ``side-by-side.svg`` (before and after next to each other) and ``ir.diff`` (a unified
  diff of the IR printouts);
- with ``per_step``, ``NN-<step>.svg`` (that step's diff picture) and ``NN-<step>.diff``,
  for the steps that changed the graph (a step that changed nothing leaves no file);
- ``index.html``: the interactive review page (:mod:`.review_page`): one self-contained
  file that pans and zooms every picture, shows a box's details on a click, searches,
  steps through the freeze and lists every attribute with its status and reasons.

The directory is written whole or not at all: every file goes into a hidden temporary
directory next to it, which is renamed into place at the end (into an existing directory,
with ``force``, file by file over their namesakes), and a failure leaves nothing. When
Graphviz fails on a picture, a coarser level is drawn instead; when it fails (or runs
out of time) at every level, that one picture is left out with a sentence in the notes.
When Graphviz is missing, the ``.dot`` sources, the ``.diff`` files and the page are
still written, then :class:`GraphvizMissingError` says how to install Graphviz.

Memory is spent one stage at a time: torch's side (the freeze, explain, each step's
notes) is read and let go first (:mod:`.export_run`); a model the export loaded itself
goes with it. Then the snapshots are taken, the pictures handed to Graphviz in the
background (:mod:`.export_pictures`), the diff made, and the page written
(:mod:`.export_page`) once the diff and the drawing's prepared snapshots are gone.
"""

from __future__ import annotations

import functools
import os
import re
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import ParamSpec

import torch

from ..diff import DiffFacts, adopt_diff, diff_facts, diff_snapshots, unified_ir_diff
from ..draw import (
    FORMATS,
    DotQueue,
    GraphvizMissingError,
    Overruns,
    RenderOptions,
    find_dot,
    forget_prepared,
    module_paths,
    start_diff,
    start_side_by_side,
    start_snapshot,
)
from ..freeze import Plan, Step
from ..graph import GraphSnapshot
from ..load import LoadedModel, load_model
from ..plumbing import (
    Forked,
    OutputError,
    atomic,
    collector_paused,
    give_back_freed_memory,
    plural,
)
from .export_page import index_html
from .export_pictures import PictureQueue
from .export_run import run_for_export
from .export_values import ExportResult, PictureEntry, StepEntry

_P = ParamSpec("_P")

__all__ = ["ExportResult", "PictureEntry", "StepEntry", "export", "step_stem"]


def step_stem(step: Step) -> str:
    """``03-fold_conv_bn``: the file name stem of a step's outputs."""
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", step.name)
    return f"{step.index:02d}-{name}"


def _check_directory(directory: Path, names: Sequence[str], force: bool) -> None:
    if directory.exists() and not directory.is_dir():
        raise OutputError(f"{directory} is a file; give a directory to write the pictures into.")
    if not directory.exists():
        # The same sentences as for any output file: a parent that is a file, a
        # read-only location (missing parents are made). The directory itself appears
        # only once every file of the export is written (atomic.atomic_directory).
        atomic.check_output_path(directory)
        return
    atomic.check_output_path(directory / (names[0] if names else "index.html"), force=True)
    if not force:
        clash = [n for n in names if (directory / n).exists()]
        if clash:
            raise OutputError(
                f"{directory} already holds {clash[0]}"
                + (f" and {plural(len(clash) - 1, 'more output file')}" if len(clash) > 1 else "")
                + "; pass --force to overwrite."
            )


def _moved(result: ExportResult, work: Path, directory: Path) -> None:
    """Point the result's paths at the files' final place (they were written in ``work``)."""

    def final(path: Path) -> Path:
        return directory / path.name if path.parent == work else path

    result.files = [final(p) for p in result.files]
    result.index = final(result.index) if result.index is not None else None
    for entry in result.pictures:
        entry.result.path = final(entry.result.path)
    for step in result.steps:
        if step.diff_file is not None:
            step.diff_file = final(step.diff_file)
        if step.picture is not None and step.picture.result.path.parent == work:
            step.picture.result.path = final(step.picture.result.path)


# (before label, after label, before snapshot or None, after snapshot): one IR diff,
# and one structural diff unless the two are the same snapshot.
_DiffJob = tuple[str, str, GraphSnapshot | None, GraphSnapshot]


@dataclass(frozen=True)
class _DiffOutput:
    """What :func:`_diff_outputs` made for one job, and how long it took."""

    facts: DiffFacts | None  # None: no diff to draw
    text: str
    diff_seconds: float
    ir_diff_seconds: float


def _diff_outputs(jobs: Sequence[_DiffJob]) -> Iterator[_DiffOutput]:
    """Per job, its diff's facts and its IR diff text.

    Pure Python on snapshots alone, so a forked helper can run it (forked.py).
    """
    for before_label, after_label, previous, snap in jobs:
        start = time.perf_counter()
        facts = (
            diff_facts(diff_snapshots(previous, snap))
            if previous is not None and previous is not snap
            else None
        )
        diffed = time.perf_counter()
        text = (
            unified_ir_diff(previous, snap, before_label=before_label, after_label=after_label)
            if previous is not None
            else ""
        )
        yield _DiffOutput(facts, text, diffed - start, time.perf_counter() - diffed)


def _taken(helper: Forked[_DiffOutput], result: ExportResult) -> _DiffOutput:
    """The helper's next output (or the same made here), its time booked in ``result``."""
    from_helper = helper.from_helper
    output = next(helper)
    if helper.from_helper > from_helper:
        result.helper_seconds += output.diff_seconds + output.ir_diff_seconds
    else:
        result.diff_seconds += output.diff_seconds
        result.ir_diff_seconds += output.ir_diff_seconds
    result.helper_wait_seconds = helper.wait_seconds
    return output


def _collector_paused(func: Callable[_P, ExportResult]) -> Callable[_P, ExportResult]:
    """Run ``func`` with the cyclic garbage collector paused (:func:`collector_paused`).

    Drawing a 17k-node model builds millions of small objects (snapshots, diffs, views);
    the collector's full passes over them cost more than a second per export of a
    12-layer transformer. The catch-up is timed as :attr:`ExportResult.gc_seconds`.
    """

    @functools.wraps(func)
    def paused(*args: _P.args, **kwargs: _P.kwargs) -> ExportResult:
        called = time.perf_counter()
        with collector_paused() as catch_up:
            result = func(*args, **kwargs)
        result.gc_seconds = catch_up.seconds
        result.total_seconds = time.perf_counter() - called
        return result

    return paused


@_collector_paused
def export(
    model: LoadedModel
    | torch.jit.ScriptModule
    | str
    | os.PathLike[str]
    | Callable[[], LoadedModel],
    directory: str | os.PathLike[str],
    *,
    plan: Plan | None = None,
    fmt: str = "svg",
    per_step: bool = False,
    options: RenderOptions | None = None,
    force: bool = False,
    side_by_side: bool = True,
    progress: Callable[[str], None] | None = None,
    parallel: bool | None = None,
    inputs: Sequence[object] | None = None,
    measure: tuple[int, float] | tuple[int, float, bool] = (1, 0.25),
    profile: bool = False,
) -> ExportResult:
    """Freeze ``model`` step by step and write its pictures and diffs into ``directory``.

    Args:
        model: a loaded model, a ScriptModule, a path to a TorchScript file (never
            modified) or a function that loads one. A model loaded here (from a path
            or by the function) is let go once the freeze is read, before the pictures
            are drawn: on a 70k-node model its weights and torch's graphs are most of
            the export's memory.
        directory: where to write; created if missing (its parent must exist).
        plan: what to preserve and which passes to run (default: torch's plan).
        fmt: ``svg``, ``png`` or ``dot`` (DOT text only, no Graphviz needed).
        per_step: also write one picture and one IR diff per pipeline step.
        options: drawing options (level, expand, budget, timeout...).
        force: overwrite output files that already exist.
        side_by_side: also write ``side-by-side.<fmt>``.
        progress: called with a short text before each picture is drawn.
        parallel: let a forked helper process make the diffs and IR diffs while this
            one explains and draws, when the machine has a second CPU and can fork
            (:mod:`.forked`). None: only if this process runs no other thread; True:
            the caller vouches that its other threads hold no lock the diffs take
            (the CLI's progress spinner does not); False: never. The files written
            are the same either way.
        inputs: sample inputs: each step's numerics and latency (``measure`` =
            threads, seconds per step) go on the page's timeline, with the verdict; a
            step that takes the outputs past tolerance is bisected to the first node
            whose value differs (the page's "where the numbers move", that node's box
            outlined in the step's picture).
        profile: with ``inputs``, time each node of the unfrozen module's forward and of
            every step that changed the graph (as ``freeze --profile``): each picture's
            boxes are filled by their share of the forward's time (before.svg: the
            unfrozen module's; after, diff and the step pictures: the step's), and the
            page lists each step's dearest kinds and nodes before and after.

    Returns:
        An :class:`ExportResult`.

    Raises:
        BadInputError: the model cannot be read.
        PlanError: the model cannot be frozen with ``plan``.
        OutputError: the directory cannot be written, or holds outputs and not ``force``.
        GraphvizMissingError: ``dot`` is missing; the text outputs were written first.

    Example::

        result = export("model.pt", "out", per_step=True)
        print(result.index)  # out/index.html
    """
    if fmt not in FORMATS:
        raise OutputError(f"unknown picture format {fmt!r}; use one of {', '.join(FORMATS)}.")
    options = options or RenderOptions()
    directory = Path(directory)
    result = ExportResult(directory=directory)
    say = progress or (lambda _text: None)
    start = time.perf_counter()
    loaded = _loaded(model)
    result.load_seconds = time.perf_counter() - start
    del model  # a loader's model is this export's own: let nothing else hold it

    model_name = loaded.name or "model"
    modules = options.modules if options.modules is not None else module_paths(loaded.module)
    gv_missing = False
    if fmt != "dot":
        try:
            find_dot(options)
        except GraphvizMissingError:
            gv_missing = True
    pic_fmt = "dot" if gv_missing else fmt
    names = [f"{n}.{pic_fmt}" for n in ("before", "after", "diff")]
    names += [f"side-by-side.{pic_fmt}"] if side_by_side else []
    names += ["ir.diff", "index.html"]
    _check_directory(directory, names, force)
    overruns = options.overruns if options.overruns is not None else Overruns()
    # The before graph has no kept attributes yet: every attribute read is plain there.
    before_opts = replace(options, reasons=None, modules=modules, overruns=overruns)

    # Every file goes into a hidden directory next to the output, renamed into place at
    # the end: an export that fails half-way (Graphviz, Ctrl-C, a full disk) leaves no
    # half set of pictures without their page. Graphviz lays each picture out in the
    # background, one at a time, while this process goes on; the pictures are collected
    # at the end, in order (dot_queue.py).
    with atomic.atomic_directory(directory) as out, DotQueue() as dots:
        pictures = PictureQueue(out, pic_fmt, dots, result, say)
        say("freezing")
        run = run_for_export(
            loaded, plan, result, per_step=per_step, inputs=inputs, measure=measure, profile=profile
        )
        result.measurement = run.measurement
        timed = result.facts = run.facts
        unfrozen, last = timed.profile_of(None), timed.last()
        steps, shown = run.steps, run.shown
        # torch's side is read: the pipeline let go of its graphs and frozen modules,
        # and unless the caller holds the model, its weights go now too; the pages they
        # held go back to the system before the snapshots and pictures are built.
        del loaded
        give_back_freed_memory()
        # The after picture first: its snapshot is at hand, and Graphviz takes longest
        # on it; the before snapshot is taken while Graphviz lays it out.
        after, pairs = run.after, run.pairs
        opts = replace(before_opts, reasons=run.reasons)
        title = f"{model_name}: after freezing"
        begin = partial(start_snapshot, after, options=opts, overlay=timed.overlay(last, after))
        drawn_after = pictures.draw("after", title, begin)
        before, texts = run.take_before(result)
        give_back_freed_memory()  # the inlined graph, and the parse's own garbage
        # The before picture next: Graphviz's worker, done with the after picture (its
        # placing capped, render_pictures.py), lays it out while this process diffs.
        title = f"{model_name}: before freezing (inlined)"
        heat_before = timed.overlay(unfrozen, before)
        begin = partial(start_snapshot, before, options=before_opts, overlay=heat_before)
        drawn_before = pictures.draw("before", title, begin)
        if per_step:
            stems = [step_stem(step) for step in shown]
            _check_directory(
                directory, [f"{t}.{x}" for t in stems for x in ("diff", pic_fmt)], force
            )

        # Diffs and IR diffs need nothing but the snapshots: with per-step pictures, a
        # forked copy of this process makes them on the other CPU while this one draws
        # (forked.py), the overall diff first. Without, the overall diff is made here:
        # the fork's copy-on-write image of a 70k-node model cost more memory (its pages
        # touched) than its one diff saved time, and Graphviz uses the other CPU. Its
        # picture goes to Graphviz before the IR diff is written.
        fork = parallel if pairs else False
        jobs: list[_DiffJob] = [("before", "after", before, after)] if fork else []
        jobs += [
            (f"before {step.name}", f"after {step.name}", previous, snap)
            for step, previous, snap in pairs
        ]
        with Forked(partial(_diff_outputs, jobs), enabled=fork) as helper:
            ir_text: str | None = None
            facts: DiffFacts | None = None
            if fork:
                done = _taken(helper, result)
                ir_text, facts = done.text, done.facts
            start = time.perf_counter()
            overall = (
                adopt_diff(before, after, facts)
                if facts is not None
                else diff_snapshots(before, after)
            )
            result.diff_seconds += time.perf_counter() - start
            title = f"{model_name}: {overall.summary()}"
            heat = timed.overlay(last, after, ghosts=unfrozen, before=before)
            begin = partial(start_diff, overall, options=opts, overlay=heat)
            drawn_diff = pictures.draw("diff", title, begin)
            # Collected, and listed, in the usual order.
            overall_pictures = [drawn_before, drawn_after, drawn_diff]
            if side_by_side:
                title = f"{model_name}: before / after"
                sides = (heat_before, timed.overlay(last, after))
                begin = partial(start_side_by_side, overall, options=opts, overlays=sides)
                overall_pictures.append(pictures.draw("side-by-side", title, begin))
            start = time.perf_counter()
            if ir_text is None:
                ir_text = unified_ir_diff(before, after, before_label="before", after_label="after")
            result.files.append(atomic.write_text(out / "ir.diff", ir_text))
            result.ir_diff_seconds += time.perf_counter() - start

            step_pictures: list[tuple[StepEntry, int]] = []
            for step, previous, snap in pairs:
                done = _taken(helper, result)
                facts, text = done.facts, done.text
                stem = step_stem(step)
                start = time.perf_counter()
                # A step that left the graph alone shares its snapshot with the step before
                # it (pipeline.py): it gets an empty .diff file and no picture, and no diff
                # (one of a graph against itself would report nothing).
                step_diff = (
                    adopt_diff(previous, snap, facts)
                    if facts is not None and previous is not None
                    else None
                )
                result.diff_seconds += time.perf_counter() - start
                start = time.perf_counter()
                diff_file = atomic.write_text(out / f"{stem}.diff", text) if text else None
                if diff_file is not None:
                    result.files.append(diff_file)
                result.ir_diff_seconds += time.perf_counter() - start
                summary = (
                    "no change"
                    if previous is snap
                    else step_diff.summary()
                    if step_diff is not None
                    else "first graph"
                )
                title = f"{step.index:02d} {step.title}: {summary}"
                entry = StepEntry(step, summary, diff_file, None, previous, snap)
                result.steps.append(entry)
                if step.changed and step_diff is not None and not step_diff.is_empty:
                    # Inlining replaces one call by the whole graph: the diff of step 00 is
                    # "all added", so the plain inlined graph says the same, more quietly.
                    heat = timed.step_overlay(step.index, snap, previous)
                    begin = (
                        partial(start_snapshot, snap, options=before_opts, overlay=heat)
                        if step.index == 0
                        else partial(start_diff, step_diff, options=opts, overlay=heat)
                    )
                    step_pictures.append((entry, pictures.draw(stem, title, begin)))

        # Every picture is built: the snapshots prepared for drawing go (a coarser level
        # drawn after an overrun prepares its snapshot again).
        changes = overall.summary()
        forget_prepared(before, after)
        give_back_freed_memory()
        # Collected in the order drawn, so the files, notes and page read as before.
        say("waiting for Graphviz")
        for index in overall_pictures:
            picture = pictures.finish(index)
            if picture is not None:
                result.pictures.append(picture)
        for entry, index in step_pictures:
            entry.picture = pictures.finish(index)
        result.dot_wait_seconds = dots.wait_seconds
        # The page needs the snapshots and the views drawn, not the diff.
        del overall, begin
        give_back_freed_memory()

        say("writing index.html")
        start = time.perf_counter()
        result.index = index_html(
            out / "index.html",
            result,
            name=model_name,
            plan=run.plan,
            before=before,
            after=after,
            changes=changes,
            steps=steps,
            fmt=pic_fmt,
            ir_text=ir_text,
            explanation=run.explanation,
            texts=texts,
        )
        result.files.append(result.index)
        result.index_seconds = time.perf_counter() - start
    _moved(result, out, directory)
    if gv_missing:
        result.graphviz_missing = True
        raise GraphvizMissingError(
            f"Graphviz's `dot` program is not installed, so {directory} got the .dot and "
            ".diff files but no pictures; install it with `apt-get install graphviz` "
            "(macOS: `brew install graphviz`) and export again."
        )
    return result


def _loaded(
    model: LoadedModel
    | torch.jit.ScriptModule
    | str
    | os.PathLike[str]
    | Callable[[], LoadedModel],
) -> LoadedModel:
    """The model to export, loaded now if it is a path or a loader."""
    if isinstance(model, LoadedModel):
        return model
    if isinstance(model, (str, os.PathLike)):
        return load_model(model)
    if isinstance(model, torch.jit.ScriptModule):
        return LoadedModel.from_module(model)
    return model()
