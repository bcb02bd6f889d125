"""A stepwise freeze with its numbers: latency and constant bytes per step, then the result's.

:class:`MeasuredRun` follows a :class:`~freezeview.engine.freeze.Pipeline` run step by
step. The moment a step is yielded its graphs are still at hand, so then - and only for
steps that changed the graph - it counts the bytes of tensor constants and, with sample
inputs, times the step's forward graph on them (:func:`.latency.time_forward`): the
unfrozen module first, so every step is compared with what the user had. Once the run is
over, :meth:`MeasuredRun.time_verdict` times the unfrozen module and the final frozen one
again, in alternating blocks (:func:`.latency.time_pair`): load that moves between two
timings minutes apart then moves both alike, and that pair is the one figure of each the
verdict, the table's unfrozen line and final row and the JSON quote. After the last step
:meth:`MeasuredRun.finish` adds the result's sizes and portability.

Without sample inputs nothing runs (no forward, no timing): only the constant bytes,
read off graphs the steps hold anyway.
"""

from __future__ import annotations

import copy
import threading
import weakref
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import torch

from ..freeze import Pipeline, Progress, SandboxError, Step, compare_outputs
from ..plumbing import torch_cause
from .constants import (
    backend_only_nodes,
    constant_bytes,
    constant_tensors,
    duplicate_bytes,
    kept_attribute_bytes,
)
from .latency import DEFAULT_BUDGET, DEFAULT_THREADS, Timing, time_forward, time_pair
from .measure_values import Latency, Measurement, SecondCall, Sizes
from .portability import portability, roundtrip

__all__ = ["MeasuredRun"]


def _first_line(exc: BaseException) -> str:
    """torch's own line that says why (the last one of a TorchScript interpreter error)."""
    return torch_cause(exc)


