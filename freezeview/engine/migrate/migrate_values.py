"""What ``migrate`` found, as torch-free values (the app's screen may read them).

A :class:`Migration` holds the three answers of ``freezeview migrate``: does torch's
converter turn the TorchScript model into an ExportedProgram (:class:`Conversion`), does
the program behave the same on the sample inputs over successive calls (outputs, every
state write freezeview knows of: :class:`StateWrite`), and the verdict that follows.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Any

from ..measure import Change, Latency, compare_latency, format_ms

__all__ = [
    "BEHAVES_THE_SAME",
    "DIFFERS",
    "DOES_NOT_CONVERT",
    "LINE_KINDS",
    "VERDICTS",
    "Aoti",
    "Conversion",
    "FailedNode",
    "Migration",
    "ReportLine",
    "Speed",
    "SpeedPair",
    "StateWrite",
]

BEHAVES_THE_SAME = "converts and behaves the same"
DIFFERS = "converts with differences"
DOES_NOT_CONVERT = "does not convert"
#: Every verdict ``migrate`` gives, best first.
VERDICTS = (BEHAVES_THE_SAME, DIFFERS, DOES_NOT_CONVERT)
#: What a line of :meth:`Migration.report_lines` is about (the app styles lines by it).
LINE_KINDS = (
    "verdict",  # the verdict and the model
    "unavailable",  # this torch has no converter: the one sentence said
    "converter",  # what torch's converter did: converted, or where and why it failed
    "outputs",  # the outputs were the same on every call
    "outputs-differ",  # they differed on some call
    "write-kept",  # a state write the program carries and declares
    "write-undeclared",  # one it carries without declaring it in its graph signature
    "write-lost",  # one it loses
    "buffers",  # parameters the program holds as buffers
    "fixed",  # input dimensions the program fixed
    "second-shape",  # what the second input shape showed
    "speed",  # is it as fast?
    "aoti",  # what --aoti did
    "note",  # anything else worth saying
    "written",  # the .pt2 written
    "not-written",  # why it was not
)
# Lines said on their own, not under the verdict.
_TOP_KINDS = frozenset({"verdict", "unavailable", "written", "not-written"})


@dataclass(frozen=True)
class FailedNode:
    """The TorchScript node torch's converter was converting when it failed.

    Attributes:
        kind: the node's kind (``aten::add_``, ``prim::If``).
        scope: the module path it was inlined from (``layers.0.self_attn``), if recorded.
        source: ``file:line`` of the node in the model's saved source, if recorded.
        source_text: that line's text, read from the model's own debug information.
        node: the node's IR line.
    """

    kind: str
    scope: str = ""
    source: str = ""
    source_text: str = ""
    node: str = ""

    def describe(self) -> str:
        """``aten::add_ in layers.0 (model.py:12: x.add_(1))``."""
        text = self.kind + (f" in {self.scope}" if self.scope else "")
        if self.source:
            line = f"{self.source}: {self.source_text}" if self.source_text else self.source
            text += f" ({line})"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``migrate --json``: the fields by name."""
        return asdict(self)


@dataclass(frozen=True)
class Conversion:
    """What torch's converter did.

    Attributes:
        converted: True when ``TS2EPConverter(...).convert()`` returned a program.
        available: False when the installed torch has no converter.
        seconds: how long the conversion took in the child process.
        method: the method converted or failed on (torch converts ``forward``).
        stage: where it failed: ``preparing the graph`` (torch freezes the module and
            propagates the input shapes first), ``converting a node``, ``retracing``
            (torch.export of the converted graph), or ``the child process``.
        cause: torch's own last meaningful line, or what happened to the child process.
        failed_node: the node being converted when it failed, where it can be told.
        hint: what is known to cause this failure, when freezeview knows.
        unhandled_kinds: node kinds of the inlined forward (blocks and forked subgraphs
            included) for which the converter has no handler and no operator schema to
            fall back on, found before converting.
    """

    converted: bool
    available: bool = True
    seconds: float = 0.0
    method: str = "forward"
    stage: str = ""
    cause: str = ""
    failed_node: FailedNode | None = None
    hint: str = ""
    unhandled_kinds: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``migrate --json``."""
        return {
            "converted": self.converted,
            "available": self.available,
            "seconds": round(self.seconds, 3),
            "method": self.method,
            "stage": self.stage,
            "cause": self.cause,
            "failed_node": self.failed_node.to_json() if self.failed_node else None,
            "hint": self.hint,
            "unhandled_kinds": list(self.unhandled_kinds),
        }


@dataclass(frozen=True)
class StateWrite:
    """One state write of the TorchScript forward, and what the program does with it.

    Attributes:
        path: the attribute written (``steps``, ``head.history``).
        how: the reason code that found the write (``set-attr`` or ``in-place-write``).
        node: the writing node's IR line.
        source: ``file:line`` of the write, if recorded.
        source_text: that line's text.
        carried: True when, run on the same inputs, the program's copy of the attribute
            follows the TorchScript module's after every call; False when the write is
            lost (the program lacks the attribute or leaves it behind).
        declared: True when the program's graph signature declares the write (a mutated
            buffer or input). torch's converter can leave an in-place write on a buffer
            in the graph without declaring it: the program then writes it when run,
            but what reads the signature sees no write.
    """

    path: str
    how: str
    node: str = ""
    source: str = ""
    source_text: str = ""
    carried: bool = False
    declared: bool = False

    def describe(self) -> str:
        """``steps (in-place-write, model.py:40: self.steps.add_(1))``."""
        where = self.source or "no source line recorded"
        if self.source_text:
            where += f": {self.source_text}"
        return f"{self.path} ({self.how}, {where})"

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``migrate --json``: the fields by name."""
        return asdict(self)


