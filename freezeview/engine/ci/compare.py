"""``freezeview compare``: what freezing does differently to two versions of a model.

Both models are frozen with the same plan (:mod:`.model_facts`: statuses from torch's own
freeze) and set side by side: attributes whose status changed (with the new reasons and
source lines), attributes added or removed (paths matched by name; a renamed module shows
as removed + added, and similar names are paired as a hint), bytes of tensors kept as
attributes, node kinds of the frozen graphs, passes that fire in one and not the other,
and the numerics of both when sample inputs are given. A *regression* is an attribute
that went from inlined to kept, more kept bytes, or a pass that stopped firing.
"""

from __future__ import annotations

import difflib
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from ..freeze import Plan
from ..graph import HOUSEKEEPING
from ..measure import Change, compare_latency, format_ms
from ..plumbing import collector_paused, plural
from ..reasons import AttributeVerdict, Reason
from .compare_fork import gather_pair
from .model_facts import FreezeFacts, as_loaded

__all__ = ["Comparison", "StatusChange", "compare", "render_markdown", "render_text"]


@dataclass(frozen=True)
class StatusChange:
    """An attribute freezing treats differently in the new model."""

    path: str
    old: str
    new: str
    reasons: tuple[Reason, ...]

    @property
    def regression(self) -> bool:
        """Inlined before, kept now: a weight that became a runtime attribute."""
        return self.old == "inlined" and self.new == "kept"

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``compare --json``."""
        return {
            "path": self.path,
            "old": self.old,
            "new": self.new,
            "regression": self.regression,
            "reasons": [r.to_json() for r in self.reasons],
        }


@dataclass
class Comparison:
    """Everything that differs between freezing two models with one plan."""

    old: FreezeFacts
    new: FreezeFacts
    changes: list[StatusChange]
    added: list[AttributeVerdict]
    removed: list[AttributeVerdict]
    renamed_hints: list[tuple[str, str]]
    seconds: float = 0.0
    notes: list[str] = field(default_factory=list)

    @property
    def kind_changes(self) -> dict[str, tuple[int, int]]:
        """Node kinds whose count in the frozen graphs differs: kind -> (old, new)."""
        kinds = self.old.node_kinds.keys() | self.new.node_kinds.keys()
        return {
            k: (self.old.node_kinds.get(k, 0), self.new.node_kinds.get(k, 0))
            for k in sorted(kinds)
            if self.old.node_kinds.get(k, 0) != self.new.node_kinds.get(k, 0)
        }

    @property
    def pass_changes(self) -> dict[str, tuple[int, int]]:
        """Passes that fire a different number of times: pass id -> (old, new)."""
        names = self.old.passes_fired.keys() | self.new.passes_fired.keys()
        return {
            n: (self.old.passes_fired.get(n, 0), self.new.passes_fired.get(n, 0))
            for n in sorted(names)
            if self.old.passes_fired.get(n, 0) != self.new.passes_fired.get(n, 0)
        }

    @property
    def regressions(self) -> list[str]:
        """One sentence per regression (``--fail-on-regression`` exits 1 on any)."""
        found = [
            f"{c.path} was inlined and is now kept" + _because(c.reasons)
            for c in self.changes
            if c.regression
        ]
        if self.new.kept_bytes > self.old.kept_bytes:
            found.append(
                f"tensors kept as attributes grew from {self.old.kept_bytes:,} to "
                f"{self.new.kept_bytes:,} bytes"
            )
        for name, (old, new) in self.pass_changes.items():
            if old and not new:
                found.append(f"pass {name} fired {old}x and no longer fires")
        return found

    @property
    def latency_change(self) -> Change | None:
        """The new frozen forward against the old one (None unless both were timed)."""
        old = self.old.measurement.frozen if self.old.measurement is not None else None
        new = self.new.measurement.frozen if self.new.measurement is not None else None
        if old is None or new is None:
            return None
        return compare_latency(old, new)

    def latency_lines(self) -> list[str]:
        """How fast each frozen forward is, and the change (empty when not timed).

        Shown, never counted as a regression: the two models are timed one after the
        other on a machine that may be busy; ``check``'s ``max_latency_ratio`` is the
        gate for latency.
        """
        change = self.latency_change
        if change is None:
            return []
        lines = []
        threads = 1
        for label, facts in (("old", self.old), ("new", self.new)):
            m = facts.measurement
            assert m is not None and m.frozen is not None
            threads = m.threads
            overall = m.overall
            against = f", {overall.ratio:.2f}x the unfrozen one" if overall is not None else ""
            named = [m.titles.get(i, m.names.get(i, "?")) for i, _ in m.deciding_steps()]
            made = f" (made by: {', '.join(named)})" if named else ""
            lines.append(f"frozen forward ({label}): {format_ms(m.frozen.median)}{against}{made}")
        verdict = "the same, inside the noise" if change.same else change.text()
        lines.append(f"frozen forward, new against old: {verdict} ({plural(threads, 'thread')})")
        return lines

    @property
    def identical(self) -> bool:
        """Nothing differs."""
        return not (
            self.changes
            or self.added
            or self.removed
            or self.kind_changes
            or self.pass_changes
            or self.old.kept_bytes != self.new.kept_bytes
        )

    def to_json(self) -> dict[str, Any]:
        """The ``compare --json`` document."""

        def numerics(facts: FreezeFacts) -> Any:
            return facts.numerics.to_json() if facts.numerics is not None else None

        return {
            "old": self.old.model,
            "new": self.new.model,
            "torch_version": torch.__version__,
            "plan": {
                "preserved_attrs": list(self.new.plan.preserved_attrs),
                "passes": list(self.new.plan.passes),
            },
            "identical": self.identical,
            "regressions": self.regressions,
            "status_changes": [c.to_json() for c in self.changes],
            "added": [{"path": v.path, "status": v.status} for v in self.added],
            "removed": [{"path": v.path, "status": v.status} for v in self.removed],
            "renamed_hints": [{"removed": a, "added": b} for a, b in self.renamed_hints],
            "kept_tensor_bytes": {"old": self.old.kept_bytes, "new": self.new.kept_bytes},
            "node_kinds": {k: {"old": a, "new": b} for k, (a, b) in self.kind_changes.items()},
            "passes_fired": {k: {"old": a, "new": b} for k, (a, b) in self.pass_changes.items()},
            "numerics": {"old": numerics(self.old), "new": numerics(self.new)},
            "latency_ms": self._latency_json(),
            "seconds": round(self.seconds, 3),
        }

    def _latency_json(self) -> dict[str, Any] | None:
        change = self.latency_change
        if change is None:
            return None
        assert self.old.measurement is not None and self.new.measurement is not None
        return {
            "old": self.old.measurement.latency_json(),
            "new": self.new.measurement.latency_json(),
            "ratio": round(change.ratio, 6),
            "inside_noise": change.same,
        }


def _shown(path: str, *statuses: str, show_all: bool) -> bool:
    """Whether a row is shown: the ``training`` flags and hook placeholders every module
    carries are hidden, as explain hides them, unless one is kept (then it is news)."""
    return show_all or path.rsplit(".", 1)[-1] not in HOUSEKEEPING or "kept" in statuses


def _hidden_note(comparison: Comparison, show_all: bool) -> str | None:
    c = comparison
    rows: list[tuple[str, ...]] = [(ch.path, ch.old, ch.new) for ch in c.changes]
    rows += [(v.path, v.status) for v in (*c.added, *c.removed)]
    hidden = sum(not _shown(row[0], *row[1:], show_all=show_all) for row in rows)
    if not hidden:
        return None
    rows_word = "row" if hidden == 1 else "rows"
    return (
        f"{hidden} housekeeping {rows_word} hidden: training flags and hook placeholders; "
        "--all shows them"
    )


def _because(reasons: Sequence[Reason]) -> str:
    located = next((r for r in reasons if r.source), reasons[0] if reasons else None)
    return f": {located.one_line()}" if located is not None else ""


def _hints(removed: list[str], added: list[str]) -> list[tuple[str, str]]:
    """Pairs of a removed and an added path that look like one renamed module's."""
    pairs: list[tuple[str, str]] = []
    taken: set[str] = set()
    for old in removed:
        close = difflib.get_close_matches(
            old, [a for a in added if a not in taken], n=1, cutoff=0.6
        )
        if close:
            pairs.append((old, close[0]))
            taken.add(close[0])
    return pairs


