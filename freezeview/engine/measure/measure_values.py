"""What the measure stage found, as torch-free values the app's screen process can hold.

A :class:`Latency` is one forward timed many times; a :class:`Change` says how one latency
compares with another and whether the difference is inside the noise; :class:`Sizes`
and :class:`Portability` say what the frozen result weighs and what ties it to one place;
:class:`Measurement` is all of it for one run, with the verdict line freezeview prints.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "NOISE_FLOOR",
    "Change",
    "Latency",
    "Measurement",
    "Portability",
    "SecondCall",
    "Sizes",
    "compare_latency",
    "format_ms",
    "latency_cell",
    "stability_note",
    "verdict_text",
]

#: A change smaller than this fraction is called the same even on a quiet machine: the
#: same graph timed twice moves by a few percent (caches, frequency, other processes).
NOISE_FLOOR = 0.05
#: Fewer timed blocks than this and a median is not stable (the timing loop's minimum).
MIN_BLOCKS = 5
#: From this many timed blocks on a median is stable whatever their spread; between
#: :data:`MIN_BLOCKS` and this, only when the spread is within :data:`NOISE_FLOOR`.
STEADY_BLOCKS = 10


@dataclass(frozen=True, slots=True)
class Latency:
    """One forward timed many times, in milliseconds per call.

    Attributes:
        median: the median of the per-call times of the timed blocks.
        min: the fastest block's time per call.
        max: the slowest block's time per call.
        spread: the median absolute deviation of the blocks' times per call (the noise;
            robust to blocks another process interrupted, unlike the IQR); with fewer
            than ten blocks at least half the range of all blocks but the slowest.
        runs: forward calls timed (warm-up and block sizing not counted).
        threads: torch's intra-op threads while timing.
        warmup: forward calls made before timing.
        blocks: timed blocks the median is taken over (0: not known).
        mode: what the calls ran under: ``inference_mode`` (the default),
            ``no_grad`` (where the forward fails under inference mode) or ``autograd``.
    """

    median: float
    min: float
    max: float
    spread: float
    runs: int
    threads: int
    warmup: int = 0
    blocks: int = 0
    mode: str = "inference_mode"

    @property
    def noise(self) -> float:
        """The spread relative to the median."""
        return self.spread / self.median if self.median > 0 else 0.0

    @property
    def stable(self) -> bool:
        """Ten timed blocks or more, or five within the noise floor: fewer give a median,
        not a stable one (a few widely spread blocks move as much the next time)."""
        if self.blocks == 0 or self.blocks >= STEADY_BLOCKS:
            return True
        return self.blocks >= MIN_BLOCKS and self.noise <= NOISE_FLOOR

    def to_json(self) -> dict[str, Any]:
        """``{"median", "min", "max", "runs", "timed_under"}`` (milliseconds), as freeze
        --json writes it: the figures as measured, unrounded, so that the sentences that
        quote them (the verdict) print what a reader of the JSON would print."""
        return {
            "median": self.median,
            "min": self.min,
            "max": self.max,
            "runs": self.runs,
            "timed_under": self.mode,
        }


@dataclass(frozen=True, slots=True)
class Change:
    """How latency ``after`` compares with ``before``.

    Attributes:
        ratio: ``after.median / before.median`` (below 1: faster).
        noise: the relative difference that is still noise for this pair.
        same: True when the difference is inside the noise.
    """

    ratio: float
    noise: float
    same: bool

    @property
    def percent(self) -> float:
        """The change in percent (negative: faster)."""
        return (self.ratio - 1.0) * 100.0

    def text(self) -> str:
        """``-38%``, ``+290%`` or ``same (±4%)``."""
        if self.same:
            return f"same (±{self.noise * 100:.0f}%)"
        return f"{self.percent:+.0f}%"


def compare_latency(before: Latency, after: Latency) -> Change:
    """Compare two latencies; a difference within either's spread (or 5%) is noise.

    Args:
        before: the reference (the unfrozen module, or the previous measured step).
        after: the one compared with it.

    Returns:
        A :class:`Change`.
    """
    ratio = after.median / before.median if before.median > 0 else 1.0
    noise = max(before.noise, after.noise, NOISE_FLOOR)
    return Change(ratio, noise, abs(ratio - 1.0) <= noise)


def format_ms(ms: float) -> str:
    """``0.0213 ms`` / ``1.23 ms`` / ``152 ms``: three significant digits."""
    if ms >= 100:
        return f"{ms:.0f} ms"
    if ms >= 10:
        return f"{ms:.1f} ms"
    if ms >= 1:
        return f"{ms:.2f} ms"
    return f"{ms:.3g} ms"


@dataclass(frozen=True, slots=True)
class Sizes:
    """What the frozen result weighs.

    Attributes:
        input_file_bytes: the input ``.pt`` file's size (None: not read from a file).
        output_file_bytes: the frozen file's size (None: not written).
        constant_bytes: bytes of tensor constants in the final graphs.
        duplicate_constant_bytes: bytes of constants that hold the same values as
            another constant (each storage counted once).
        kept_attribute_bytes: bytes of tensors still held as attributes of the frozen
            module (each storage counted once).
    """

    input_file_bytes: int | None
    output_file_bytes: int | None
    constant_bytes: int
    duplicate_constant_bytes: int
    kept_attribute_bytes: int

    def to_json(self) -> dict[str, Any]:
        """freeze --json's ``sizes`` object."""
        return {
            "input_file_bytes": self.input_file_bytes,
            "output_file_bytes": self.output_file_bytes,
            "constant_bytes": self.constant_bytes,
            "duplicate_constant_bytes": self.duplicate_constant_bytes,
            "kept_attribute_bytes": self.kept_attribute_bytes,
        }