@dataclass(frozen=True)
class SpeedPair:
    """One forward timed against the frozen TorchScript, in alternating blocks.

    Attributes:
        what: the forward timed: ``ExportedProgram`` or ``AOTInductor``.
        frozen: the frozen TorchScript forward (``torch.jit.freeze`` of the model).
        other: the forward it is compared with.
    """

    what: str
    frozen: Latency
    other: Latency

    @property
    def change(self) -> Change:
        """``other`` against ``frozen``: its ratio, the noise, and whether it is the same."""
        return compare_latency(self.frozen, self.other)

    @property
    def stable(self) -> bool:
        """Both medians rest on enough timed blocks (:attr:`Latency.stable`)."""
        return self.frozen.stable and self.other.stable

    def text(self) -> str:
        """``ExportedProgram forward 1.3x slower than the frozen TorchScript (0.05 ms vs
        0.04 ms, median, 1 thread, inference_mode)``, with a clause when a median is not
        stable."""
        change = self.change
        if change.same:
            head = (
                f"{self.what} forward as fast as the frozen TorchScript, inside the noise "
                f"±{change.noise * 100:.0f}%"
            )
        elif change.ratio < 1:
            head = f"{self.what} forward {1 / change.ratio:.2g}x faster than the frozen TorchScript"
        else:
            head = f"{self.what} forward {change.ratio:.2g}x slower than the frozen TorchScript"
        threads = f"{self.other.threads} thread{'s' if self.other.threads != 1 else ''}"
        modes = "/".join(dict.fromkeys((self.frozen.mode, self.other.mode)))
        figures = (
            f"({format_ms(self.other.median)} vs {format_ms(self.frozen.median)}, median, "
            f"{threads}, {modes})"
        )
        unstable = [lat for lat in (self.frozen, self.other) if not lat.stable]
        note = ""
        if unstable:
            few = min(unstable, key=lambda lat: lat.blocks)
            # The budget that times ten calls of the slower forward, as freeze suggests.
            slowest = max(lat.median for lat in (self.frozen, self.other)) / 1000
            budget = max(1, math.ceil(slowest * 10))
            note = (
                f"; a median over {few.runs} runs in {few.blocks} blocks is not stable: "
                f"give --time-budget {budget} or more"
            )
        return f"{head} {figures}{note}"

    def to_json(self) -> dict[str, Any]:
        """``{"frozen_torchscript", "candidate", "ratio", "noise", "inside_noise",
        "stable", "verdict"}``; the latencies as ``freeze --json`` writes them."""
        change = self.change
        return {
            "frozen_torchscript": self.frozen.to_json(),
            "candidate": self.other.to_json(),
            "ratio": change.ratio,
            "noise": change.noise,
            "inside_noise": change.same,
            "stable": self.stable,
            "verdict": self.text(),
        }


@dataclass(frozen=True)
class Speed:
    """Is it as fast? The program's forward (and with ``--aoti`` AOTInductor's) against
    the frozen TorchScript, timed as ``freeze`` times "did it help".

    Attributes:
        threads: torch's intra-op threads while timing.
        budget: ``--time-budget``: seconds of timing per forward, after warm-up.
        program: the ExportedProgram's forward against the frozen TorchScript, or None.
        aoti: AOTInductor's compiled forward against the frozen TorchScript (``--aoti``),
            or None.
        note: why the program's forward was not timed (empty when it was).
    """

    threads: int
    budget: float
    program: SpeedPair | None = None
    aoti: SpeedPair | None = None
    note: str = ""

    def lines(self) -> list[str]:
        """What ``migrate`` prints: one line per timed pair, or why nothing was timed."""
        found = [pair.text() for pair in (self.program, self.aoti) if pair is not None]
        if self.note:
            found.insert(0, self.note)
        return found

    def to_json(self) -> dict[str, Any]:
        """The ``latency`` object of ``migrate --json``."""
        return {
            "threads": self.threads,
            "budget": self.budget,
            "exported_program": self.program.to_json() if self.program else None,
            "aoti": self.aoti.to_json() if self.aoti else None,
            "note": self.note,
        }


