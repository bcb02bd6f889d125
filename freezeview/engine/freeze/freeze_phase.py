"""The freeze phase of a run: inline, fold attributes, clean-up (torch's own result).

:class:`~.run_state.RunState` is what one run of a pipeline carries (the plan, the
steps so far, the graphs the last step shows); :class:`FreezePhase` adds the three
freeze steps: *inline* and *fold attributes* are pictures freezeview builds when first
read, *clean-up* is the real ``torch._C._freeze_module`` result. The optimization passes
follow in :mod:`.pipeline_run`.
"""

from __future__ import annotations

import re
import time
import warnings
import weakref
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

import torch

from ..plumbing import plural
from ..reasons import torch_outcome
from . import lazy_graph as _lazy
from .fold_picture import (
    attribute_chains,
    attribute_reads,
    call_count,
    fold_graph,
    fold_tally,
    module_paths,
    pick_graph,
)
from .lazy_graph import LazyGraph, OnceGraphs
from .run_state import PictureSteps, RunHost, RunState
from .steps import Step, StepDetails, kind_counts, step_details

__all__: list[str] = []


#: The inline step's first note when the model is already frozen (torch.jit.freeze's output).
ALREADY_FROZEN_NOTE = (
    "the model is already frozen (torch.jit.freeze's output): freezing it again, as torch "
    "allows, changes only what is left to fold or clean up"
)

_FREEZE_TITLES = {
    "inline": "inline calls",
    "fold_attributes": "fold attributes to constants",
    "cleanup": "clean-up (torch._C._freeze_module)",
}