@dataclass(frozen=True, slots=True)
class Portability:
    """What ties a frozen result to one machine, and whether it saves and loads back.

    Attributes:
        devices: devices of the tensor constants in the graphs (``cpu``, ``cuda:0``).
        dtypes: their dtypes (``float32``).
        backend_only_nodes: node kind -> count, for nodes that exist only with one
            backend (MKLDNN tensors and ops, cuDNN-only fusions, prepacked ops).
        saveable: torch.jit.save writes it and torch.jit.load can read it back.
        roundtrip: ``same`` / ``differs`` (outputs after a save and a load in a fresh
            process), ``unsaveable``, or None when not checked (no sample inputs).
        note: one sentence on why it cannot be saved or why the round trip differs.
        step: the step that made it backend-bound or unsaveable (None: none did).
    """

    devices: tuple[str, ...]
    dtypes: tuple[str, ...]
    backend_only_nodes: Mapping[str, int]
    saveable: bool
    roundtrip: str | None
    note: str = ""
    step: str | None = None

    @property
    def portable(self) -> bool:
        """No backend-only nodes and every constant on the CPU."""
        return not self.backend_only_nodes and all(d == "cpu" for d in self.devices)

    def to_json(self) -> dict[str, Any]:
        """freeze --json's ``portability`` object."""
        return {
            "devices": list(self.devices),
            "dtypes": list(self.dtypes),
            "backend_only_nodes": dict(sorted(self.backend_only_nodes.items())),
            "saveable": self.saveable,
            "roundtrip": self.roundtrip,
            "note": self.note,
            "step": self.step,
        }


@dataclass(frozen=True, slots=True)
class SecondCall:
    """The frozen module run twice on the sample inputs (a private copy, never the file).

    A frozen graph that writes its own constants (an attribute held in a list, a dict or
    a tuple, or written through a forked call, that torch folded) gives other outputs
    on each call; so does a kept attribute the forward updates.

    Attributes:
        same: the second call's outputs equal the first's (within torch's tolerances);
            None when the check could not run (``note`` says why).
        max_abs: the largest absolute difference between the two calls' outputs.
        note: one sentence when they differ, or why the check could not run.
    """

    same: bool | None
    max_abs: float | None = None
    note: str = ""

    def to_json(self) -> dict[str, Any]:
        """freeze --json's ``second_call`` object."""
        return {"same": self.same, "max_abs_difference": self.max_abs, "note": self.note}