class MeasuredRun:
    """Measure a pipeline's run: per-step latency and constant bytes, then the result.

    Args:
        pipe: the pipeline (its ``inputs`` are the sample inputs; None: nothing is timed).
        threads: torch's intra-op threads while timing (``--threads``).
        budget: seconds of timing per forward (``--time-budget``); 0 times nothing (the
            round trip, a check of outputs, still runs).
        autograd: time with autograd on (``--autograd``) instead of under
            ``torch.inference_mode()`` (:func:`.latency.time_forward`).
        defer_constants: count a step's constant bytes only when the caller asks
            (:meth:`count_constants`, while the step's graphs are still held), not as it
            is yielded: a reader that never shows them (the CLI's table without sample
            inputs) spares the count and the fold step's picture built just for it.

    Example::

        run = MeasuredRun(Pipeline(module, plan, inputs))
        for step in run.run():
            print(step.title, run.measurement.steps.get(step.index))
        run.finish()
        print(run.measurement.portability, verdict_text(run.measurement))
    """

    # Steps timed in this process, by the step itself (with how they were timed): a
    # re-run shows the last run's inline and fold steps again when what they depend on
    # did not change, their graphs released by then; the same step runs as fast, so
    # its timing stands instead of a "-" in the latency column. Weak: a step no run
    # shows any more takes its entry with it.
    _timed: weakref.WeakKeyDictionary[Step, tuple[tuple[int, float, int, bool], Latency]] = (
        weakref.WeakKeyDictionary()
    )

    def __init__(
        self,
        pipe: Pipeline,
        *,
        threads: int = DEFAULT_THREADS,
        budget: float = DEFAULT_BUDGET,
        defer_constants: bool = False,
        autograd: bool = False,
    ) -> None:
        self.pipe = pipe
        self.autograd = autograd
        self.defer_constants = defer_constants
        self.threads = threads
        self.budget = budget
        self.timings: list[Timing] = []
        self._unfrozen: Latency | None = None
        self._steps: dict[int, Latency] = {}
        self._titles: dict[int, str] = {}
        self._names: dict[int, str] = {}
        self._bytes: dict[int, int | None] = {}
        self._notes: dict[int, str] = {}
        self._backend_step: str | None = None
        self._last_changed: int | None = None
        self._paired = False
        self._result: Measurement | None = None

    @classmethod
    def of(
        cls,
        pipe: Pipeline,
        measure: tuple[int, float] | tuple[int, float, bool],
        **kwargs: Any,
    ) -> MeasuredRun:
        """A run measured as ``measure`` asks: ``(threads, budget)``, or ``(threads,
        budget, autograd)`` (the Python API's ``measure`` argument)."""
        autograd = bool(measure[2]) if len(measure) > 2 else False
        return cls(
            pipe, threads=int(measure[0]), budget=float(measure[1]), autograd=autograd, **kwargs
        )

    @property
    def timing(self) -> bool:
        """True when forwards are timed (sample inputs and a budget above zero)."""
        return self.pipe.inputs is not None and self.budget > 0

    @property
    def measurement(self) -> Measurement:
        """What has been measured so far (the result's sizes once :meth:`finish` ran)."""
        if self._result is not None:
            return self._result
        return Measurement(
            threads=self.threads,
            budget=self.budget,
            unfrozen=self._unfrozen,
            steps=dict(self._steps),
            titles=dict(self._titles),
            names=dict(self._names),
            constant_bytes=dict(self._bytes),
            notes=dict(self._notes),
            interleaved=self._paired,
        )

    def run(
        self,
        progress: Callable[[Progress], None] | None = None,
        cancel: threading.Event | None = None,
    ) -> Iterator[Step]:
        """The pipeline's :meth:`~Pipeline.run`, each step measured before it is yielded."""
        self._reset()
        for step in self.pipe.run(progress, cancel):
            self.observe(step)
            yield step

    def _reset(self) -> None:
        self._steps.clear()
        self._titles.clear()
        self._names.clear()
        self._bytes.clear()
        self._notes.clear()
        self._backend_step = None
        self._last_changed = None
        self._paired = False
        self._result = None

    # --- per step ---------------------------------------------------------------------

    def observe(self, step: Step) -> None:
        """Measure a step the pipeline has just yielded (its graphs are still held)."""
        self._titles[step.index] = step.title
        self._names[step.index] = step.name
        if not self.defer_constants:
            self.count_constants(step)
        if step.error is not None or not step.changed:
            return
        self._last_changed = step.index
        inference = step.kind == "inference" and self._backend_step is None
        if not inference and not self.timing:
            return  # nothing more to read off the graphs: no picture is built for it
        graphs = self.pipe.step_graphs(step)
        if inference and graphs and backend_only_nodes(graphs.values()):
            self._backend_step = step.name
        if not self.timing:
            return
        how = (self.threads, self.budget, id(self.pipe.inputs), self.autograd)
        if "forward" not in graphs:
            known = self._timed.get(step)
            if known is not None and known[0] == how:
                if self._unfrozen is None:
                    self._time_unfrozen()  # what the column compares it with
                self._steps[step.index] = known[1]
            return
        module = self.pipe.step_module(step)
        if module is None:
            return
        if self._unfrozen is None:
            self._time_unfrozen()
        try:
            call = self._caller(graphs["forward"], module)
            timing = time_forward(
                call,
                threads=self.threads,
                budget=self.budget,
                after_call=self.pipe.restore_state,
                autograd=self.autograd,
            )
        except Exception as exc:
            self.pipe.restore_state()
            if isinstance(exc, SandboxError):  # refused before it ran: not the inputs
                self._notes[step.index] = f"not timed: {exc}"
                return
            why = _first_line(exc)
            self._notes[step.index] = f"not timed: its forward failed on the inputs ({why})"
            return
        self.timings.append(timing)
        self._steps[step.index] = timing.latency
        self._timed[step] = (how, timing.latency)

    def count_constants(self, step: Step) -> int | None:
        """Count (once) the bytes of tensor constants in a just-yielded step's graphs.

        Read each step in order while its graphs are held: a step that did not change
        the graph has the count of the step before it.

        Returns:
            The bytes (None for a failed step, or when nothing before it was counted).
        """
        if step.index in self._bytes:
            return self._bytes[step.index]
        previous = self._bytes.get(step.index - 1) if step.index else None
        if step.error is not None:
            count = None
        elif not step.changed:
            count = previous
        else:
            graphs = self.pipe.step_graphs(step)
            count = constant_bytes(graphs.values()) if graphs else previous
        self._bytes[step.index] = count
        return count

    def _caller(self, graph: torch._C.Graph, module: Any) -> Callable[[], Any]:
        """One forward of ``graph`` (a fresh function of a copy) on the sample inputs.

        A function of a copy runs exactly what the step shows (a module's method caches
        its optimised graph on first run and would not see later passes), and it runs on
        ``module``'s sandbox: a forward that writes its own state or constants writes a
        private copy, never the module that is written (``restore_state`` puts the copy
        back after each block).
        """
        return self.pipe.sandboxed_call(graph, module)

    def _time_unfrozen(self) -> None:
        module = self.pipe.module
        if not module._c._has_method("forward"):
            return
        try:
            call = self._caller(module._c._get_method("forward").graph, module)
            timing = time_forward(
                call,
                threads=self.threads,
                budget=self.budget,
                after_call=self.pipe.restore_state,
                autograd=self.autograd,
            )
        except Exception:
            self.pipe.restore_state()
            return
        self.timings.append(timing)
        self._unfrozen = timing.latency

    def _final_index(self) -> int | None:
        """The step whose latency is the final graph's: the last timed step after torch's
        clean-up, when it is also the last step that changed the graph (None otherwise)."""
        final = None
        for index in sorted(self._steps, reverse=True):
            if self._names.get(index) not in ("inline", "fold_attributes"):
                final = index
                break
        return final if final is not None and final == self._last_changed else None

    def time_verdict(self) -> bool:
        """Time the unfrozen module and the final frozen module again, in alternating
        blocks, for the verdict: what the machine's load does meanwhile, it does to both.

        Called once the run is over (the frozen module exists), before the table is
        drawn; :meth:`finish` calls it when nobody did. The pair replaces the unfrozen
        figure and the final step's, so the verdict, the table's unfrozen line and final
        row and the JSON's result quote one figure each. Both run on their sandboxes
        (private copies put back after every block), with the budget, threads and
        autograd rule of every other timing (the budget once per forward). Where the
        pair cannot be timed, the figures timed in their turn stay.

        Returns:
            True when the verdict's figures are an interleaved pair.
        """
        if self._paired or not self.timing or self._unfrozen is None:
            return self._paired
        frozen = self.pipe.frozen_module
        final = self._final_index()
        if frozen is None or final is None or not frozen._c._has_method("forward"):
            return False
        module = self.pipe.module
        try:
            before = self._caller(module._c._get_method("forward").graph, module)
            after = self._caller(frozen._c._get_method("forward").graph, frozen)
            first, second = time_pair(
                before,
                after,
                threads=self.threads,
                budget=2 * self.budget,
                after_call=self.pipe.restore_state,
                autograd=self.autograd,
            )
        except Exception:
            self.pipe.restore_state()
            return False
        self.timings.extend((first, second))
        self._unfrozen = first.latency
        self._steps[final] = second.latency
        self._paired = True
        return True

    # --- the result -------------------------------------------------------------------

    def finish(
        self,
        *,
        input_file: str | Path | None = None,
        output_file: str | Path | None = None,
        check_roundtrip: bool | None = None,
    ) -> Measurement:
        """Add the result's sizes and portability once the run has finished.

        Args:
            input_file: the model file the run read (its size is reported).
            output_file: the frozen file written from the result (its size is reported,
                and the round trip loads it instead of saving again).
            check_roundtrip: save and load in a fresh process when there are inputs
                (default: yes, whatever the time budget: it checks outputs, not speed).

        Returns:
            The complete :class:`Measurement` (also :attr:`measurement` from now on).
        """
        self.time_verdict()
        base = self.measurement
        module = self.pipe.frozen_module
        sizes = None
        port = None
        second_call: SecondCall | None = None
        if module is not None:
            methods = self.pipe.methods_for(self.pipe.plan)
            cmod = module._c
            graphs = {m: cmod._get_method(m).graph for m in methods if cmod._has_method(m)}
            tensors = constant_tensors(graphs.values())
            sizes = Sizes(
                input_file_bytes=_size(input_file),
                output_file_bytes=_size(output_file),
                constant_bytes=sum(int(t.numel()) * int(t.element_size()) for t in tensors),
                duplicate_constant_bytes=duplicate_bytes(tensors),
                kept_attribute_bytes=kept_attribute_bytes(module),
            )
            result: tuple[str | None, str] = (None, "")
            inputs = self.pipe.inputs
            if check_roundtrip is None:
                check_roundtrip = True
            if inputs is not None and "forward" in graphs:
                first, second, why = self._two_calls(module, graphs["forward"])
                second_call = _second_call(first, second, why)
                if check_roundtrip and not why:
                    result = self._roundtrip(module, inputs, first, second, output_file)
                elif check_roundtrip:
                    result = (None, f"round trip not checked: {why}")
            port = portability(
                module, graphs, roundtrip_result=result, backend_step=self._backend_step
            )
        self._result = Measurement(
            threads=base.threads,
            budget=base.budget,
            unfrozen=base.unfrozen,
            steps=base.steps,
            titles=base.titles,
            names=base.names,
            constant_bytes=base.constant_bytes,
            notes=base.notes,
            interleaved=base.interleaved,
            sizes=sizes,
            portability=port,
            second_call=second_call,
        )
        return self._result

    def _two_calls(self, module: Any, graph: torch._C.Graph) -> tuple[Any, Any, str]:
        """The frozen module's first two calls on the sample inputs, and why not.

        They run on the module's sandbox put back as the module is (an untouched freeze:
        the frozen module itself, which is what gets written, never runs), and each
        call's outputs are copied before the next call can write into them.
        """
        try:
            call = self._caller(graph, module)
            with torch.no_grad():
                first = copy.deepcopy(call())
                second = copy.deepcopy(call())
        except SandboxError as exc:
            return None, None, str(exc)
        except Exception as exc:
            return None, None, f"the frozen forward failed ({_first_line(exc)})"
        finally:
            self.pipe.restore_state()
        return first, second, ""

    def _roundtrip(
        self, module: Any, inputs: Any, first: Any, second: Any, output_file: str | Path | None
    ) -> tuple[str | None, str]:
        """The written file (or a save of ``module``), loaded and run once in a fresh
        process, against an untouched freeze's first call (``first``); ``second`` tells
        which side moved when they differ."""
        saved = output_file if output_file is not None and Path(output_file).is_file() else None
        return roundtrip(module, inputs, first, saved=saved, second=second)


def _second_call(first: Any, second: Any, why: str) -> SecondCall:
    """What two successive calls of the frozen module say about it."""
    if why:
        return SecondCall(same=None, note=f"not run twice: {why}.")
    numerics = compare_outputs(first, second)
    same = numerics.exact or (numerics.allclose and not numerics.note)
    if same:
        return SecondCall(same=True, max_abs=numerics.max_abs)
    detail = numerics.note or f"max abs difference {numerics.max_abs:.3g}"
    return SecondCall(
        same=False,
        max_abs=numerics.max_abs,
        note=(
            f"the frozen model's outputs change from one call to the next ({detail} "
            "between its first two calls): it writes its own constants or state, so what "
            "it returns depends on how often it ran."
        ),
    )


def _size(path: str | Path | None) -> int | None:
    if path is None:
        return None
    p = Path(path)
    return p.stat().st_size if p.is_file() else None