class FreezePhase(RunState):
    """The freeze phase: inline, fold attributes, clean-up."""

    # --- freeze phase -----------------------------------------------------------------

    def freeze_phase(self) -> Iterator[Step]:
        pipe, plan = self.pipe, self.plan
        cmod = pipe.module._c
        # An earlier run's inline and fold steps of this module (the app's re-runs): the
        # same pictures, made again from the same graphs; the fold step only with the
        # same freeze, where torch's freeze below keeps the same attributes.
        offered, pipe.offered_steps = pipe.offered_steps, None  # for this run only
        if offered is not None and not offered.fits(self.methods):
            offered = None
        for m in self.methods if offered is None else ():
            if m not in pipe.initial_graphs:
                picture = LazyGraph(m, self._method_graph(cmod, m), live=True)
                # A copy: a picture must not follow later edits of the caller's module.
                picture.detach()
                pipe.initial_graphs[m] = picture
        initial = {m: pipe.initial_graphs[m] for m in self.methods if offered is None}

        # 1. inline
        if not self._announce("inline", _FREEZE_TITLES["inline"], "freeze"):
            return
        start = time.perf_counter()
        methods = list(self.methods)

        def inline_all() -> dict[str, torch._C.Graph]:
            graphs = {}
            for m in methods:
                # The inline step shown again holds the same inlined graph (unless its
                # snapshot replaced it): the fold picture copies it, never changes it.
                held = reused.graphs[m].graph() if reused is not None else None
                if held is not None and not pipe.read_in_order:
                    graphs[m] = held
                    continue
                graph = self._method_graph(cmod, m).copy()
                torch._C._jit_pass_inline(graph)
                graphs[m] = graph
            return graphs

        # The inlined copies are freezeview's pictures, built when first needed: torch
        # inlines its own clone inside _freeze_module, and inlining the caller's module
        # a second time (compiling each callee's optimized graph again) would cost a
        # third of torch's whole freeze.
        reused = offered.inline if offered is not None else None
        inlined = OnceGraphs(inline_all)
        inline_graphs = {m: LazyGraph(m, build=pick_graph(inlined, m)) for m in methods}
        self._offer_earlier("inline", inline_graphs)
        changed: bool | OnceGraphs = False
        if reused is None:
            sources = {m: self._method_graph(cmod, m) for m in methods}
            changed = self._inline_changed(sources, initial, inlined, inline_graphs)
        seconds = time.perf_counter() - start
        # freeze itself (torch's work) happens now: the fold step needs to know what
        # torch kept, and the guard for numerics needs it before any run.
        start = time.perf_counter()
        frozen: torch.jit.ScriptModule | None = None
        freeze_error: str | None = None
        adopted = None
        try:
            # The caller's own freeze with these names (the app's explain made it), else
            # torch's freeze now, with torch's freezing log: explain reads its statuses
            # off this very run instead of freezing the model a second time.
            adopted = pipe.take_outcome(plan.preserved_attrs) if plan.freeze_interfaces else None
            if adopted is not None:
                outcome = adopted
            else:
                with warnings.catch_warnings():
                    warnings.simplefilter("ignore")
                    outcome = torch_outcome(
                        cmod, list(plan.preserved_attrs), plan.freeze_interfaces
                    )
            if plan.freeze_interfaces:
                pipe.outcomes[tuple(plan.preserved_attrs)] = outcome
            frozen = torch.jit.RecursiveScriptModule(outcome.frozen)
            torch.jit.RecursiveScriptModule._finalize_scriptmodule(frozen)
        except Exception as exc:
            freeze_error = _refusal(exc, pipe.loaded.name or "the model")
        freeze_seconds = time.perf_counter() - start
        if frozen is not None and adopted is not None:
            freeze_seconds += adopted.seconds  # torch's own time, spent before the run
        kept_paths: set[str] = set()
        frozen_all: set[str] = set()
        if frozen is not None:
            kept_paths, frozen_all = module_paths(frozen)
            pipe.prepare_numerics(kept_paths, frozen)
        if reused is not None:
            yield self._add(reused)
        else:
            forward = inline_graphs.get("forward")
            num, note = pipe.step_numerics(
                forward.graph if forward is not None else None, pipe.module
            )
            tail: tuple[str, ...] = (note,) if note else ()
            head = (ALREADY_FROZEN_NOTE,) if pipe.loaded.already_frozen else ()

            def inline_details(
                before: Mapping[str, LazyGraph] = initial,
                after: Mapping[str, LazyGraph] = inline_graphs,
                changed: bool | OnceGraphs = changed,
                # Bound now: the clean-up step below gives ``tail`` its own notes.
                tail: tuple[str, ...] = tail,
                head: tuple[str, ...] = head,
            ) -> StepDetails:
                a, r, c, notes = kind_counts(before, after)
                if not (changed.get() if isinstance(changed, OnceGraphs) else changed):
                    notes = ["nothing to inline: the methods call no other methods or functions"]
                return a, r, c, (*head, *notes, *tail)

            yield self._add(
                Step(
                    0,
                    "inline",
                    _FREEZE_TITLES["inline"],
                    "freeze",
                    changed,
                    seconds,
                    num,
                    _graphs=inline_graphs,
                    _lazy=step_details(inline_details, tail),
                )
            )

        # 2. fold attributes
        if not self._announce("fold_attributes", _FREEZE_TITLES["fold_attributes"], "freeze"):
            return
        if reused is not None and offered and offered.fold_fits(plan.freeze_key, kept_paths):
            yield self._add(offered.fold)
        else:
            yield self._add(
                self._fold_step(inlined, kept_paths, freeze_error, inline_graphs, changed)
            )
        if freeze_error is None and not self.stopped:
            pipe.picture_steps = PictureSteps(
                plan.freeze_key, tuple(self.methods), frozenset(kept_paths), *pipe.steps[:2]
            )
        if self.stopped:
            return

        # 3. clean-up: torch's own _freeze_module result
        if not self._announce("cleanup", _FREEZE_TITLES["cleanup"], "freeze"):
            return
        if frozen is None:
            yield self._add(
                Step(
                    2,
                    "cleanup",
                    _FREEZE_TITLES["cleanup"],
                    "freeze",
                    False,
                    freeze_seconds,
                    error=freeze_error,
                )
            )
            return
        else:
            before = dict(self.current)
            # The working module's own graphs, until a pass is about to change them.
            after = {
                m: LazyGraph(m, self._method_graph(frozen._c, m), live=True)
                for m in self.methods
                if frozen._c._has_method(m)
            }
            num, note = pipe.step_numerics(
                self._method_graph(frozen._c, "forward") if "forward" in after else None, frozen
            )
            # The working module from now on (readers of the step see its graphs).
            pipe.working = frozen

            def cleanup_tail(
                kept_paths: set[str] = kept_paths,
                frozen_all: set[str] = frozen_all,
                note: str = note,
            ) -> tuple[str, ...]:
                # Listing every path of the input module waits
                # for a reader of the notes: check and compare never read them.
                dropped = pipe.module_paths()[0] - frozen_all
                kept_note = (
                    f"{plural(len(kept_paths), 'attribute')} kept on the frozen module; "
                    f"{plural(len(dropped), 'attribute or submodule path')} removed"
                )
                return (kept_note, note) if note else (kept_note,)

            def cleanup_counts(
                before: Mapping[str, LazyGraph] = before,
                after: Mapping[str, LazyGraph] = after,
            ) -> StepDetails:
                a, r, c, notes = kind_counts(before, after)
                return a, r, c, tuple(notes)

            # The counts and their notes come without the kept/removed paths sentence:
            # listing the input module's paths (linear in the model) waits for
            # a reader of every note (freeze's table shows the first only).
            counted = OnceGraphs(cleanup_counts)

            def cleanup_details() -> StepDetails:
                a, r, c, notes = counted.get()
                return a, r, c, (*notes, *cleanup_tail())

            yield self._add(
                Step(
                    2,
                    "cleanup",
                    _FREEZE_TITLES["cleanup"],
                    "freeze",
                    True,
                    freeze_seconds,
                    num,
                    _graphs=after,
                    _lazy=step_details(cleanup_details, cleanup_tail),
                    _head=step_details(counted.get),
                )
            )
        pipe.working = frozen

    def _offer_earlier(self, step: str, pictures: Mapping[str, LazyGraph]) -> None:
        for method, picture in pictures.items():
            earlier = self.pipe.earlier_picture(step, method)
            if earlier is not None:
                picture.offer(earlier)

    @staticmethod
    def _inline_changed(
        sources: Mapping[str, torch._C.Graph],
        initial: Mapping[str, LazyGraph],
        inlined: OnceGraphs,
        pictures: Mapping[str, LazyGraph],
    ) -> bool | OnceGraphs:
        """Whether inlining changes any graph: False at once when there is no call.

        Otherwise the answer waits for the inlined pictures (inlining only ever
        replaces calls, but torch leaves calls through module interfaces in place).
        """
        calls = {m: call_count(g) for m, g in sources.items()}
        if not any(calls.values()):
            return False

        def compare() -> bool:
            graphs: dict[str, torch._C.Graph] = inlined.get()
            for m, count in calls.items():
                # The picture's printout: the step's counts read the same text.
                if not count:
                    continue
                if call_count(graphs[m]) < count or initial[m].text != pictures[m].text:
                    return True
            return False

        return OnceGraphs(compare)

    def _fold_step(
        self,
        inlined: OnceGraphs,
        kept_paths: set[str],
        freeze_error: str | None,
        inline_graphs: Mapping[str, LazyGraph],
        inline_changed: bool | OnceGraphs,
    ) -> Step:
        """The inlined graphs with every attribute torch folded replaced by a constant.

        Which attributes torch folded and which it kept comes from torch's own result
        (the attributes left on the frozen module are the kept ones), read off the
        inlined graphs. Like the picture itself, that is worked out when someone first
        asks (or when sample inputs run through the picture).
        """
        pipe = self.pipe
        before = dict(self.current)
        if freeze_error is not None:
            return Step(
                1,
                "fold_attributes",
                _FREEZE_TITLES["fold_attributes"],
                "freeze",
                False,
                _graphs=before,
                error=freeze_error,
            )
        start = time.perf_counter()
        cmod = pipe.module._c

        # A reader of each step once, in order (the CLI), lets the fold step fold the
        # inlined graphs in place: their attribute reads, found once, serve both the
        # classification and the fold. For every reader they serve the counts of a
        # large picture (:func:`fold_tally`), which then is built only when its graph
        # is asked for (the app showing the step).
        in_order = pipe.read_in_order
        chains: dict[str, list[tuple[torch._C.Node, str, Any]]] = {}

        def classify() -> tuple[tuple[str, ...], tuple[str, ...]]:
            folded: set[str] = set()
            kept: set[str] = set()
            graphs: dict[str, torch._C.Graph] = inlined.get()
            for m, g in graphs.items():
                # Read in order (the CLI), the fold may change the inlined graph in
                # place; else nothing changes it, and an inline step shown again (a
                # re-run with other names) has its reads found already.
                found = attribute_chains(g, cmod, unchanging=not in_order)
                chains[m] = found
                f, k = attribute_reads(g, cmod, kept_paths, found)
                folded |= f
                kept |= k
            return tuple(sorted(folded)), tuple(sorted(kept))

        attributes = OnceGraphs(classify)
        unshown: set[str] = set()

        def builder(method: str) -> Callable[[], torch._C.Graph]:
            def build() -> torch._C.Graph:
                source = inlined.get()[method]
                shown = inline_graphs.get(method)
                ours = before.get(method) is shown and shown is not None
                if in_order and ours and shown is not None and not shown.released:
                    # The inline step's row is read: its counts need no graph (too large
                    # for a full diff) once its change and attribute reads are known.
                    attributes.get()
                    if isinstance(inline_changed, OnceGraphs):
                        inline_changed.get()
                    if shown.settled:
                        shown.release()
                # The inlined graph is folded in place once nothing reads it any more:
                # the inline step's picture has let it go (the CLI's table, row by row),
                # the attribute reads are classified and the inline step's change known.
                # Copying a 9k-node graph is the largest allocation of the whole run.
                done = (
                    ours
                    and shown is not None
                    and shown.released
                    and attributes.done
                    and not (isinstance(inline_changed, OnceGraphs) and not inline_changed.done)
                )
                copy = source if done else source.copy()
                # The folded picture's kinds are the inline picture's, plus what the fold
                # inserts and removes: counted as it goes, no printout of the result.
                base = shown.known_kinds() if done and shown is not None else None
                found = chains.pop(method, None)
                if not done:
                    found = None  # the reads of the inlined graph, not of its copy
                unshown.update(fold_graph(copy, cmod, kept_paths, chains=found, tally=base))
                picture = made.get(method)
                if base is not None and picture is not None:
                    picture.set_kinds(base)
                return copy

            return build

        told: set[str] = set()

        def counter(method: str) -> Callable[[], Counter[str] | None]:
            def count() -> Counter[str] | None:
                """The folded picture's kinds from the inlined graph's reads, unfolded.

                A large graph's step counts by kind only; the fold's kinds follow from
                the reads (:func:`fold_tally`), and the picture is built only if
                something asks for its graph (the app showing the step, ``--json``'s
                constant bytes, the notes, sample inputs): 16k constants inserted one by
                one from Python and freed again, for counts known without them.
                """
                shown = before.get(method)
                if shown is None:
                    return None
                if in_order:
                    # The inline step's own picture, its kinds counted when its row was.
                    if shown is not inline_graphs.get(method):
                        return None
                    base = shown.known_kinds()
                elif shown.released:
                    return None
                else:
                    # The inline step shown (this run's, or an earlier run's offered
                    # again): a picture of the very graph the reads are found in.
                    base = shown.kinds()
                if base is None or sum(base.values()) <= _lazy.FULL_DIFF_LIMIT:
                    return None  # a full diff reads the graph anyway
                attributes.get()  # finds the reads
                # Read in order, the fold in place may still use them; else done with.
                found = chains.get(method) if in_order else chains.pop(method, None)
                kinds = fold_tally(found, kept_paths, base) if found is not None else None
                if kinds is not None:
                    told.add(method)
                return kinds

            return count

        after = {m: LazyGraph(m, build=builder(m), count=counter(m)) for m in before}
        # The builders reach their pictures weakly: a picture never built (the app's
        # step nobody looked at) is freed with its step, no reference cycle to collect.
        made: weakref.WeakValueDictionary[str, LazyGraph] = weakref.WeakValueDictionary(after)
        self._offer_earlier("fold_attributes", after)
        forward = after.get("forward")
        num, note = pipe.step_numerics(forward.graph if forward is not None else None, pipe.module)
        preserved = self.plan.preserved_attrs

        def build_all() -> None:
            for graph in after.values():
                graph.graph()  # builds the folded graph, which fills ``unshown``

        def fold_counts() -> StepDetails:
            folded, kept = attributes.get()
            head = f"{plural(len(folded), 'attribute')} folded into constants, {len(kept)} kept"
            a, r, c, notes = kind_counts(before, after)
            if not all(m in told for m in after):
                build_all()
            return a, r, c, (head, *notes)

        # The counts and the head sentence come without the kept attributes' reasons:
        # those run explain, which a reader of the counts alone (the CLI's table) skips.
        counted = OnceGraphs(fold_counts)

        def fold_details() -> StepDetails:
            a, r, c, lead = counted.get()
            kept = attributes.get()[1]
            tail = list(_kept_reasons(pipe, preserved, list(kept))) if kept else []
            build_all()  # the paths left unshown are known once the fold is made
            if unshown:
                tail.append(
                    "folded by torch but shown as attribute reads here (no constant form in "
                    "Python): " + ", ".join(sorted(unshown)[:8])
                )
            if note:
                tail.append(note)
            return a, r, c, (*lead, *tail)

        return Step(
            1,
            "fold_attributes",
            _FREEZE_TITLES["fold_attributes"],
            "freeze",
            OnceGraphs(lambda: bool(attributes.get()[0])),
            time.perf_counter() - start,
            num,
            _attributes=attributes,
            _graphs=after,
            _lazy=step_details(fold_details),
            _head=step_details(counted.get),
        )