def compare(
    old: Any,
    new: Any,
    plan: Plan | None = None,
    *,
    inputs: Sequence[Any] | None = None,
    eval_mode: bool = False,
    measure: tuple[int, float] | tuple[int, float, bool] | None = None,
) -> Comparison:
    """Freeze two models with one plan and say what differs.

    Args:
        old, new: ``.pt`` paths, ScriptModules or :class:`LoadedModel` s.
        plan: the plan for both (default: torch's, nothing preserved).
        inputs: sample inputs for both models' numerics, or None.
        eval_mode: switch training-mode modules to eval mode.
        measure: ``(threads, budget)``, or ``(threads, budget, autograd)``: with
            ``inputs``, also time both frozen forwards (one model after the other, never
            at once; under inference_mode unless ``autograd``).

    Returns:
        A :class:`Comparison`.

    Raises:
        BadInputError: a model cannot be loaded.
        PlanError: torch cannot freeze one of them as asked.

    Example::

        diff = compare("model-v1.pt", "model-v2.pt")
        for sentence in diff.regressions:
            print(sentence)
    """
    start = time.perf_counter()
    plan = plan or Plan.default()
    loaded = [as_loaded(m, eval_mode) for m in (old, new)]
    with collector_paused():
        # torch's statuses first (the new model's by a forked child when a CPU is
        # idle); the new model's reasons only if a status changed.
        timed = measure if inputs is not None else None
        facts = list(gather_pair(loaded[0], loaded[1], plan, inputs, measure=timed))
        statuses = {v.path: v.status for v in facts[0].explanation.attributes}
        if any(statuses.get(v.path, v.status) != v.status for v in facts[1].explanation.attributes):
            facts[1] = facts[1].with_reasons()
    before = {v.path: v for v in facts[0].explanation.attributes}
    after = {v.path: v for v in facts[1].explanation.attributes}
    changes = [
        StatusChange(path, before[path].status, verdict.status, verdict.reasons)
        for path, verdict in after.items()
        if path in before and before[path].status != verdict.status
    ]
    added = [v for p, v in after.items() if p not in before]
    removed = [v for p, v in before.items() if p not in after]
    return Comparison(
        old=facts[0],
        new=facts[1],
        changes=changes,
        added=added,
        removed=removed,
        renamed_hints=_hints([v.path for v in removed], [v.path for v in added]),
        seconds=time.perf_counter() - start,
        notes=[n for m in loaded for n in m.notes],
    )


