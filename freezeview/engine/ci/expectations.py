"""The expectations file of ``freezeview check``: what freezing must keep doing to a model.

A TOML file, read with the standard library, committed next to the model's code::

    [plan]                      # how to freeze (as the command-line flags say)
    preserve = ["version"]
    eval = false
    optimize_for_inference = false
    # passes = ["remove_dropout", "fold_conv_bn"]   # default: what torch.jit.freeze runs

    [attributes]                # glob patterns over dotted paths (fnmatch: * ? [...]),
                                # index ranges: layers.0-11.linear1.weight, b.{0-3,5}.w
    inlined = ["conv*.weight", "layer1.*"]   # each matching attribute must be inlined
    kept = ["steps", "history"]              # nothing else may be kept
    dropped = ["*.num_batches_tracked"]      # each matching attribute must be dropped
    written_constants = false   # no folded constant the frozen graph writes

    [limits]
    max_kept_tensor_bytes = 4096

    [passes]                    # pass id = times it must change the graph, at least
    fold_conv_bn = 1            # (0: must not fire)

    [numerics]                  # optional: frozen outputs against the original ones
    input_shapes = ["1,3,224,224"]   # or: inputs = "sample.pt" (next to this file)
    max_abs = 1e-4
    max_rel = 1e-3

    [deployment]                # optional: what people freeze for
    max_latency_ratio = 1.0     # frozen / unfrozen forward median, at most (needs inputs)
    max_constant_bytes = 102400 # tensor constants in the frozen graphs, at most
    portable = true             # no backend-only nodes, every constant on `device`
    device = "cpu"
    roundtrip = true            # saves, loads in a fresh process, same outputs (inputs)
    threads = 1                 # torch threads while timing
    time_budget = 0.25          # seconds of timing per step

    [migration]                 # optional: off TorchScript (needs [numerics] inputs)
    converts = true             # torch's converter makes an ExportedProgram of it
    state_kept = true           # the program keeps every state write of forward

Every problem with the file is one sentence naming its line (:class:`ExpectationsError`,
exit 2): a TOML syntax error, an unknown section or key, a value of the wrong type, an
unknown pass, a pattern that is empty or matches no attribute of the model.
"""

from __future__ import annotations

import math
import re
import tomllib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..plumbing import BadInputError, did_you_mean, unknown_pass

__all__ = [
    "Expectations",
    "ExpectationsError",
    "Rule",
    "read_expectations",
]

_SECTIONS: dict[str, dict[str, str]] = {
    "plan": {
        "preserve": "a list of names",
        "passes": "a list of pass ids",
        "eval": "true or false",
        "optimize_for_inference": "true or false",
        "no_optimize": "true or false",
    },
    "attributes": {
        "inlined": "a list of patterns",
        "kept": "a list of patterns",
        "dropped": "a list of patterns",
        "written_constants": "true or false",
    },
    "limits": {"max_kept_tensor_bytes": "a whole number of bytes, 0 or more"},
    "passes": {},  # pass ids, checked against the registry
    "numerics": {
        "input_shapes": 'a list of shapes such as "1,3,224,224"',
        "inputs": "a path to inputs saved with torch.save",
        "max_abs": "a number, 0 or more",
        "max_rel": "a number, 0 or more",
    },
    "deployment": {
        "max_latency_ratio": "a number above 0",
        "max_constant_bytes": "a whole number of bytes, 0 or more",
        "portable": "true or false",
        "device": 'a device such as "cpu"',
        "roundtrip": "true or false",
        "threads": "a whole number, 1 or more",
        "time_budget": "a number of seconds above 0",
    },
    "migration": {
        "converts": "true or false",
        "state_kept": "true or false",
    },
}

#: The rules of ``[deployment]`` that run the model on the sample inputs.
_NEEDS_INPUTS = ("max_latency_ratio", "roundtrip")


class ExpectationsError(BadInputError):
    """The expectations file is unreadable or wrong (exit 2)."""