_ASSERT_PREFIX_RE = re.compile(
    r"^.*INTERNAL ASSERT FAILED at .*?please report a bug to PyTorch\.\s*"
)


def _refusal(exc: Exception, model: str) -> str:
    """torch's refusal to freeze as freezeview's sentence (file name and fix), quoting torch.

    The sentence is the one ``freezeview explain`` gives for the same model; torch's own
    first line follows, so a user can search for it.
    """
    lines = [line.strip() for line in str(exc).strip().splitlines() if line.strip()]
    # torch words some refusals as failed internal asserts; the sentence after the
    # assert's boilerplate is the part that says something.
    first = _ASSERT_PREFIX_RE.sub("", lines[0] if lines else type(exc).__name__)[:300]
    try:
        from ..reasons import torch_refusal

        sentence = torch_refusal(str(exc), model)
    except Exception:
        return f"torch refused to freeze {model}: {first}"
    return sentence if first in sentence else f"{sentence} (torch: {first})"


def _kept_reasons(pipe: RunHost, preserved: Sequence[str], kept: list[str]) -> list[str]:
    """One note per kept attribute, with explain's reason when explain is there.

    Runs when someone reads the fold step's notes, never while the pipeline runs: on a
    large model explain's alias analysis costs about as much as freezing itself.
    """
    reasons: dict[str, str] = {}
    try:
        verdicts = pipe.explanation(preserved)
        if verdicts is not None:
            # Only the first twenty are told; one pass over the verdicts finds them (a
            # lookup per kept path read every verdict each time: quadratic in the kept).
            shown = set(kept[:20])
            found = {v.path: v for v in verdicts.attributes if v.path in shown}
            for path in shown:
                verdict = found.get(path)
                if verdict is not None and verdict.reasons:
                    reasons[path] = verdict.reasons[0].message
    except Exception:
        reasons = {}
    return [f"kept {p}: {reasons[p]}" if p in reasons else f"kept {p}" for p in kept[:20]] + (
        [f"... and {len(kept) - 20} more kept"] if len(kept) > 20 else []
    )
