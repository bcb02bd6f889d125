"""``freezeview check``: does freezing still do what the expectations file says?

Each :class:`~.expectations.Rule` is held against the facts of one stepwise run
(:mod:`.model_facts`, statuses from torch's own freeze, read by attribute path: while
every rule holds, freezeview's module tree and reasons are not needed). A broken rule
gives one :class:`Violation` per attribute (or one for a limit, a pass, the numerics):
what was expected, what torch does, and freezeview's reason with its node, source line
and text.
``--write-expect`` writes the model's current behaviour as a file to commit
(:func:`expectations_text`).
"""

from __future__ import annotations

import fnmatch
import math
import re
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, Protocol

import torch

from ..freeze import REGISTRY, Plan, default_passes, load_inputs, random_inputs
from ..measure import Measurement
from ..plumbing import collector_paused, plural
from ..reasons import AttributeVerdict, Reason
from .deployment_rules import deployment_toml, hold_deployment_rule, latency_inside_noise
from .expectations import Expectations, ExpectationsError, Rule, read_expectations
from .migration_rules import MIGRATION_KINDS, hold_migration_rules
from .model_facts import FreezeFacts, TorchFacts, as_loaded, torch_facts
from .path_ranges import group_paths, has_range, is_pattern, path_matcher

__all__ = [
    "CheckReport",
    "RuleResult",
    "Violation",
    "check",
    "expectations_text",
    "plan_of",
]

_DOES = {"kept": "keeps it", "inlined": "inlines it", "dropped": "drops it"}
_DEPLOYMENT = ("max-latency-ratio", "max-constant-bytes", "portable", "roundtrip")


@dataclass(frozen=True)
class Violation:
    """One way the model breaks one rule.

    Attributes:
        message: one line: what was expected, what torch does, and why.
        path: the attribute concerned, if any.
        expected: what the rule asks (``inlined``, ``<= 4096 bytes``, ...).
        actual: what torch does.
        reason: freezeview's main reason for what torch does, if any (its ``source``
            and ``source_text`` point at the line that caused it).
    """

    message: str
    path: str | None = None
    expected: str = ""
    actual: str = ""
    reason: Reason | None = None

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``check --format json``."""
        return {
            "message": self.message,
            "path": self.path,
            "expected": self.expected,
            "actual": self.actual,
            "reason": self.reason.to_json() if self.reason else None,
        }


@dataclass(frozen=True)
class RuleResult:
    """A rule and the violations found (none: it holds).

    ``note`` says how a rule held when that needs saying: a latency ratio above its
    limit by less than the noise, or one that held when timed a second time.
    """

    rule: Rule
    violations: tuple[Violation, ...] = ()
    checked: int = 0
    note: str = ""

    @property
    def ok(self) -> bool:
        """True when the rule holds."""
        return not self.violations


@dataclass
class CheckReport:
    """What ``freezeview check`` found.

    Attributes:
        model, expectations, torch_version: what was checked, against what, with which
            torch.
        results: one :class:`RuleResult` per rule, in file order.
        torch_facts: torch's statuses by path, the kept bytes, the passes that fired:
            what the rules were held against.
        seconds: wall time of the whole check.
        notes: what loading the model said.
    """

    model: str
    expectations: str
    torch_version: str
    results: list[RuleResult]
    torch_facts: TorchFacts
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def facts(self) -> FreezeFacts:
        """Every fact of the run, freezeview's module tree included (read on first use;
        with freezeview's reasons when a rule is broken)."""
        return self.torch_facts.facts()

    @property
    def violations(self) -> list[Violation]:
        """Every violation, rule by rule."""
        return [v for r in self.results for v in r.violations]

    @property
    def ok(self) -> bool:
        """True when every rule holds."""
        return all(r.ok for r in self.results)

    def to_json(self) -> dict[str, Any]:
        """The ``check --format json`` document."""
        return {
            "model": self.model,
            "expectations": self.expectations,
            "torch_version": self.torch_version,
            "ok": self.ok,
            "rules": [
                {
                    "rule": r.rule.title,
                    "kind": r.rule.kind,
                    "line": r.rule.line,
                    "ok": r.ok,
                    "checked": r.checked,
                    "violations": [v.to_json() for v in r.violations],
                    "note": r.note,
                }
                for r in self.results
            ],
            "kept_tensor_bytes": self.torch_facts.kept_bytes,
            "passes_fired": self.torch_facts.passes_fired,
            "seconds": round(self.seconds, 3),
        }