@dataclass(frozen=True)
class Rule:
    """One expectation: one JUnit test case, one line of ``check``'s report.

    Attributes:
        kind: ``inlined``, ``kept``, ``dropped``, ``written-constants``,
            ``max-kept-bytes``, ``pass``,
            ``numerics``, or a deployment rule: ``max-latency-ratio``,
            ``max-constant-bytes``, ``portable``, ``roundtrip``; or a migration rule:
            ``converts``, ``state-kept``.
        target: the pattern (``inlined``/``dropped``), the patterns joined by ``, ``
            (``kept``: the attributes allowed to stay), the pass id, or ``""``.
        value: the byte limit, the minimum times a pass fires, or ``(max_abs,
            max_rel)``; None otherwise.
        line: the line of the file that states it.
    """

    kind: str
    target: str
    value: Any
    line: int

    @property
    def title(self) -> str:
        """``attributes.inlined: conv*.weight`` and the like, for reports."""
        if self.kind in ("inlined", "dropped"):
            return f"attributes.{self.kind}: {self.target}"
        if self.kind == "kept":
            if not self.target:
                return "attributes.kept: nothing may be kept"
            return f"attributes.kept: only {self.target}"
        if self.kind == "max-kept-bytes":
            return f"limits.max_kept_tensor_bytes: {self.value}"
        if self.kind == "written-constants":
            return "attributes.written_constants: false (no folded constant is written)"
        if self.kind == "pass":
            return (
                f"passes.{self.target}: fires {'never' if self.value == 0 else f'>= {self.value}x'}"
            )
        if self.kind == "max-latency-ratio":
            return f"deployment.max_latency_ratio: {self.value:g}"
        if self.kind == "max-constant-bytes":
            return f"deployment.max_constant_bytes: {self.value}"
        if self.kind == "portable":
            return f"deployment.portable: on {self.target}, no backend-only nodes"
        if self.kind == "roundtrip":
            return "deployment.roundtrip: saves, loads back, same outputs"
        if self.kind == "converts":
            return "migration.converts: torch's converter makes an ExportedProgram of it"
        if self.kind == "state-kept":
            return "migration.state_kept: the ExportedProgram keeps every state write"
        return f"numerics: max_abs {self.value[0]:g}, max_rel {self.value[1]:g}"


@dataclass(frozen=True)
class Expectations:
    """An expectations file, read and checked for form (not yet against a model).

    Attributes:
        path: the file.
        preserve, passes, eval_mode, optimize_for_inference, no_optimize: the plan.
        rules: every expectation, in file order.
        kept_patterns: ``attributes.kept`` (None when the file does not restrict it).
        input_shapes, inputs: sample inputs for the numerics rule.
        threads, time_budget: how ``[deployment]`` times the forwards.
    """

    path: Path
    preserve: tuple[str, ...] = ()
    passes: tuple[str, ...] | None = None
    eval_mode: bool = False
    optimize_for_inference: bool = False
    no_optimize: bool = False
    rules: tuple[Rule, ...] = ()
    kept_patterns: tuple[tuple[str, int], ...] | None = None
    input_shapes: tuple[str, ...] = ()
    inputs: Path | None = None
    patterns: tuple[tuple[str, str, int], ...] = field(default=(), repr=False)
    threads: int = 1
    time_budget: float = 0.25

    @property
    def measures(self) -> bool:
        """Whether a rule needs latency, sizes or portability (a measured run)."""
        return any(
            r.kind in ("max-latency-ratio", "max-constant-bytes", "portable", "roundtrip")
            for r in self.rules
        )


_HEADER = re.compile(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?")
_ASSIGNMENT = re.compile(r"[\"']?([\w.-]+)[\"']?\s*=")
_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'')


