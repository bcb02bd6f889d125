"""``check``'s ``[deployment]`` rules: latency, constant bytes, portability, round trip.

Each rule is held against one measured run (:class:`~freezeview.engine.measure.Measurement`)
and, when broken, names the step responsible: the step that slowed the forward most, the
step that added the most constant bytes, the step that brought in backend-only nodes.
``--write-expect`` writes defaults from the current model (:func:`deployment_toml`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

from ..measure import Measurement, format_ms, stability_note
from ..plumbing import plural
from .expectations import Rule

__all__ = [
    "Broken",
    "constant_bytes_limit",
    "deployment_toml",
    "hold_deployment_rule",
    "latency_inside_noise",
    "latency_limit",
]


class Broken(NamedTuple):
    """A broken deployment rule: the report's line, what was expected, what was found."""

    message: str
    expected: str
    actual: str


def _step_name(m: Measurement, index: int) -> str:
    return f"step {index} ({m.names.get(index, '?')}: {m.titles.get(index, '?')})"


def _latency(rule: Rule, m: Measurement) -> Broken | None:
    overall = m.overall
    baseline = m.baseline
    if overall is None or baseline is None or m.frozen is None:
        return Broken(
            "latency: the forward could not be timed on the sample inputs",
            f"<= {rule.value:g}x",
            "not timed",
        )
    if latency_inside_noise(rule, m) is not None:
        return None
    slower = [(i, c) for i, c in m.deciding_steps() if c.ratio > 1.0]
    blame = f"; {_step_name(m, slower[0][0])} made it {slower[0][1].text()}" if slower else ""
    return Broken(
        f"latency: expected the frozen forward at most {rule.value:g}x the unfrozen one, it "
        f"is {overall.ratio:.2f}x ±{overall.noise * 100:.0f}% ({_figures(m)}){blame}"
        f"{_unstable(m)}",
        f"<= {rule.value:g}x",
        f"{overall.ratio:.2f}x",
    )


def _figures(m: Measurement) -> str:
    """``19.0 ms vs 18.3 ms, median, 1 thread, inference_mode`` (frozen first), as the
    verdict of ``freeze`` quotes them."""
    assert m.frozen is not None and m.baseline is not None
    modes = "/".join(m.modes) or m.frozen.mode
    return (
        f"{format_ms(m.frozen.median)} vs {format_ms(m.baseline.median)}, median, "
        f"{plural(m.threads, 'thread')}, {modes}"
    )


def _unstable(m: Measurement) -> str:
    """The verdict's own sentence when a median rests on too few timed blocks."""
    return stability_note(m)


def latency_inside_noise(rule: Rule, m: Measurement) -> str | None:
    """Whether a ``max_latency_ratio`` holds, and how: None when it is broken, ``""``
    when the ratio is within the limit, else a note that the ratio is above the limit by
    less than the measurement's noise (held: noise alone never fails an unchanged model).

    The noise is the verdict's (:attr:`~freezeview.engine.measure.Change.noise`: the
    larger relative spread of the two medians, at least 5 %); the ratio is held when
    ``ratio / (1 + noise)`` is within the limit: noise can have made the ratio that much
    larger, and no more (a spread as wide as the median itself does not hold any ratio).
    """
    overall = m.overall
    if overall is None:
        return None
    if overall.ratio <= rule.value:
        return ""
    if overall.ratio / (1.0 + overall.noise) > rule.value:
        return None
    return (
        f"latency: {overall.ratio:.2f}x is above the limit {rule.value:g}x by less than the "
        f"noise (±{overall.noise * 100:.0f}%; {_figures(m)}): held, inside the noise"
        f"{_unstable(m)}"
    )


def _constants(rule: Rule, m: Measurement) -> Broken | None:
    if m.sizes is None:
        return Broken("constant bytes: the run did not finish", f"<= {rule.value}", "unknown")
    total = m.sizes.constant_bytes
    if total <= rule.value:
        return None
    # The step responsible: the last one that took the bytes from within the limit to
    # above it (the fold picture may exceed it on the way, and clean-up bring it back),
    # else the one that added the most.
    growth = []
    crossing = None
    previous = 0
    for index in sorted(m.constant_bytes):
        now = m.constant_bytes[index]
        if now is None:
            continue
        growth.append((now - previous, index))
        if previous <= rule.value < now:
            crossing = (now - previous, index)
        previous = now
    blame = ""
    added, index = crossing or (max(growth) if growth else (0, -1))
    if added > 0:
        blame = f"; {_step_name(m, index)} added {added:,} bytes"
    return Broken(
        f"constant bytes: expected at most {rule.value:,} bytes of tensor constants in the "
        f"frozen graphs, there are {total:,}{blame}",
        f"<= {rule.value} bytes",
        f"{total} bytes",
    )