def plan_of(expectations: Expectations) -> Plan:
    """The freeze plan an expectations file asks for."""
    if expectations.passes is not None:
        return Plan(
            preserved_attrs=expectations.preserve,
            passes=expectations.passes,
            optimize_numerics=not expectations.no_optimize,
            optimize_for_inference=expectations.optimize_for_inference,
        ).validate()
    return Plan.default(
        expectations.preserve,
        optimize_numerics=not expectations.no_optimize,
        optimize_for_inference=expectations.optimize_for_inference,
    )


def _is_glob(pattern: str) -> bool:
    return is_pattern(pattern)


def _matcher(pattern: str) -> Callable[[str], object]:
    """fnmatch's test for a glob; with an index range (``layers.0-11.w``) the range's."""
    if has_range(pattern):
        return path_matcher(pattern)
    return re.compile(fnmatch.translate(pattern)).match


class _Status(Protocol):
    """What a rule reads of a verdict (:class:`AttributeVerdict` or :class:`PathStatus`)."""

    @property
    def path(self) -> str: ...
    @property
    def kind(self) -> str: ...
    @property
    def status(self) -> str: ...
    @property
    def reasons(self) -> Sequence[Reason]: ...


class _PathIndex:
    """The verdicts by path, matched against many patterns without a quadratic scan.

    A written expectations file lists every inlined path of a ResNet-50 (hundreds of
    literal patterns): those are dictionary look-ups; only wildcards scan the paths.
    """

    def __init__(self, verdicts: Sequence[_Status]) -> None:
        self.verdicts = list(verdicts)
        self.by_path = {v.path: v for v in verdicts}

    def any_match(self, pattern: str) -> bool:
        if not _is_glob(pattern):
            return pattern in self.by_path
        match = _matcher(pattern)
        return any(match(v.path) for v in self.verdicts)

    def matching(self, pattern: str) -> list[_Status]:
        """Verdicts a rule's pattern reaches.

        A wildcard reaches attributes only: a submodule counts when named exactly (its
        own status says only whether something under it was folded).
        """
        if not _is_glob(pattern):
            found = self.by_path.get(pattern)
            return [found] if found is not None else []
        match = _matcher(pattern)
        return [v for v in self.verdicts if v.kind != "submodule" and match(v.path)]

    def allowed(self, patterns: Sequence[str]) -> Callable[[str], bool]:
        literal = {p for p in patterns if not _is_glob(p)}
        globs = [_matcher(p) for p in patterns if _is_glob(p)]
        return lambda path: path in literal or any(m(path) for m in globs)


def main_reason(verdict: AttributeVerdict | _Status) -> Reason | None:
    """The reason that names a source line, else the first one."""
    located = [r for r in verdict.reasons if r.source]
    return located[0] if located else (verdict.reasons[0] if verdict.reasons else None)


def _why(reason: Reason | None) -> str:
    return f": {reason.one_line()}" if reason is not None else ""


def _status_violation(verdict: _Status, expected: str) -> Violation:
    reason = main_reason(verdict)
    return Violation(
        f"{verdict.path}: expected {expected}, torch {_DOES[verdict.status]}{_why(reason)}",
        path=verdict.path,
        expected=expected,
        actual=verdict.status,
        reason=reason,
    )


def _written_violation(verdict: _Status) -> Violation:
    reason = next(r for r in verdict.reasons if r.code == "written-constant")
    return Violation(
        f"{verdict.path}: expected no write to its folded constant, torch folds it and the "
        f"frozen graph writes it{_why(reason)}",
        path=verdict.path,
        expected="no write to a folded constant",
        actual="written-constant",
        reason=reason,
    )


def _check_patterns(expectations: Expectations, index: _PathIndex, model: str) -> None:
    for kind, pattern, line in expectations.patterns:
        if not index.any_match(pattern):
            raise ExpectationsError(
                f"{expectations.path} line {line}: pattern {pattern!r} in attributes.{kind} "
                f"matches no attribute of {model}."
            )