@dataclass(frozen=True)
class Aoti:
    """What ``--aoti`` did: the ExportedProgram compiled with AOTInductor.

    Attributes:
        compiled: True when ``torch._inductor.aoti_compile_and_package`` made a package.
        compile_seconds: how long the compile took (in its child process), if it ran.
        outputs_same: the compiled forward's outputs equal the TorchScript module's first
            call's (torch's default tolerances); None when nothing ran.
        output_note: what differs, when they differ.
        note: why it was not compiled, or what stopped it (one sentence; empty when it
            compiled).
    """

    compiled: bool = False
    compile_seconds: float | None = None
    outputs_same: bool | None = None
    output_note: str = ""
    note: str = ""

    def lines(self) -> list[str]:
        """What ``migrate`` prints for ``--aoti``."""
        if not self.compiled:
            return [self.note]
        text = f"AOTInductor: compiled in {self.compile_seconds or 0.0:.1f} s"
        if self.outputs_same is True:
            text += "; outputs the same as the TorchScript module's"
        elif self.outputs_same is False:
            text += "; outputs DIFFER from the TorchScript module's" + (
                f" ({self.output_note})" if self.output_note else ""
            )
        return [text] + ([self.note] if self.note else [])

    def to_json(self) -> dict[str, Any]:
        """The ``aoti`` object of ``migrate --json``."""
        return asdict(self)


@dataclass(frozen=True)
class ReportLine:
    """One line of what ``freezeview migrate`` says (and the app's ``m`` shows).

    Attributes:
        kind: what it is about, one of :data:`LINE_KINDS`.
        text: the line, plain text.
    """

    kind: str
    text: str

    @property
    def indented(self) -> bool:
        """A finding under the verdict (the CLI indents it two spaces); False for the
        verdict itself, the missing converter's sentence and what was (not) written."""
        return self.kind not in _TOP_KINDS