def render_markdown(comparison: Comparison, *, show_all: bool = False) -> str:
    """A pull-request comment: what freezing does differently, regressions first.

    ``show_all`` also lists the housekeeping rows (``training``, hook placeholders)."""
    c = comparison
    old, new = Path(c.old.model).name, Path(c.new.model).name
    lines = [f"### freezeview compare: `{old}` → `{new}`", ""]
    if c.identical:
        lines.append("Freezing treats both models the same. ✅")
        return "\n".join(lines) + "\n"
    if c.regressions:
        lines.append("**Regressions**")
        lines.append("")
        lines.extend(f"- ❌ {r}" for r in c.regressions)
        lines.append("")
    lines.append(f"Tensors kept as attributes: {c.old.kept_bytes:,} → {c.new.kept_bytes:,} bytes")
    lines.append("")
    if c.changes:
        lines += ["| attribute | before | after | why (after) |", "|---|---|---|---|"]
        for change in c.changes:
            if not _shown(change.path, change.old, change.new, show_all=show_all):
                continue
            why = _because(change.reasons).removeprefix(": ").replace("|", "\\|")
            lines.append(f"| `{change.path}` | {change.old} | {change.new} | {why} |")
        lines.append("")
    added = [v for v in c.added if _shown(v.path, v.status, show_all=show_all)]
    removed = [v for v in c.removed if _shown(v.path, v.status, show_all=show_all)]
    if added or removed:
        lines.append(f"Attributes added: {len(added)}, removed: {len(removed)}")
        for a, b in c.renamed_hints:
            if _shown(a, show_all=show_all):
                lines.append(f"- `{a}` → `{b}`? (similar names)")
        lines.append("")
    if c.pass_changes:
        lines.append(
            "Passes fired (before → after): "
            + ", ".join(f"`{n}` {a}→{b}" for n, (a, b) in c.pass_changes.items())
        )
        lines.append("")
    if c.kind_changes:
        lines.append(
            "Frozen graph node kinds (before → after): "
            + ", ".join(f"`{k}` {a}→{b}" for k, (a, b) in c.kind_changes.items())
        )
        lines.append("")
    if c.old.numerics is not None or c.new.numerics is not None:

        def num(f: FreezeFacts) -> str:
            n = f.numerics
            return "not compared" if n is None else f"max abs {n.max_abs:.3g}"

        lines.append(f"Numerics of the frozen models: {num(c.old)} → {num(c.new)}")
        lines.append("")
    if c.latency_lines():
        lines.append("Latency: " + "; ".join(c.latency_lines()))
        lines.append("")
    note = _hidden_note(c, show_all)
    if note:
        lines.append(f"<sub>{note}</sub>")
    return "\n".join(lines).rstrip() + "\n"