def _rule_result(
    rule: Rule, expectations: Expectations, facts: FreezeFacts | TorchFacts, index: _PathIndex
) -> RuleResult:
    verdicts = index.verdicts
    if rule.kind in ("inlined", "dropped"):
        matched = index.matching(rule.target)
        bad = tuple(_status_violation(v, rule.kind) for v in matched if v.status != rule.kind)
        return RuleResult(rule, bad, len(matched))
    if rule.kind == "kept":
        allowed = index.allowed([p for p, _ in expectations.kept_patterns or ()])
        kept = [v for v in verdicts if v.status == "kept"]
        bad = tuple(
            _status_violation(v, "not kept (inlined or dropped)")
            for v in kept
            if not allowed(v.path)
        )
        return RuleResult(rule, bad, len(kept))
    if rule.kind == "written-constants":
        written = [v for v in verdicts if "written-constant" in tuple(r.code for r in v.reasons)]
        bad = tuple(_written_violation(v) for v in written)
        return RuleResult(rule, bad, max(len(verdicts), 1))
    if rule.kind == "max-kept-bytes":
        if facts.kept_bytes <= rule.value:
            return RuleResult(rule, (), 1)
        biggest = facts.kept_tensors[:3]
        named = ", ".join(f"{p} ({n:,} bytes)" for p, n in biggest)
        verdict = index.by_path.get(biggest[0][0]) if biggest else None
        reason = main_reason(verdict) if verdict else None
        message = (
            f"expected at most {rule.value:,} bytes of tensors kept as attributes, torch "
            f"keeps {facts.kept_bytes:,}: {named}"
            + (f"; {biggest[0][0]}{_why(reason)}" if reason else "")
        )
        return RuleResult(
            rule,
            (
                Violation(
                    message,
                    path=biggest[0][0] if biggest else None,
                    expected=f"<= {rule.value} bytes",
                    actual=f"{facts.kept_bytes} bytes",
                    reason=reason,
                ),
            ),
            1,
        )
    if rule.kind == "pass":
        fired = facts.passes_fired.get(rule.target, 0)
        planned = rule.target in facts.plan.passes
        ok = fired == 0 if rule.value == 0 else fired >= rule.value
        if ok:
            return RuleResult(rule, (), 1)
        want = "never to fire" if rule.value == 0 else f"to fire at least {rule.value}x"
        why = "" if planned else " (the plan does not run it)"
        message = f"pass {rule.target}: expected {want}, it fired {fired}x{why}"
        return RuleResult(rule, (Violation(message, expected=want, actual=f"{fired}x"),), 1)
    if rule.kind in _DEPLOYMENT:
        broken = hold_deployment_rule(rule, facts.measurement)
        if broken is None:
            note = ""
            if rule.kind == "max-latency-ratio" and facts.measurement is not None:
                note = latency_inside_noise(rule, facts.measurement) or ""
            return RuleResult(rule, (), 1, note)
        violation = Violation(broken.message, expected=broken.expected, actual=broken.actual)
        return RuleResult(rule, (violation,), 1)
    # numerics
    numerics = facts.numerics
    max_abs, max_rel = rule.value
    if numerics is None or numerics.note:
        note = numerics.note if numerics is not None else "no sample inputs"
        message = f"numerics: the frozen model could not be compared with the original ({note})"
        return RuleResult(rule, (Violation(message, expected="comparable outputs"),), 1)
    if numerics.max_abs <= max_abs and numerics.max_rel <= max_rel:
        return RuleResult(rule, (), 1)
    message = (
        f"numerics: expected max abs <= {max_abs:g} and max rel <= {max_rel:g}, the frozen "
        f"model gives max abs {numerics.max_abs:.3g}, max rel {numerics.max_rel:.3g}"
    )
    return RuleResult(
        rule,
        (
            Violation(
                message,
                expected=f"abs <= {max_abs:g}, rel <= {max_rel:g}",
                actual=f"abs {numerics.max_abs:.3g}, rel {numerics.max_rel:.3g}",
            ),
        ),
        1,
    )


def _inputs(expectations: Expectations) -> tuple[Any, ...] | None:
    if expectations.inputs is not None:
        return load_inputs(expectations.inputs)
    if expectations.input_shapes:
        return random_inputs(expectations.input_shapes)
    return None