class _FileLines:
    """Where each section, key and quoted string of an expectations file is.

    The text is read line by line once; every look-up after that scans the rows already
    split (a written file lists hundreds of patterns, and rescanning it with regular
    expressions for each key cost more than parsing the TOML).
    """

    def __init__(self, text: str) -> None:
        # (line number, stripped line, section it is in, whether it is the header)
        self.rows: list[tuple[int, str, str, bool]] = []
        # (section, key, quoted string) -> line; a list may span lines, and each
        # pattern is reported at the line that holds it.
        self.values: dict[tuple[str, str, str], int] = {}
        section = key = ""
        for number, line in enumerate(text.splitlines(), 1):
            stripped = line.strip()
            header = _HEADER.fullmatch(stripped) if stripped.startswith("[") else None
            if header:
                section, key = header.group(1), ""
                self.rows.append((number, stripped, section, True))
                continue
            self.rows.append((number, stripped, section, False))
            if "=" in stripped and (assignment := _ASSIGNMENT.match(stripped)):
                key = assignment.group(1)
            if '"' in stripped or "'" in stripped:
                for value in _STRING.findall(stripped):
                    self.values.setdefault((section, key, value[0] or value[1]), number)

    def key_line(self, section: str, key: str) -> int:
        """The line of ``key`` in ``[section]`` (of the section's header when ``key`` is
        empty; ``section`` empty: a key before any header), 0 when it is not there."""
        pattern: re.Pattern[str] | None = None
        for number, stripped, current, is_header in self.rows:
            if current != section:
                continue
            if is_header:
                if not key:
                    return number
            elif key in stripped and "=" in stripped:
                if pattern is None:
                    pattern = re.compile(rf"[\"']?{re.escape(key)}[\"']?\s*=")
                if pattern.match(stripped):
                    return number
        return 0


def _fail(path: Path, line: int, message: str) -> ExpectationsError:
    where = f"{path} line {line}" if line else str(path)
    return ExpectationsError(f"{where}: {message}")


def _strings(path: Path, line: int, name: str, value: Any) -> tuple[str, ...]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise _fail(path, line, f"{name} must be a list of strings, not {value!r}.")
    for item in value:
        if not item.strip():
            raise _fail(path, line, f"{name} holds an empty pattern or name.")
    return tuple(value)