def render_text(comparison: Comparison, *, show_all: bool = False) -> str:
    """Plain text for the terminal; ``show_all`` also lists the housekeeping rows."""
    c = comparison
    lines = [f"freezeview compare: {c.old.model} -> {c.new.model} (torch {torch.__version__})"]
    if c.identical:
        lines.append("freezing treats both models the same.")
    for change in c.changes:
        if not _shown(change.path, change.old, change.new, show_all=show_all):
            continue
        mark = "REGRESSION " if change.regression else ""
        lines.append(
            f"  {mark}{change.path}: {change.old} -> {change.new}{_because(change.reasons)}"
        )
    for verdict in c.added:
        if _shown(verdict.path, verdict.status, show_all=show_all):
            lines.append(f"  added {verdict.path} ({verdict.status})")
    for verdict in c.removed:
        if _shown(verdict.path, verdict.status, show_all=show_all):
            lines.append(f"  removed {verdict.path} (was {verdict.status})")
    for a, b in c.renamed_hints:
        if _shown(a, show_all=show_all):
            lines.append(f"  hint: {a} -> {b}? (similar names: a renamed module?)")
    lines.append(f"  kept tensor bytes: {c.old.kept_bytes:,} -> {c.new.kept_bytes:,}")
    for name, (fired_old, fired_new) in c.pass_changes.items():
        lines.append(f"  pass {name}: fired {fired_old}x -> {fired_new}x")
    for kind, (count_old, count_new) in c.kind_changes.items():
        lines.append(f"  {kind}: {count_old} -> {count_new} nodes")
    for label, facts in (("old", c.old), ("new", c.new)):
        if facts.numerics is not None:
            n = facts.numerics
            lines.append(f"  numerics ({label}): max abs {n.max_abs:.3g}, max rel {n.max_rel:.3g}")
    lines.extend(f"  {line}" for line in c.latency_lines())
    note = _hidden_note(c, show_all)
    if note:
        lines.append(f"  ({note})")
    regressions = c.regressions
    many = "regression" if len(regressions) == 1 else "regressions"
    lines.append(f"{len(regressions)} {many}:" if regressions else "no regression.")
    lines.extend(f"  {sentence}" for sentence in regressions)
    return "\n".join(lines) + "\n"