def check(model: Any, expectations: str | Path | Expectations) -> CheckReport:
    """Hold a model against an expectations file.

    Args:
        model: a ``.pt`` path, a ScriptModule or a :class:`LoadedModel`.
        expectations: the TOML file (or one already read).

    Returns:
        A :class:`CheckReport`; ``report.ok`` is False when a rule is broken.

    Raises:
        ExpectationsError: the file is wrong (one sentence naming its line).
        BadInputError: the model cannot be loaded, or its sample inputs cannot.
        PlanError: torch cannot freeze the model as the file's plan asks.

    Example::

        report = check("model.pt", "model.freeze.toml")
        for violation in report.violations:
            print(violation.message)
    """
    start = time.perf_counter()
    expected = (
        expectations
        if isinstance(expectations, Expectations)
        else read_expectations(expectations, set(REGISTRY))
    )
    loaded = as_loaded(model, expected.eval_mode)
    with collector_paused():
        # torch's statuses decide every rule. Read by path, they need neither
        # freezeview's module tree nor its reasons: those are worked out only when a
        # rule is broken, to say why (or when someone reads ``report.facts``).
        measure = (expected.threads, expected.time_budget) if expected.measures else None
        inputs = _inputs(expected)
        rules = [rule for rule in expected.rules if rule.kind not in MIGRATION_KINDS]
        run = torch_facts(loaded, plan_of(expected), inputs, measure, per_step=False)
        # Whether a folded constant is written is freezeview's finding, not a status.
        writes_rule = any(rule.kind == "written-constants" for rule in expected.rules)
        # A walk of the frozen graphs says at once whether any constant is written at
        # all; only then do the reasons (about as long as the freeze) say which.
        writes_rule = writes_rule and run.writes_a_constant()
        if run.statuses is not None and not writes_rule:
            index = _PathIndex(run.statuses)
            _check_patterns(expected, index, run.model)
            results = [_rule_result(rule, expected, run, index) for rule in rules]
        else:  # only freezeview's module tree can tell (a fork, an opaque object)
            facts = run.facts(reasons=writes_rule)
            index = _PathIndex(facts.explanation.attributes)
            _check_patterns(expected, index, facts.model)
            results = [_rule_result(rule, expected, facts, index) for rule in rules]
        if not all(r.ok for r in results):
            slow = any(r.rule.kind == "max-latency-ratio" and not r.ok for r in results)
            first = run.measurement if slow else None
            if slow or (
                not run.per_step and any(r.rule.kind in _DEPLOYMENT and not r.ok for r in results)
            ):
                # Which step to blame takes each step's figures: the run once more. A
                # broken latency limit is timed once more before it fails: a moment the
                # machine was busy is not the model's doing.
                run = torch_facts(loaded, plan_of(expected), inputs, measure)
            facts = run.facts(reasons=True)
            index = _PathIndex(facts.explanation.attributes)
            results = [_rule_result(rule, expected, facts, index) for rule in rules]
            if first is not None:
                results = [_timed_twice(r, first) for r in results]
        # [migration]: one run of migrate (torch's converter) for its rules, in file order.
        migrated = hold_migration_rules(
            expected.rules, loaded, inputs, eval_mode=expected.eval_mode
        )
        others = iter(results)
        results = [
            RuleResult(rule, tuple(Violation(*b) for b in migrated[i][0]), migrated[i][1])
            if i in migrated
            else next(others)
            for i, rule in enumerate(expected.rules)
        ]
    return CheckReport(
        model=run.model,
        expectations=str(expected.path),
        torch_version=torch.__version__,
        results=results,
        torch_facts=run,
        seconds=time.perf_counter() - start,
        notes=list(loaded.notes),
    )


def _timed_twice(result: RuleResult, first: Measurement | None) -> RuleResult:
    """A latency rule's result on its second timing, saying what the first one gave."""
    overall = first.overall if first is not None else None
    if result.rule.kind != "max-latency-ratio" or overall is None:
        return result
    before = f"{overall.ratio:.2f}x ±{overall.noise * 100:.0f}%"
    if result.ok:
        note = f"latency: held when timed a second time (the first timing gave {before})"
        return replace(result, note=f"{note}; {result.note}" if result.note else note)
    violations = tuple(
        replace(v, message=f"{v.message} (timed twice; the first timing gave {before})")
        for v in result.violations
    )
    return replace(result, violations=violations)


# -- writing the model's current behaviour --------------------------------------------------


def _toml_string(value: str) -> str:
    escaped = value.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'


def _toml_list(values: Sequence[str], indent: str = "    ") -> str:
    if not values:
        return "[]"
    return "[\n" + "".join(f"{indent}{_toml_string(v)},\n" for v in values) + "]"


def _tolerance(value: float) -> float:
    """A bound with room above what was measured (x10, at least 1e-6), two digits."""
    bound = max(value * 10, 1e-6)
    return float(f"{bound:.2g}") if math.isfinite(bound) else bound