@dataclass(frozen=True)
class Measurement:
    """Everything measured on one run: latency and constant bytes per step, the verdict.

    The unfrozen module's forward is timed first, then every step that changed the
    graph, in its turn; once the run is over, the unfrozen module and the final frozen
    one are timed again together, in alternating blocks (``interleaved``), and that pair
    replaces the unfrozen figure and the final step's. The verdict compares those two,
    the very figures the table and the JSON show, so each step's change against the
    step before it multiplies up to the whole.

    Attributes:
        threads: torch's intra-op threads while timing.
        budget: the time budget per timed forward, in seconds.
        unfrozen: the unfrozen module's latency (None: not timed).
        steps: step index -> latency of that step's forward (changed steps only).
        titles: step index -> the step's title (for verdicts that name steps).
        names: step index -> the step's name.
        constant_bytes: step index -> bytes of tensor constants in its graphs.
        notes: step index -> why it was not timed.
        interleaved: the unfrozen and the final figures were timed together, in
            alternating blocks (False: each in its turn, minutes apart on a large model).
        sizes: the result's sizes (None until the run finished).
        portability: the result's portability (None until the run finished).
        second_call: the frozen module run twice on the sample inputs (None: no
            inputs, or the run has not finished).
    """

    threads: int
    budget: float
    unfrozen: Latency | None = None
    steps: Mapping[int, Latency] = field(default_factory=dict)
    titles: Mapping[int, str] = field(default_factory=dict)
    names: Mapping[int, str] = field(default_factory=dict)
    constant_bytes: Mapping[int, int | None] = field(default_factory=dict)
    notes: Mapping[int, str] = field(default_factory=dict)
    interleaved: bool = False
    sizes: Sizes | None = None
    portability: Portability | None = None
    second_call: SecondCall | None = None

    @property
    def baseline(self) -> Latency | None:
        """The unfrozen latency the verdict compares with (the one the table shows)."""
        return self.unfrozen

    @property
    def frozen(self) -> Latency | None:
        """The final graph's latency: the last timed step after torch's clean-up."""
        return self.last_step

    @property
    def last_step(self) -> Latency | None:
        """The last timed step after torch's clean-up (the final graph, timed in its turn)."""
        for index in sorted(self.steps, reverse=True):
            if self.names.get(index) not in ("inline", "fold_attributes"):
                return self.steps[index]
        return None

    @property
    def overall(self) -> Change | None:
        """The frozen module against the unfrozen one."""
        if self.baseline is None or self.frozen is None:
            return None
        return compare_latency(self.baseline, self.frozen)

    def step_change(self, index: int) -> Change | None:
        """Step ``index`` against the unfrozen module (None if either was not timed)."""
        latency = self.steps.get(index)
        if latency is None or self.unfrozen is None:
            return None
        return compare_latency(self.unfrozen, latency)

    def contributions(self) -> list[tuple[int, Change]]:
        """Each timed step against the timed step before it (the unfrozen module first).

        The steps whose change is outside the noise are the ones that made the difference.
        """
        out: list[tuple[int, Change]] = []
        previous = self.unfrozen
        for index in sorted(self.steps):
            latency = self.steps[index]
            if previous is not None:
                out.append((index, compare_latency(previous, latency)))
            previous = latency
        return out

    def deciding_steps(self) -> list[tuple[int, Change]]:
        """The steps whose own change is outside the noise, largest first (either way)."""
        moved = [(i, c) for i, c in self.contributions() if not c.same]
        return sorted(moved, key=lambda item: -abs(item[1].ratio - 1.0))

    def causes(self) -> list[tuple[int, Change]]:
        """The steps the verdict names: outside the noise and moving the way the whole
        moved (a slower step never made a speed-up), largest first; none when the whole
        is inside the noise."""
        overall = self.overall
        if overall is None or overall.same:
            return []
        faster = overall.ratio < 1
        return [(i, c) for i, c in self.deciding_steps() if (c.ratio < 1) == faster]

    @property
    def modes(self) -> tuple[str, ...]:
        """What the forwards were timed under (``inference_mode`` first when present)."""
        found = {lat.mode for lat in (self.unfrozen, *self.steps.values()) if lat is not None}
        order = ("inference_mode", "no_grad", "autograd")
        return tuple(m for m in order if m in found) + tuple(sorted(found - set(order)))

    def timed_under(self) -> str:
        """``timed under inference_mode``, or which steps fell back to ``no_grad``."""
        modes = self.modes
        if not modes:
            return ""
        if len(modes) == 1:
            return _MODE_TEXT.get(modes[0], modes[0])
        fell = [str(i) for i, lat in sorted(self.steps.items()) if lat.mode == "no_grad"]
        if self.unfrozen is not None and self.unfrozen.mode == "no_grad":
            fell.insert(0, "unfrozen")
        where = ", ".join(fell)
        return (
            f"{_MODE_TEXT.get(modes[0], modes[0])} "
            f"(no_grad for {where}: its forward fails under inference_mode)"
        )

    def unstable(self) -> list[Latency]:
        """The verdict's figures whose median rests on too few timed blocks."""
        return [lat for lat in (self.baseline, self.frozen) if lat is not None and not lat.stable]

    def latency_json(self) -> dict[str, Any] | None:
        """freeze --json's result ``latency_ms`` object (None: nothing was timed)."""
        baseline = self.baseline
        if baseline is None:
            return None
        frozen = self.frozen
        overall = self.overall
        return {
            "unfrozen": baseline.to_json(),
            "frozen": frozen.to_json() if frozen is not None else None,
            "ratio": float(f"{overall.ratio:.6g}") if overall is not None else None,
            "threads": self.threads,
            "timed_under": baseline.mode,
            "inside_noise": overall.same if overall is not None else None,
            "stable": not self.unstable(),
            "interleaved": self.interleaved,
            "made_by": [self.names[i] for i, _ in self.causes()],
            "verdict": verdict_text(self),
        }