def _portable(rule: Rule, m: Measurement) -> Broken | None:
    port = m.portability
    if port is None:
        return Broken("portable: the run did not finish", "portable", "unknown")
    elsewhere = [d for d in port.devices if d != rule.target]
    if not port.backend_only_nodes and not elsewhere:
        return None
    problems = []
    if port.backend_only_nodes:
        kinds = ", ".join(f"{k} x{n}" for k, n in sorted(port.backend_only_nodes.items()))
        by = f" from step {port.step}" if port.step else ""
        problems.append(f"backend-only nodes{by}: {kinds}")
    if elsewhere:
        problems.append(
            f"constants on {', '.join(elsewhere)} (frozen where the weights were; "
            "step fold_attributes bakes them in)"
        )
    return Broken(
        f"portable: expected no backend-only nodes and constants on {rule.target}, the "
        f"result has {'; '.join(problems)}",
        f"portable on {rule.target}",
        "; ".join(problems),
    )


def _roundtrip(rule: Rule, m: Measurement) -> Broken | None:
    port = m.portability
    outcome = port.roundtrip if port is not None else None
    if outcome == "same":
        return None
    note = port.note if port is not None and port.note else "not checked"
    note = note.removeprefix("not saveable: ").rstrip(".")
    by = f"; step {port.step} made it so" if port is not None and port.step else ""
    return Broken(
        f"roundtrip: expected torch.jit.save and torch.jit.load in a fresh process to give the "
        f"same outputs, it is {outcome or 'not checked'}: {note}{by}",
        "same",
        outcome or "not checked",
    )


_HOLDERS = {
    "max-latency-ratio": _latency,
    "max-constant-bytes": _constants,
    "portable": _portable,
    "roundtrip": _roundtrip,
}


def hold_deployment_rule(rule: Rule, measurement: Measurement | None) -> Broken | None:
    """Hold one ``[deployment]`` rule; None when it holds, else what broke and which step.

    A latency ratio above its limit by less than the measurement's noise holds
    (:func:`latency_inside_noise`): a difference the measurement cannot tell from noise
    never fails an unchanged model.
    """
    if measurement is None:
        return Broken(f"{rule.title}: nothing was measured", rule.title, "not measured")
    return _HOLDERS[rule.kind](rule, measurement)


def constant_bytes_limit(today: int) -> int:
    """``max_constant_bytes`` to write for a model with ``today`` bytes of tensor
    constants: a tenth of room, at least 1 kB, rounded up to a whole kB (1,024 bytes)."""
    room = max(today // 10, 1024)
    return -(-(today + room) // 1024) * 1024


def latency_limit(ratio: float, noise: float) -> float:
    """``max_latency_ratio`` to write for a model whose frozen forward takes ``ratio``
    times the unfrozen one today, with ``noise`` its relative spread.

    A quarter of room above today's ratio, or two noise bands when the machine is that
    noisy (``max(ratio x 1.25, ratio x (1 + 2 x noise))``), rounded up to two decimals:
    never below today's own figure, so an unchanged model passes on a busy machine.
    """
    limit = max(ratio * 1.25, ratio * (1.0 + 2.0 * noise))
    return math.ceil(limit * 100 - 1e-9) / 100


def deployment_toml(
    measurement: Measurement, *, threads: int, budget: float, runs_model: bool = True
) -> list[str]:
    """``[deployment]`` lines from the current model: sensible defaults to commit.

    The latency limit leaves room above today's ratio for the noise
    (:func:`latency_limit`), with today's figures in a comment; the constant bytes are
    today's with a tenth of room (:func:`constant_bytes_limit`: a limit equal to today's
    breaks on any small change of the model); ``portable`` and ``roundtrip`` are
    written when they hold today. With ``runs_model`` False (no ``[numerics]`` inputs
    to run the model on) the latency and round-trip rules are left out.
    """
    lines = ["", "[deployment]"]
    overall = measurement.overall
    if runs_model and overall is not None and measurement.frozen is not None:
        limit = latency_limit(overall.ratio, overall.noise)
        lines.append(
            f"# today {overall.ratio:.2f}x ±{overall.noise * 100:.0f}% ({_figures(measurement)});"
        )
        lines.append("# the limit leaves a quarter of room, or two noise bands when that is more,")
        lines.append("# and check holds a ratio above it by less than the noise.")
        unstable = _unstable(measurement).removeprefix("; ")
        if unstable:
            lines.append(f"# {unstable} (time_budget below)")
        lines.append(f"max_latency_ratio = {limit!r}  # today {overall.ratio:.2f}x")
    if measurement.sizes is not None:
        today = measurement.sizes.constant_bytes
        lines.append(f"# today {today:,} bytes; the limit leaves a tenth of room (at least 1 kB),")
        lines.append("# so a small change passes: lower it to hold today's figure exactly.")
        lines.append(f"max_constant_bytes = {constant_bytes_limit(today)}")
    port = measurement.portability
    if port is not None and port.portable:
        lines.append("portable = true")
        lines.append('device = "cpu"')
    if runs_model and port is not None and port.roundtrip == "same":
        lines.append("roundtrip = true")
    lines.append(f"threads = {threads}")
    lines.append(f"time_budget = {budget!r}")
    return lines
