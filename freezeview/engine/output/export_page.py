"""An export's ``index.html``: what the export wrote, handed to the review page.

:func:`index_html` gathers the pictures drawn (with the graphs each shows), the timeline
of steps, explain's verdicts and the source lines of the boxes drawn, and writes the page
(:mod:`.review_page`); :func:`inlined_source_texts` reads those lines while torch's
inlined graph is at hand.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import torch

from ..draw import Overlay
from ..freeze import Plan, Step
from ..graph import GraphSnapshot
from ..measure import Measurement, latency_cell, verdict_text
from ..reasons import Explanation
from .export_profile import RunFacts
from .export_values import ExportResult, StepSummary
from .profile_section import numbers_section, profile_section, step_time
from .review_page import PagePicture, PageStep, source_texts, write_review_page

__all__ = ["index_html", "inlined_source_texts"]


def index_html(
    path: Path,
    result: ExportResult,
    *,
    name: str,
    plan: Plan,
    before: GraphSnapshot,
    after: GraphSnapshot,
    changes: str,
    steps: Sequence[Step | StepSummary],
    fmt: str,
    ir_text: str,
    explanation: Explanation | None,
    texts: dict[str, str],
) -> Path:
    """Write the review page (:mod:`.review_page`) for what this export wrote to ``path``.

    Args:
        path: the page's file.
        result: the export so far (its pictures, steps, notes and measurement).
        name: the model's display name.
        plan: the plan the steps ran with.
        before: the inlined graph (snapshot).
        after: the frozen graph (snapshot).
        changes: the summary of the diff between them.
        steps: every step of the run (the timeline).
        fmt: the pictures' format.
        ir_text: the IR diff, before -> after.
        explanation: explain's verdicts (the attributes table), if any.
        texts: source line texts by ``file:line`` (:func:`inlined_source_texts`).
    """
    graphs = {"diff": (before, after), "after": (None, after), "before": (None, before)}
    facts = result.facts
    overlays = _overlays(facts, before, after)
    pictures = []
    for key in ("diff", "after", "before", "side-by-side"):
        for p in result.pictures:
            if p.name == key:
                old, new = graphs.get(p.name, (None, None))
                shown = overlays.get(p.name, ())
                pictures.append(PagePicture(p.name, p.title, p.result, new, old, overlays=shown))
    page_steps: list[PageStep] = []
    by_index = {e.step.index: e for e in result.steps}
    for step in steps:
        entry = by_index.get(step.index)
        picture_id = None
        if entry is not None and entry.picture is not None:
            picture_id = f"step-{step.index}"
            pictures.append(
                PagePicture(
                    picture_id,
                    entry.picture.title,
                    entry.picture.result,
                    entry.after,
                    entry.before,
                    kind="step",
                    step=step.index,
                    overlays=(facts.step_overlay(step.index, entry.after, entry.before),),
                )
            )
        diff_file = entry.diff_file if entry is not None else None
        page_steps.append(
            PageStep(
                step,
                entry.summary
                if entry is not None
                else ("changed" if step.changed else "no change"),
                diff_file.name if diff_file is not None else None,
                diff_file.read_text(encoding="utf-8") if diff_file is not None else "",
                picture_id,
                _latency(result.measurement, step.index),
                step_time(facts, step.index),
            )
        )
    summary = f"{before.node_count} nodes before, {after.node_count} after · {changes}"
    if result.measurement is not None and result.measurement.unfrozen is not None:
        summary += f" · {verdict_text(result.measurement)}"
    return write_review_page(
        path,
        name=name,
        plan=plan,
        summary=summary,
        pictures=pictures,
        steps=page_steps,
        explanation=explanation,
        ir_diff=ir_text,
        notes=result.notes,
        picture_format=fmt,
        texts=texts,
        sections=(profile_section(facts), numbers_section(facts, _named_boxes(pictures))),
    )


def _overlays(
    facts: RunFacts, before: GraphSnapshot, after: GraphSnapshot
) -> dict[str, tuple[Overlay | None, ...]]:
    """Per overall picture, the overlays its drawings were drawn with (as export drew)."""
    unfrozen, last = facts.profile_of(None), facts.last()
    on_before = facts.overlay(unfrozen, before)
    on_after = facts.overlay(last, after)
    return {
        "before": (on_before,),
        "after": (on_after,),
        "diff": (facts.overlay(last, after, ghosts=unfrozen, before=before),),
        "side-by-side": (on_before, on_after),
    }


def _named_boxes(pictures: Sequence[PagePicture]) -> dict[int, tuple[str, str]]:
    """Per step picture, its id and the key of the box outlined there (the node whose
    value first differs), for the page's "where the numbers move" links."""
    found: dict[int, tuple[str, str]] = {}
    for picture in pictures:
        overlay = picture.overlays[0] if picture.overlays else None
        if picture.step is None or overlay is None or not overlay.outlined:
            continue
        for drawing in picture.result.drawings:
            for key, box in drawing.nodes.items():
                if overlay.marks(box):
                    found[picture.step] = (picture.id, key)
    return found


def _latency(measurement: Measurement | None, index: int) -> str:
    """The timeline's latency for a step ("" when it was not timed)."""
    cell = latency_cell(measurement, index)
    return "" if cell == "-" else cell


def inlined_source_texts(inlined: torch._C.Graph, snapshot: GraphSnapshot) -> dict[str, str]:
    """Source line texts of the inlined forward's nodes, by ``file:line``.

    ``snapshot`` is the snapshot of ``inlined``: through it, one node per line is read
    (:func:`source_texts`), a few hundred reads on a 70k-node transformer. Read while
    the graph exists, for every box any picture may draw (the pictures are drawn after
    torch's graphs are gone).
    """
    wanted = {
        str(node.source)
        for node in snapshot.nodes_in_order()
        if node.source is not None and not node.source.text
    }
    return source_texts(inlined, wanted, snapshot)