@dataclass(frozen=True)
class Migration:
    """Everything ``freezeview migrate`` found about one model.

    Attributes:
        model: the TorchScript file.
        torch_version: the installed torch.
        conversion: what the converter did.
        calls: how many successive calls both sides were run for.
        outputs_same: per call, True when the program's outputs equal the TorchScript
            module's (torch's default tolerances); empty when nothing ran.
        output_notes: per differing call, what differs.
        state_differs: attribute paths whose value after some call differs between the
            two sides (tensors the program holds as buffers, or that it lacks).
        writes: every state write freezeview knows of: carried or lost, declared or not.
        parameters_as_buffers: TorchScript parameters the program holds as buffers.
        specialised: user input dimensions the program fixed (``x[0] = 1``).
        dynamic: user input dimensions the program left symbolic.
        second_shape: what running both sides on the second input shape showed (empty
            when none was given).
        second_shape_same: True when both sides ran on it and agreed.
        written: the ``.pt2`` written, if any.
        not_written: why ``-o`` was not honoured, if it was given and nothing was written.
        seconds: the whole command's time.
        speed: is it as fast? (None when it does not convert).
        aoti: what ``--aoti`` did (None when not asked).
    """

    model: str
    torch_version: str
    conversion: Conversion
    calls: int = 0
    outputs_same: tuple[bool, ...] = ()
    output_notes: tuple[str, ...] = ()
    state_differs: tuple[str, ...] = ()
    writes: tuple[StateWrite, ...] = ()
    parameters_as_buffers: tuple[str, ...] = ()
    specialised: tuple[str, ...] = ()
    dynamic: tuple[str, ...] = ()
    second_shape: str = ""
    second_shape_same: bool | None = None
    written: str = ""
    not_written: str = ""
    seconds: float = 0.0
    notes: tuple[str, ...] = field(default=())
    speed: Speed | None = None
    aoti: Aoti | None = None

    @property
    def lost_writes(self) -> tuple[StateWrite, ...]:
        """The state writes the program does not carry."""
        return tuple(w for w in self.writes if not w.carried)

    @property
    def differences(self) -> tuple[str, ...]:
        """Each behaviour difference in one sentence (empty when it behaves the same)."""
        found: list[str] = []
        for i, same in enumerate(self.outputs_same, 1):
            if not same:
                note = self.output_notes[i - 1] if i - 1 < len(self.output_notes) else ""
                found.append(f"outputs differ on call {i}" + (f" ({note})" if note else ""))
        for write in self.writes:
            if not write.carried:
                found.append(f"state write lost: {write.describe()}")
            elif not write.declared:
                found.append(
                    f"state write not declared by the program's graph signature: {write.describe()}"
                )
        lost = {w.path for w in self.lost_writes}
        for path in self.state_differs:
            if path not in lost:
                found.append(f"state differs after the calls: {path}")
        if self.second_shape and self.second_shape_same is False:
            found.append(f"second input shape: {self.second_shape}")
        return tuple(found)

    @property
    def verdict(self) -> str:
        """One of :data:`VERDICTS`."""
        if not self.conversion.converted:
            return DOES_NOT_CONVERT
        return DIFFERS if self.differences else BEHAVES_THE_SAME

    @property
    def exit_code(self) -> int:
        """0 when it converts and behaves the same, 1 otherwise."""
        return 0 if self.verdict == BEHAVES_THE_SAME else 1

    def report_lines(self) -> list[ReportLine]:
        """What ``freezeview migrate`` prints, line by line: the verdict, the converter's
        one sentence when this torch has none, else every finding, then what was
        written or why not. The CLI and the app both show these."""
        conv = self.conversion
        lines = [ReportLine("verdict", f"{self.verdict} ({self.model})")]
        if not conv.available:
            return [*lines, ReportLine("unavailable", conv.cause)]
        if conv.unhandled_kinds:
            kinds = ", ".join(conv.unhandled_kinds)
            lines.append(
                ReportLine("converter", f"node kinds the converter has no handler for: {kinds}")
            )
        if conv.converted:
            said = f"converted forward in {conv.seconds:.2f} s (torch's converter)"
            lines.append(ReportLine("converter", said))
        else:
            where = f" on {conv.failed_node.describe()}" if conv.failed_node else ""
            lines.append(ReportLine("converter", f"failed in {conv.method}, {conv.stage}{where}"))
            lines.append(ReportLine("converter", f"torch: {conv.cause}"))
            if conv.hint:
                lines.append(ReportLine("converter", f"known cause: {conv.hint}"))
        if self.calls:
            same = sum(self.outputs_same)
            kind = "outputs" if same == self.calls else "outputs-differ"
            said = f"outputs: the same on {same} of {self.calls} successive calls"
            lines.append(ReportLine(kind, said))
        for write in self.writes if conv.converted else ():
            if not write.carried:
                lines.append(ReportLine("write-lost", f"state write LOST: {write.describe()}"))
            elif not write.declared:
                said = "state write kept (not declared in the graph signature)"
                lines.append(ReportLine("write-undeclared", f"{said}: {write.describe()}"))
            else:
                lines.append(ReportLine("write-kept", f"state write kept: {write.describe()}"))
        if self.parameters_as_buffers:
            count = len(self.parameters_as_buffers)
            lines.append(
                ReportLine("buffers", f"parameters held as buffers by the program: {count}")
            )
        if self.specialised:
            fixed = ", ".join(self.specialised)
            lines.append(ReportLine("fixed", f"input dimensions fixed by the program: {fixed}"))
        if self.second_shape:
            lines.append(ReportLine("second-shape", f"second input shape {self.second_shape}"))
        if self.speed is not None:
            lines.extend(ReportLine("speed", line) for line in self.speed.lines())
        if self.aoti is not None:
            lines.extend(ReportLine("aoti", line) for line in self.aoti.lines())
        lines.extend(ReportLine("note", note) for note in self.notes)
        if self.written:
            lines.append(ReportLine("written", f"wrote {self.written}"))
        elif self.not_written:
            lines.append(ReportLine("not-written", self.not_written))
        return lines

    def to_json(self) -> dict[str, Any]:
        """The ``migrate --json`` document (docs/schemas/migrate.schema.json)."""
        return {
            "model": self.model,
            "torch_version": self.torch_version,
            "verdict": self.verdict,
            "conversion": self.conversion.to_json(),
            "behaviour": {
                "calls": self.calls,
                "outputs_same": list(self.outputs_same),
                "output_notes": list(self.output_notes),
                "state_differs": list(self.state_differs),
                "writes": [w.to_json() for w in self.writes],
                "parameters_as_buffers": list(self.parameters_as_buffers),
                "specialised": list(self.specialised),
                "dynamic": list(self.dynamic),
                "second_shape": self.second_shape,
                "second_shape_same": self.second_shape_same,
            },
            "differences": list(self.differences),
            "written": self.written or None,
            "not_written": self.not_written,
            "notes": list(self.notes),
            "latency": self.speed.to_json() if self.speed else None,
            "aoti": self.aoti.to_json() if self.aoti else None,
            "seconds": round(self.seconds, 3),
        }