_MODE_TEXT = {
    "inference_mode": "timed under inference_mode",
    "no_grad": "timed under no_grad",
    "autograd": "timed with autograd on",
}


def _suggested_budget(latencies: list[Latency]) -> str:
    """A ``--time-budget`` that times ten calls of the slowest forward, in whole seconds
    (one at least): ``2`` for a 133 ms forward."""
    slowest = max(lat.median for lat in latencies) / 1000
    return str(max(1, math.ceil(slowest * 10)))


def verdict_text(measurement: Measurement) -> str:
    """The final line: how much faster or slower the frozen module is, and which steps did it.

    The figures are the table's (the unfrozen forward and the final step's). Only steps
    outside the noise that moved the way the whole moved are named; when none did
    though the whole is outside the noise, the sentence says the small changes add up.
    A measurement of one step (explain's final figure: ``torch.jit.freeze`` at once)
    names it whatever the noise: made by it outside the noise, frozen by it inside. A
    median that is not stable (fewer than ten timed blocks, or five to nine spread
    beyond the noise floor) is called so, with a larger ``--time-budget`` to ask for
    (:func:`stability_note`).

    Example: ``frozen forward 1.7x faster than unfrozen (0.0153 ms vs 0.0260 ms, median,
    1 thread, inference_mode); made by: clean-up -41%``.
    """
    overall = measurement.overall
    unfrozen, frozen = measurement.baseline, measurement.frozen
    if overall is None or unfrozen is None or frozen is None:
        why = next(iter(measurement.notes.values()), "") if unfrozen is not None else ""
        if why:  # inputs were given: the step's own note says why it was not timed
            return f"latency not measured: the frozen forward was {why}"
        return "latency not measured: give sample inputs (--inputs or --input-shape)"
    threads = f"{measurement.threads} thread{'s' if measurement.threads != 1 else ''}"
    mode = "/".join(measurement.modes) or frozen.mode
    figures = (
        f"({format_ms(frozen.median)} vs {format_ms(unfrozen.median)}, median, {threads}, {mode})"
    )
    if overall.same:
        head = f"frozen forward as fast as unfrozen, inside the noise ±{overall.noise * 100:.0f}%"
    elif overall.ratio < 1:
        head = f"frozen forward {1 / overall.ratio:.2g}x faster than unfrozen"
    else:
        head = f"frozen forward {overall.ratio:.2g}x slower than unfrozen"
    moved = measurement.deciding_steps()
    causes = measurement.causes()

    def named(items: list[tuple[int, Change]]) -> str:
        return ", ".join(f"{measurement.titles.get(i, str(i))} {c.text()}" for i, c in items)

    if overall.same and len(measurement.steps) == 1:
        # One step is the whole (explain's final figure): it is named, as a cause
        # outside the noise, as what was timed inside it.
        only = next(iter(measurement.steps))
        title = measurement.titles.get(only) or measurement.names.get(only) or str(only)
        tail = f"; frozen by {title}"
    elif overall.same:
        both = {c.ratio < 1 for _, c in moved} == {True, False}
        tail = f"; {named(moved)} cancel out" if both else ""
    elif causes:
        tail = f"; made by: {named(causes)}"
    elif moved:
        way = "faster" if overall.ratio < 1 else "slower"
        tail = (
            f"; no step alone made it {way} outside the noise (against it: {named(moved)}): "
            "the steps' small changes add up"
        )
    else:
        tail = "; every step is within the noise, the whole is not: their small changes add up"
    return f"{head} {figures}{tail}{stability_note(measurement)}"


def stability_note(measurement: Measurement) -> str:
    """``; a median over 5 runs is not stable: give --time-budget 1 or more`` when a
    figure of the verdict rests on too few timed blocks (:attr:`Latency.stable`), else
    ``""``: the clause the verdict ends with, and ``check`` quotes."""
    unstable = measurement.unstable()
    if not unstable:
        return ""
    few = min(unstable, key=lambda lat: lat.blocks)
    runs = f"{few.runs} runs" + (f" in {few.blocks} blocks" if few.runs != few.blocks else "")
    return (
        f"; a median over {runs} is not stable: "
        f"give --time-budget {_suggested_budget(unstable)} or more"
    )


def latency_cell(measurement: Measurement | None, index: int) -> str:
    """A steps table's latency cell: ``0.0153 ms -41%``, ``same``, or ``-``."""
    if measurement is None:
        return "-"
    latency = measurement.steps.get(index)
    if latency is None:
        return "-"
    change = measurement.step_change(index)
    if change is None:
        return format_ms(latency.median)
    return f"{format_ms(latency.median)} {change.text()}"