def _written_lines(verdicts: Sequence[AttributeVerdict]) -> list[str]:
    """``written_constants = false`` for a model whose frozen graph writes no folded
    constant (a new one fails CI); commented lines naming them for one that does."""
    written = [v.path for v in verdicts if "written-constant" in v.codes]
    if not written:
        return [
            "# No folded constant may be written by the frozen graph (written-constant).",
            "written_constants = false",
        ]
    return [
        f"# The frozen graph writes {plural(len(written), 'folded constant')} today: "
        f"{', '.join(written[:5])}{', ...' if len(written) > 5 else ''}",
        "# (written-constant: its outputs can change from call to call). Once fixed:",
        "# written_constants = false",
    ]


def expectations_text(
    facts: FreezeFacts,
    *,
    input_shapes: Sequence[str] = (),
    inputs: str | None = None,
    eval_mode: bool = False,
    threads: int = 1,
    time_budget: float = 0.25,
) -> str:
    """The model's current behaviour as an expectations file, to commit and check later.

    Every attribute torch inlines must stay inlined, exactly the attributes it keeps may
    stay kept, the bytes it keeps are the limit, every pass that fires must fire as often,
    and (given sample inputs) the outputs must stay within ten times today's difference.

    Args:
        facts: one run's facts (:func:`.model_facts.gather_facts`).
        input_shapes, inputs: the sample inputs the numerics were measured on.
        eval_mode: the plan switched a training-mode module to eval mode.
        threads, time_budget: how the facts' measurement (if any) timed the forwards;
            with a measurement a ``[deployment]`` section is written
            (:func:`.deployment_rules.deployment_toml`).

    Returns:
        TOML text that :func:`.expectations.read_expectations` reads back.
    """
    plan = facts.plan
    verdicts = facts.explanation.attributes
    # Repeated blocks once (`layer1.0-2.conv1.weight`), exactly the paths they stand for.
    inlined = group_paths(
        [v.path for v in verdicts if v.status == "inlined" and v.kind != "submodule"]
    )
    kept = group_paths([v.path for v in verdicts if v.status == "kept"])
    lines = [
        f"# freezeview expectations for {Path(facts.model).name}: what torch.jit.freeze does",
        f"# to it today (torch {torch.__version__}). Commit this file and run",
        "#   freezeview check MODEL.pt --expect THIS.toml",
        "# in CI: an attribute that stops being inlined, a new kept attribute, more kept",
        "# bytes or a pass that stops firing fails the check with the line that caused it.",
        "",
        "[plan]",
        f"preserve = {_toml_list(plan.preserved_attrs)}",
        f"eval = {'true' if eval_mode else 'false'}",
        f"optimize_for_inference = {'true' if plan.optimize_for_inference else 'false'}",
        f"no_optimize = {'false' if plan.optimize_numerics else 'true'}",
    ]
    if tuple(plan.passes) != tuple(
        default_passes(plan.optimize_numerics, plan.optimize_for_inference)
    ):
        lines.append(f"passes = {_toml_list(plan.passes)}")
    lines += [
        "",
        "[attributes]",
        "# Each attribute listed here must stay inlined (glob patterns: * ? [...]). An",
        "# index range stands for each index: layer1.0-2.conv1.weight is layer1.0.conv1.weight,",
        "# layer1.1.conv1.weight and layer1.2.conv1.weight; {0-3,5} lists several runs.",
        f"inlined = {_toml_list(inlined)}",
        "# Only these may be kept as module attributes.",
        f"kept = {_toml_list(kept)}",
        *_written_lines(verdicts),
        "",
        "[limits]",
        f"max_kept_tensor_bytes = {facts.kept_bytes}",
        "",
        "[passes]",
        "# pass id = how many times it must change the graph, at least (0: never).",
        *(f"{name} = {times}" for name, times in sorted(facts.passes_fired.items())),
    ]
    numerics = facts.numerics
    if numerics is not None and not numerics.note and (input_shapes or inputs):
        lines += ["", "[numerics]"]
        if inputs:
            lines.append(f"inputs = {_toml_string(inputs)}")
        else:
            lines.append(f"input_shapes = {_toml_list(list(input_shapes))}")
        lines.append(f"max_abs = {_tolerance(numerics.max_abs)!r}")
        lines.append(f"max_rel = {_tolerance(numerics.max_rel)!r}")
    if facts.measurement is not None:
        # Latency and the round trip run the model: they need the inputs' section.
        lines += deployment_toml(
            facts.measurement,
            threads=threads,
            budget=time_budget,
            runs_model="[numerics]" in lines,
        )
    return "\n".join(lines) + "\n"
