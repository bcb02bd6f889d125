"""The run of a plan: the freeze phase, then the optimization passes, step by step.

:class:`RunContext` carries one run of a :class:`~.pipeline.Pipeline`: it inlines,
folds attributes and cleans up exactly as ``torch._C._freeze_module`` does (the
clean-up *is* torch's result; :mod:`.freeze_phase`), then runs each optimization pass in
torch's order, including the fixed-point loop, yielding a :class:`~.steps.Step` after
each.
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping

from .freeze_phase import FreezePhase
from .lazy_graph import LazyGraph
from .numerics import Numerics
from .pass_diagnosis import SCOPED_KINDS, Reading
from .passes import PassInfo, guard_info, needs_guard
from .steps import Step, StepDetails, kind_counts, same_ir, step_details

__all__: list[str] = []

# A fixed-point loop that has not settled after this many rounds is stopped (torch
# would loop forever; a note on the step says so).
_MAX_ROUNDS = 50


class RunContext(FreezePhase):
    """State of one run of a pipeline: the freeze phase, then the passes."""

    # --- optimization phase -----------------------------------------------------------

    def optimize_phase(self) -> Iterator[Step]:
        plan, reg = self.plan, self.pipe.registry
        segments: list[tuple[str, list[str]]] = []
        for pid in plan.passes:
            group = reg[pid].group
            if group == "loop" and segments and segments[-1][0] == "loop":
                segments[-1][1].append(pid)
            else:
                segments.append(("loop" if group == "loop" else "once", [pid]))
        guard_after = len(segments)
        if needs_guard() and plan.is_torch_default:
            # After the last frozen-graph segment, before the inference passes.
            guard_after = sum(1 for s in segments if reg[s[1][0]].group != "inference")
        for position, (mode, ids) in enumerate(segments):
            if position == guard_after:
                yield from self._guard_step()
                if self.stopped:
                    return
            if mode == "once":
                yield from self._pass_step(reg[ids[0]], None)
                if self.stopped:
                    return
                continue
            for round_ in range(1, _MAX_ROUNDS + 1):
                any_fold = False
                for pid in ids:
                    yield from self._pass_step(reg[pid], round_)
                    if self.stopped:
                        return
                    any_fold |= self.fired
                if not any_fold:
                    break
            else:
                self.pipe.warnings.append(
                    f"the fold loop had not settled after {_MAX_ROUNDS} rounds; stopped it"
                )
        if guard_after == len(segments):
            yield from self._guard_step()

    def _guard_step(self) -> Iterator[Step]:
        if not (needs_guard() and self.plan.is_torch_default):
            return
        info = guard_info(self.plan.optimize_numerics)
        yield from self._pass_step(info, None)
        step = self.pipe.steps[-1]
        if step.changed:
            self.pipe.warnings.append(
                "torch's own optimize_frozen_graph changed the graph after freezeview's "
                "passes: this torch release's order differs from freezeview's registry; the "
                "result is still torch's."
            )

    def _pass_step(self, info: PassInfo, round_: int | None) -> Iterator[Step]:
        pipe = self.pipe
        working = pipe.working
        assert working is not None
        title = info.title + (f" (round {round_})" if round_ is not None else "")
        if not self._announce(info.id, title, info.kind):
            return
        graphs = {
            m: self._method_graph(working._c, m) for m in self.methods if working._c._has_method(m)
        }
        before = dict(self.current)
        held = []
        for m, graph in before.items():
            # The pass rewrites the working graphs in place: a picture of one keeps a
            # copy, unless its counts need no graph any more (the CLI's large graphs).
            if pipe.read_in_order and graph.hold():
                held.append(m)
            else:
                graph.detach()
        start = time.perf_counter()
        error = None
        reported: list[bool | None] = []
        try:
            for m, g in graphs.items():
                reported.append(info.apply(g, m, working._c))
        except Exception as exc:
            error = (
                f"{info.id} failed: "
                + ((str(exc).strip().splitlines() or [type(exc).__name__])[0][:300])
            )
        seconds = time.perf_counter() - start
        # ``changed`` is judged on the printout, not on what the pass returns: torch's
        # folds report False yet still run dead-code elimination, which can remove
        # constants an earlier pass left unused.
        texts = {m: str(g) for m, g in graphs.items()}
        changed_methods = [
            m for m in graphs if m not in before or not same_ir(before[m].text, texts[m])
        ]
        changed = bool(changed_methods)
        for m in held:
            if m in changed_methods:
                before[m].release()  # it no longer shows what the graph is
        # Whether the fold loop goes on is torch's own test: did a fold report folding
        # (``changed |= FoldFrozenConvBatchnorm(graph)`` in frozen_graph_optimizations.cpp),
        # so the loop runs as many rounds as torch's; a pass that cannot tell counts
        # by its printout.
        self.fired = any(r for r in reported) or (changed and None in reported)
        after = dict(before)
        for m in changed_methods:
            after[m] = LazyGraph(m, graphs[m], live=True, text=texts[m])
        num: Numerics | None = None
        tail: tuple[str, ...] = ()
        if error is None:
            prev = pipe.steps[-1].numerics if pipe.steps else None
            if changed or prev is None:
                num, note = pipe.step_numerics(graphs.get("forward"), working)
                tail = (note,) if note else ()
            else:
                num = prev
        shown = before.get("forward") or next(iter(before.values()), None)

        def pass_details(
            before: Mapping[str, LazyGraph] = before,
            after: Mapping[str, LazyGraph] = after,
            shown: LazyGraph | None = shown,
        ) -> StepDetails:
            if changed:
                a, r, c, notes = kind_counts(before, after)
                return a, r, c, (*notes, *tail)
            if error is None:
                # The diagnoses read a few kinds of nodes: no full picture for them, and
                # none at all when the kind tally has none of their pass's nodes.
                why = info.why_not(_reading(shown) if shown is not None else None)
                return 0, 0, 0, (f"did not fire: {why}", *tail)
            return 0, 0, 0, tail

        yield self._add(
            Step(
                len(pipe.steps),
                info.id,
                title,
                info.kind,
                changed,
                seconds,
                num,
                error,
                round_,
                _graphs=after,
                _lazy=step_details(pass_details, tail),
            )
        )


def _reading(shown: LazyGraph) -> Reading:
    """What a pass's diagnosis reads of the graph it left unchanged: the kind tally, and
    a partial snapshot (:meth:`LazyGraph.reading`) if the sentence needs one."""
    return Reading(shown.kinds(), lambda: shown.reading(SCOPED_KINDS))