def _flag(path: Path, line: int, name: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise _fail(path, line, f"{name} must be true or false, not {value!r}.")
    return value


def _number(path: Path, line: int, name: str, value: Any) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise _fail(path, line, f"{name} must be a number, 0 or more, not {value!r}.")
    if not math.isfinite(value):
        raise _fail(path, line, f"{name} must be finite, not {value!r}.")
    return float(value)


def read_expectations(path: str | Path, known_passes: set[str]) -> Expectations:
    """Read and check an expectations file.

    Args:
        path: the TOML file.
        known_passes: the pass ids of this freezeview (the ``[passes]`` keys and
            ``plan.passes`` must be among them).

    Returns:
        The :class:`Expectations`.

    Raises:
        ExpectationsError: the file is missing or unreadable, is not valid TOML, or says
            something freezeview does not understand (one sentence naming the line).
    """
    p = Path(path)
    try:
        text = p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ExpectationsError(f"{p}: no such expectations file.") from None
    except IsADirectoryError:
        raise ExpectationsError(f"{p} is a directory, not an expectations file.") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise ExpectationsError(f"{p} cannot be read ({exc}).") from None
    try:
        doc = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        found = re.search(r"\(at line (\d+), column \d+\)", str(exc))
        message = re.sub(r"\s*\(at line \d+, column \d+\)", "", str(exc))
        raise _fail(p, int(found.group(1)) if found else 0, f"not valid TOML: {message}.") from None

    where = _FileLines(text)
    for section, body in doc.items():
        if section not in _SECTIONS:
            raise _fail(
                p,
                where.key_line(section, "") or where.key_line("", section),
                f"unknown section [{section}]; known: {', '.join(_SECTIONS)}.",
            )
        if not isinstance(body, dict):
            raise _fail(p, where.key_line("", section), f"{section} must be a [{section}] table.")
        allowed = _SECTIONS[section]
        for key in body:
            if section == "passes":
                if key not in known_passes:
                    raise _fail(
                        p,
                        where.key_line(section, key),
                        unknown_pass(key, known_passes, " in [passes]"),
                    )
            elif key not in allowed:
                raise _fail(
                    p,
                    where.key_line(section, key),
                    f"unknown key {key!r} in [{section}];{did_you_mean(key, allowed)} known: "
                    f"{', '.join(allowed)}.",
                )

    line = where.key_line

    plan = doc.get("plan", {})
    preserve = _strings(p, line("plan", "preserve"), "plan.preserve", plan.get("preserve", []))
    passes = None
    if "passes" in plan:
        passes = _strings(p, line("plan", "passes"), "plan.passes", plan["passes"])
        for name in passes:
            if name not in known_passes:
                raise _fail(
                    p,
                    where.values.get(("plan", "passes", name), line("plan", "passes")),
                    unknown_pass(name, known_passes, " in plan.passes"),
                )

    values = where.values
    rules: list[Rule] = []
    patterns: list[tuple[str, str, int]] = []
    attributes = doc.get("attributes", {})
    kept_patterns: tuple[tuple[str, int], ...] | None = None
    for kind in ("inlined", "kept", "dropped"):
        if kind not in attributes:
            continue
        items = _strings(p, line("attributes", kind), f"attributes.{kind}", attributes[kind])
        at = line("attributes", kind)
        located = [(v, values.get(("attributes", kind, v), at)) for v in items]
        patterns.extend((kind, v, n) for v, n in located)
        if kind == "kept":
            kept_patterns = tuple(located)
            rules.append(Rule("kept", ", ".join(items), None, line("attributes", "kept")))
        else:
            rules.extend(Rule(kind, v, None, n) for v, n in located)
    if "written_constants" in attributes:
        n = line("attributes", "written_constants")
        if not _flag(p, n, "attributes.written_constants", attributes["written_constants"]):
            rules.append(Rule("written-constants", "", False, n))

    limits = doc.get("limits", {})
    if "max_kept_tensor_bytes" in limits:
        n = line("limits", "max_kept_tensor_bytes")
        limit = limits["max_kept_tensor_bytes"]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise _fail(
                p,
                n,
                f"limits.max_kept_tensor_bytes must be a whole number, 0 or more, not {limit!r}.",
            )
        rules.append(Rule("max-kept-bytes", "", limit, n))

    for name, times in doc.get("passes", {}).items():
        n = line("passes", name)
        if isinstance(times, bool) or not isinstance(times, int) or times < 0:
            raise _fail(p, n, f"passes.{name} must be a whole number of times, 0 or more.")
        rules.append(Rule("pass", name, times, n))

    numerics = doc.get("numerics", {})
    shapes: tuple[str, ...] = ()
    inputs: Path | None = None
    if numerics:
        if "input_shapes" in numerics and "inputs" in numerics:
            raise _fail(p, line("numerics", "inputs"), "give input_shapes or inputs, not both.")
        if "input_shapes" in numerics:
            shapes = _strings(
                p,
                line("numerics", "input_shapes"),
                "numerics.input_shapes",
                numerics["input_shapes"],
            )
        elif "inputs" in numerics:
            if not isinstance(numerics["inputs"], str) or not numerics["inputs"].strip():
                raise _fail(p, line("numerics", "inputs"), "numerics.inputs must be a file path.")
            inputs = (p.parent / numerics["inputs"]).resolve()
        else:
            raise _fail(
                p, line("numerics", ""), "[numerics] needs input_shapes or inputs to run the model."
            )
        if "max_abs" not in numerics and "max_rel" not in numerics:
            raise _fail(p, line("numerics", ""), "[numerics] needs max_abs, max_rel or both.")
        bounds = tuple(
            _number(p, line("numerics", key), f"numerics.{key}", numerics[key])
            if key in numerics
            else math.inf
            for key in ("max_abs", "max_rel")
        )
        rules.append(Rule("numerics", "", bounds, line("numerics", "")))

    threads, budget = _deployment(p, doc.get("deployment", {}), line, rules, bool(numerics))
    _migration(p, doc.get("migration", {}), line, rules, bool(numerics))

    return Expectations(
        path=p,
        preserve=preserve,
        passes=passes,
        eval_mode=_flag(p, line("plan", "eval"), "plan.eval", plan.get("eval", False)),
        optimize_for_inference=_flag(
            p,
            line("plan", "optimize_for_inference"),
            "plan.optimize_for_inference",
            plan.get("optimize_for_inference", False),
        ),
        no_optimize=_flag(
            p, line("plan", "no_optimize"), "plan.no_optimize", plan.get("no_optimize", False)
        ),
        rules=tuple(rules),
        kept_patterns=kept_patterns,
        input_shapes=shapes,
        inputs=inputs,
        patterns=tuple(patterns),
        threads=threads,
        time_budget=budget,
    )


def _migration(
    p: Path, section: dict[str, Any], line: Any, rules: list[Rule], has_inputs: bool
) -> None:
    """The ``[migration]`` rules (``converts``, ``state_kept``), appended to ``rules``."""
    for key, kind in (("converts", "converts"), ("state_kept", "state-kept")):
        if key not in section:
            continue
        n = line("migration", key)
        if not _flag(p, n, f"migration.{key}", section[key]):
            continue
        if not has_inputs:
            raise _fail(
                p,
                n,
                f"migration.{key} runs torch's converter on sample inputs: give [numerics] "
                "input_shapes or inputs.",
            )
        rules.append(Rule(kind, "", None, n))


def _deployment(
    p: Path, section: dict[str, Any], line: Any, rules: list[Rule], has_inputs: bool
) -> tuple[int, float]:
    """The ``[deployment]`` rules, appended to ``rules``; returns (threads, time budget)."""
    for key in _NEEDS_INPUTS:
        if key in section and not has_inputs:
            raise _fail(
                p,
                line("deployment", key),
                f"deployment.{key} runs the model: give [numerics] input_shapes or inputs.",
            )
    threads = section.get("threads", 1)
    if isinstance(threads, bool) or not isinstance(threads, int) or threads < 1:
        raise _fail(
            p,
            line("deployment", "threads"),
            f"deployment.threads must be 1 or more, not {threads!r}.",
        )
    budget = _number(
        p,
        line("deployment", "time_budget"),
        "deployment.time_budget",
        section.get("time_budget", 0.25),
    )
    if budget <= 0:
        raise _fail(p, line("deployment", "time_budget"), "deployment.time_budget must be above 0.")
    if "max_latency_ratio" in section:
        n = line("deployment", "max_latency_ratio")
        ratio = _number(p, n, "deployment.max_latency_ratio", section["max_latency_ratio"])
        if ratio <= 0:
            raise _fail(p, n, "deployment.max_latency_ratio must be above 0.")
        rules.append(Rule("max-latency-ratio", "", ratio, n))
    if "max_constant_bytes" in section:
        n = line("deployment", "max_constant_bytes")
        limit = section["max_constant_bytes"]
        if isinstance(limit, bool) or not isinstance(limit, int) or limit < 0:
            raise _fail(
                p,
                n,
                f"deployment.max_constant_bytes must be a whole number, 0 or more, not {limit!r}.",
            )
        rules.append(Rule("max-constant-bytes", "", limit, n))
    device = section.get("device", "cpu")
    if not isinstance(device, str) or not device.strip():
        raise _fail(p, line("deployment", "device"), "deployment.device must be a device name.")
    if _flag(
        p, line("deployment", "portable"), "deployment.portable", section.get("portable", False)
    ):
        rules.append(Rule("portable", device, None, line("deployment", "portable")))
    if _flag(
        p, line("deployment", "roundtrip"), "deployment.roundtrip", section.get("roundtrip", False)
    ):
        rules.append(Rule("roundtrip", "", None, line("deployment", "roundtrip")))
    return threads, budget
