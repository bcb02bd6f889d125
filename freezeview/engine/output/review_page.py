"""``index.html``: the interactive review page of an export.

One self-contained file (it works from ``file://`` with no network): every picture sits in
a ``<template>`` until it is shown, so a page of twenty 2,000-box pictures opens at once;
a viewer pans and zooms it (``page/review.js``, freezeview's own); clicking a box shows its
IR line, module, source line and text, what the step did to it and, for an attribute, its
status and reasons; a search box finds boxes; a timeline steps through the freeze; a table
lists every attribute. What the script needs travels as one JSON document keyed by the
SVG elements' ids (the DOT node ids freezeview sets).
"""

from __future__ import annotations

import bisect
import html
import json
import os
import re
from collections.abc import Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

import torch

from ..draw import Overlay, RenderResult
from ..freeze import Plan, Step
from ..graph import GraphSnapshot, NodeSnapshot, parse_source_range
from ..plumbing import atomic, plural
from ..reasons import WRITTEN_HELP, Explanation, written_warning
from .export_values import StepSummary

__all__ = [
    "PagePicture",
    "PageStep",
    "box_facts",
    "review_page",
    "review_page_parts",
    "source_texts",
    "write_review_page",
]

_SELF_VALUE = re.compile(r"%self\.([\w.]+?)(?:\.\d+)?\b(?![\w.])")
_MAX_DIFF_LINES = 400


@dataclass(frozen=True)
class PagePicture:
    """A picture of the page and the graphs it shows.

    Attributes:
        id: the picture's key in the page (``diff``, ``step-5``).
        title: its caption.
        result: what the renderer wrote (its file, format and drawings).
        before: the graph before (for removed boxes' facts), if any.
        after: the graph drawn.
        kind: ``overall`` or ``step``.
        step: the step index, for step pictures.
        overlays: per drawing of the picture, the times and marks drawn over its boxes
            (``export --profile``; a box's details then say its time).
    """

    id: str
    title: str
    result: RenderResult
    after: GraphSnapshot | None
    before: GraphSnapshot | None = None
    kind: str = "overall"
    step: int | None = None
    overlays: tuple[Overlay | None, ...] = ()


@dataclass(frozen=True)
class PageStep:
    """One step of the timeline (the step, or what the page shows of it)."""

    step: Step | StepSummary
    summary: str
    diff_name: str | None
    diff_text: str
    picture: str | None
    #: The step's forward latency against the unfrozen module ("" when not timed).
    latency: str = ""
    #: What the step did to the forward's per-node time ("" when not profiled).
    time: str = ""


def _node(snapshot: GraphSnapshot | None, node_id: int) -> NodeSnapshot | None:
    if snapshot is None:
        return None
    try:
        return snapshot.node(node_id)
    except (IndexError, KeyError):
        return None


def source_texts(
    graph: torch._C.Graph,
    wanted: Collection[str] | None = None,
    snapshot: GraphSnapshot | None = None,
) -> dict[str, str]:
    """``"file:line" -> the line's text`` for the nodes of ``graph`` (nested blocks too).

    The text comes from the model archive's debug information (TorchScript keeps the
    source it compiled), so it is there when the recorded file is not. Snapshots, read
    from torch's printout, only know ``file:line``; the page takes the text from here.

    Args:
        graph: the graph whose nodes' source ranges are read.
        wanted: only these ``file:line`` keys (those of the boxes drawn); None: every
            line of the graph.
        snapshot: a snapshot of ``graph`` (its node ids are the graph's pre-order): with
            ``wanted``, only one node per key is read, found through the snapshot,
            instead of reading every node's source range (slow on a large graph).
            Keys the snapshot does not place are looked for in the whole graph.
    """
    if wanted is not None and not wanted:
        return {}
    texts: dict[str, str] = {}
    todo = set(wanted) if wanted is not None else None
    if todo is not None and snapshot is not None:
        texts = _texts_by_snapshot(graph, todo, snapshot)
        todo -= texts.keys()
        if not todo:
            return texts
    stack = [graph.block()]
    while stack:
        for node in stack.pop().nodes():
            stack.extend(node.blocks())
            found = parse_source_range(node.sourceRange())
            if found is not None and found.text:
                key = str(found)
                if todo is None or key in todo:
                    texts.setdefault(key, found.text)
    return texts


def _texts_by_snapshot(
    graph: torch._C.Graph, wanted: set[str], snapshot: GraphSnapshot
) -> dict[str, str]:
    """The texts of ``wanted`` keys, each read from one node ``snapshot`` places there."""
    first: dict[int, str] = {}  # node id -> the key it stands for
    seen: set[str] = set()
    for shown in snapshot.nodes_in_order():
        if shown.source is not None:
            key = str(shown.source)
            if key in wanted and key not in seen:
                seen.add(key)
                first[shown.id] = key
    ids = sorted(first)
    found: dict[int, torch._C.Node] = {}

    # `shown`: the snapshot's block (a BlockSnapshot, which the graph package does not export).
    def walk(block: torch._C.Block, shown: Any, end: int) -> None:
        # Pre-order: a node's subtree holds the ids up to its next sibling's.
        nodes = shown.nodes
        for k, (node, snap) in enumerate(zip(block.nodes(), nodes, strict=False)):
            if snap.id in first:
                found[snap.id] = node
            if snap.blocks:
                stop = nodes[k + 1].id if k + 1 < len(nodes) else end
                inside = bisect.bisect_right(ids, snap.id)
                if inside < len(ids) and ids[inside] < stop:
                    subs = list(node.blocks())
                    for j, sub in enumerate(snap.blocks):
                        if j < len(subs):
                            walk(subs[j], sub, stop)

    walk(graph.block(), snapshot.block, snapshot.node_count)
    texts: dict[str, str] = {}
    for node_id, torch_node in found.items():
        if torch_node.kind() != snapshot.node(node_id).kind:
            return {}  # not the graph the snapshot was taken of: read them all
        source = parse_source_range(torch_node.sourceRange())
        key = first[node_id]
        if source is not None and source.text and str(source) == key:
            texts[key] = source.text
    return texts


def _box_node(picture: PagePicture, box: Any) -> NodeSnapshot | None:
    """The IR node a box of ``picture`` stands for (its first), if it stands for one."""
    graph = picture.before if box.role == "ghost" else picture.after
    return _node(graph, box.node_ids[0]) if box.node_ids else None


def box_facts(
    picture: PagePicture, texts: Mapping[str, str] | None = None
) -> dict[str, dict[str, Any]]:
    """What the page shows for each box of ``picture``, keyed by its SVG element id.

    Args:
        picture: the picture and its graphs.
        texts: source line texts by ``file:line`` (:func:`source_texts`).
    """
    texts = texts or {}
    boxes: dict[str, dict[str, Any]] = {}
    overlays = picture.overlays
    for index, drawing in enumerate(picture.result.drawings):
        overlay = overlays[index] if index < len(overlays) else None
        for key, box in drawing.nodes.items():
            lines = [line for line in box.tooltip.splitlines() if line.strip()]
            facts: dict[str, Any] = {
                "role": box.role,
                "status": box.status,
                "title": box.title,
            }
            if box.kept:
                facts["kept"] = True
            if box.rows:
                facts["rows"] = list(box.rows)
            node = _box_node(picture, box)
            if node is not None and box.role != "scope":
                facts["ir"] = node.line
                if node.scope:
                    facts["scope"] = node.scope
                if node.source is not None:
                    facts["source"] = str(node.source)
                    text = node.source.text or texts.get(str(node.source))
                    if text:
                        facts["text"] = text
            elif lines:
                facts["ir"] = lines[0]
            if box.role == "scope":
                facts["scope"] = box.title
                counts = ", ".join(f"{n} {k}" for k, n in sorted(box.counts.items()) if n)
                facts["holds"] = counts or plural(len(box.node_ids), "op")
            if box.role == "attribute":
                # Drawn as the GetAttr chain from the graph's module: `self.layer1.0.bn`.
                facts["attribute"] = box.title.removeprefix("self.")
            change = [line for line in lines[1:] if not line.startswith("/") and ":" in line]
            if box.status != "same":
                facts["change"] = "; ".join([box.status, *change[-2:]])
            reads = sorted(set(_SELF_VALUE.findall(facts.get("ir", ""))))
            if reads:
                facts["reads"] = reads
            if overlay is not None:
                timed = overlay.time_text(box) if overlay.heat else ""
                if timed:
                    facts["time"] = timed
                if overlay.marks(box):
                    facts["moved"] = "the first node whose value differs after this step"
            boxes[key] = facts
    return boxes


def _asset(name: str) -> str:
    return resources.files("freezeview.engine.output").joinpath("page", name).read_text("utf-8")


def _json_for_script(value: Any) -> str:
    # Inside <script type="application/json">: nothing may close the element early.
    return json.dumps(value, separators=(",", ":")).replace("</", "<\\/")


def _svg_text(result: RenderResult) -> str:
    text = result.path.read_text("utf-8")
    return re.sub(r"<\?xml[^>]*\?>|<!DOCTYPE[^>]*>|<!--.*?-->", "", text, flags=re.S).strip()


def _template(picture: PagePicture) -> str:
    if picture.result.format == "svg":
        body = _svg_text(picture.result)
    elif picture.result.format == "png":
        import base64

        encoded = base64.b64encode(picture.result.path.read_bytes()).decode()
        body = f'<img alt="{html.escape(picture.title)}" src="data:image/png;base64,{encoded}">'
    else:
        name = html.escape(picture.result.path.name)
        body = f'<p id="empty">DOT source: <a href="{name}">{name}</a> (install Graphviz).</p>'
    return f'<template id="tpl-{picture.id}">{body}</template>'


# Where str.splitlines() ends a line.
_LINE_END = re.compile("\r\n|[\n\r\x0b\x0c\x1c\x1d\x1e\x85\u2028\u2029]")


def _first_lines(text: str, count: int) -> tuple[list[str], int]:
    """``text.splitlines()[:count]`` and how many lines follow them, without splitting
    the rest (a 48-layer transformer's IR diff has 280k lines; the page shows 400)."""
    ends = _LINE_END.finditer(text)
    cut = len(text)
    for seen, end in enumerate(ends, 1):
        if seen == count:
            cut = end.end()
            break
    rest = text[cut:]
    more = sum(1 for _ in _LINE_END.finditer(rest))
    if rest and not _LINE_END.fullmatch(rest[-1]):
        more += 1  # a last line with no line end
    return text[:cut].splitlines(), more


def _diff_html(text: str) -> str:
    if not text:
        return '<p class="meta">The IR printout did not change.</p>'
    shown, more = _first_lines(text, _MAX_DIFF_LINES)
    out = []
    for line in shown:
        cls = {"+": "add", "-": "del", "@": "hunk"}.get(line[:1], "")
        esc = html.escape(line)
        out.append(f'<span class="{cls}">{esc}</span>' if cls else esc)
    tail = f"\n… {more} more lines in the file" if more > 0 else ""
    return '<pre class="diff">' + "\n".join(out) + html.escape(tail) + "</pre>"


def _timeline_item(entry: PageStep) -> str:
    step = entry.step
    unchanged = not step.changed
    # Listed, dimmed: their notes say why the pass did not fire (n and p pass them by).
    classes = "unchanged" if unchanged else ""
    numerics = ""
    if step.numerics is not None:
        numerics = f" · max abs {step.numerics.max_abs:.2g}"
    if entry.latency:
        numerics += f" · latency {entry.latency}"
    # The step's first note repeats its counts, which the line above shows already.
    notes = "; ".join(n for n in step.notes if not n.startswith(entry.summary))
    picture = f' data-picture="{entry.picture}"' if entry.picture else ""
    counts = html.escape(entry.summary)
    return (
        f'<li class="{classes}" data-step="{step.index}"{picture}>'
        f"<b>{step.index:02d}</b> {html.escape(step.title)}"
        f'<div class="counts">{counts} · {step.seconds * 1000:.0f} ms{numerics}</div>'
        + (f'<div class="time">{html.escape(entry.time)}</div>' if entry.time else "")
        + (f'<div class="notes">{html.escape(notes)}</div>' if notes else "")
        + "</li>"
    )


def _verdicts(explanation: Explanation) -> list[Any]:
    # Kept first, then the written constants (folded, yet written: a warning), then the rest.
    order = {"kept": 0, "inlined": 2, "dropped": 3}
    return sorted(
        explanation.attributes,
        key=lambda v: (1 if "written-constant" in v.codes else order[v.status], v.path),
    )


def _written_banner(explanation: Explanation | None) -> str:
    """The header's warning about folded attributes the frozen graph still writes
    (``written-constant``): each one with its writing node and source line."""
    writes = explanation.written_constants() if explanation is not None else []
    if not writes:
        return ""
    esc = html.escape
    count = len(dict.fromkeys(w.path for w in writes))
    items = "".join(
        f'<li><a href="#" data-path="{esc(w.path)}"><code>{esc(w.path)}</code></a> written by '
        f"{esc(w.where())}"
        + (f' <code class="src">{esc(w.reason.source_text)}</code>' if w.reason.source_text else "")
        + "</li>"
        for w in writes
    )
    return (
        f'<div class="written-warning" id="written-warning"><b>⚠ warning:</b> '
        f"{esc(written_warning(count))}.<ul>{items}</ul>"
        f'<span class="meta">What to change in the model: {esc(WRITTEN_HELP)}</span></div>'
    )


def _attribute_table(explanation: Explanation | None) -> str:
    if explanation is None:
        return '<p class="meta">freezeview could not explain this model.</p>'
    rows = []
    for verdict in _verdicts(explanation):
        first = verdict.reasons[0] if verdict.reasons else None
        why = f"{first.code}: {first.message}" if first else ""
        written = "written-constant" in verdict.codes
        mark = ' <span class="badge written">⚠ written</span>' if written else ""
        rows.append(
            f'<tr data-path="{html.escape(verdict.path)}"'
            + (' class="written"' if written else "")
            + f"><td>{html.escape(verdict.path)}</td>"
            f'<td><span class="badge {verdict.status}">{verdict.status}</span>{mark}</td>'
            f'<td class="meta">{html.escape(why[:160])}</td></tr>'
        )
    return '<table id="attr-table">' + "".join(rows) + "</table>"


def _attribute_data(explanation: Explanation | None) -> Iterator[dict[str, Any]]:
    for verdict in _verdicts(explanation) if explanation is not None else ():
        yield {
            "path": verdict.path,
            "kind": verdict.kind,
            "type": verdict.type,
            "status": verdict.status,
            "reasons": [r.to_json() for r in verdict.reasons],
        }


def _page_data(
    pictures: Sequence[PagePicture],
    explanation: Explanation | None,
    texts: Mapping[str, str] | None,
) -> Iterator[str]:
    """The page's JSON document, a value at a time: the same text as one ``json.dumps``
    of it, without the whole document (a 2,048-block stack's is 13 MB) and the facts of
    every box of every picture in memory at once."""
    yield '<script type="application/json" id="fv-data">{"pictures":'
    yield _json_for_script(
        [
            {
                "id": p.id,
                "title": p.title,
                "file": p.result.path.name,
                "kind": p.kind,
                "step": p.step,
            }
            for p in pictures
        ]
    )
    yield ',"start":' + _json_for_script(pictures[0].id if pictures else None)
    yield ',"attributes":['
    for i, row in enumerate(_attribute_data(explanation)):
        yield ("," if i else "") + _json_for_script(row)
    yield '],"boxes":{'
    drawn = [p for p in pictures if p.result.format == "svg"]
    for i, picture in enumerate(drawn):
        key = _json_for_script(picture.id)
        yield ("," if i else "") + key + ":" + _json_for_script(box_facts(picture, texts))
    yield "}}</script>"


def _plan_text(plan: Plan) -> str:
    data: Mapping[str, Any] = plan.to_json()
    preserved = ", ".join(data["preserved_attrs"]) or "nothing (forward only)"
    passes = ", ".join(data["passes"]) or "none"
    extra = " · optimize_for_inference" if data["optimize_for_inference"] else ""
    numerics = "" if data["optimize_numerics"] else " · optimize_numerics=False"
    return f"preserved: {preserved} · passes: {passes}{extra}{numerics}"


def review_page(
    *,
    name: str,
    plan: Plan,
    summary: str,
    pictures: Sequence[PagePicture],
    steps: Sequence[PageStep],
    explanation: Explanation | None,
    ir_diff: str,
    notes: Sequence[str] = (),
    picture_format: str = "svg",
    texts: Mapping[str, str] | None = None,
    sections: Sequence[str] = (),
) -> str:
    """The whole ``index.html`` (:func:`review_page_parts` joined by newlines).

    Args:
        name: the model's name.
        plan: the plan that was exported.
        summary: one line on the graph before and after.
        pictures: every picture, overall ones first.
        steps: every step of the freeze, for the timeline.
        explanation: the verdicts (the attributes table, the details of attribute boxes).
        ir_diff: the overall IR diff.
        notes: sentences for the user (fallbacks taken while drawing).
        picture_format: ``svg``, ``png`` or ``dot``.
        texts: source line texts by ``file:line`` (:func:`source_texts`).
        sections: HTML sections for the header's end (the time per node, where the
            numbers move: :mod:`.profile_section`).

    Returns:
        The page's HTML text.
    """
    return "\n".join(
        part if isinstance(part, str) else "".join(part)
        for part in review_page_parts(
            name=name,
            plan=plan,
            summary=summary,
            pictures=pictures,
            steps=steps,
            explanation=explanation,
            ir_diff=ir_diff,
            notes=notes,
            picture_format=picture_format,
            texts=texts,
            sections=sections,
        )
    )


def write_review_page(path: str | os.PathLike[str], **page: Any) -> Path:
    """Write :func:`review_page` (``page``: its arguments) to ``path`` atomically, a part
    at a time: the same bytes without the whole page (and its UTF-8 copy) in memory."""
    target = Path(path)
    with atomic.atomic_path(target) as tmp, open(tmp, "w", encoding="utf-8") as out:
        for i, part in enumerate(review_page_parts(**page)):
            if i:
                out.write("\n")
            if isinstance(part, str):
                out.write(part)
            else:
                out.writelines(part)
    return target


def review_page_parts(
    *,
    name: str,
    plan: Plan,
    summary: str,
    pictures: Sequence[PagePicture],
    steps: Sequence[PageStep],
    explanation: Explanation | None,
    ir_diff: str,
    notes: Sequence[str] = (),
    picture_format: str = "svg",
    texts: Mapping[str, str] | None = None,
    sections: Sequence[str] = (),
) -> Iterator[str | Iterator[str]]:
    """The lines of :func:`review_page`'s HTML, in order (each part without its newline);
    a part that is an iterator is one line given a piece at a time."""
    options = "".join(f'<option value="{p.id}">{html.escape(p.title)}</option>' for p in pictures)
    esc = html.escape
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>freezeview: {esc(name)}</title>",
        f"<style>{_asset('review.css')}</style></head><body>",
        "<header>",
        f"<h1>What torch.jit.freeze did to {esc(name)}</h1>",
        f'<p class="meta">torch {esc(torch.__version__)} · {len(steps)} steps · {esc(summary)}</p>',
        f'<p class="meta">{esc(_plan_text(plan))}</p>',
        '<p class="meta legend">'
        '<span style="background:#c9f2cf;border-color:#1a7f37">added</span>'
        '<span style="background:#ffe3a3;border-color:#b7791f">changed</span>'
        '<span style="background:#ffe1e1;border-color:#cf222e;border-style:dashed">removed</span>'
        '<span style="background:#eadcff;border-color:#6d28d9">kept attribute</span>'
        " Drag to pan, wheel or <kbd>+</kbd>/<kbd>-</kbd> to zoom, <kbd>0</kbd> fits, "
        "<kbd>n</kbd>/<kbd>p</kbd> step, <kbd>/</kbd> searches; click a box for its details.</p>",
        *(f'<p class="note">{esc(n)}</p>' for n in notes),
        _written_banner(explanation),
        *(section for section in sections if section),
        "</header>",
        '<div id="layout">',
        '<nav id="sidebar"><div class="tabs">'
        '<button class="active" data-tab="steps-tab">Steps</button>'
        '<button data-tab="attrs-tab">Attributes</button></div>',
        '<section class="tab" id="steps-tab">',
        '<label class="meta"><input type="checkbox" id="show-unchanged"> '
        "n and p stop at steps that changed nothing too</label>",
        '<ol id="timeline">' + "".join(_timeline_item(s) for s in steps) + "</ol></section>",
        '<section class="tab" id="attrs-tab" hidden>',
        '<input id="attr-filter" placeholder="filter attributes (path, status, reason)">',
        _attribute_table(explanation),
        "</section></nav>",
        '<section id="stage"><div id="toolbar">',
        f'<select id="picture-select" aria-label="picture">{options}</select>',
        '<button id="prev" title="previous changed step (p)">◀</button>',
        '<button id="next" title="next changed step (n)">▶</button>',
        '<span class="search"><input id="search" placeholder="search kind, value, attribute, '
        'file:line (/)"><span id="search-count" class="meta"></span></span>',
        '<button id="zoom-out" title="zoom out (-)">&minus;</button>',
        '<button id="zoom-in" title="zoom in (+)">+</button>',
        '<button id="fit" title="fit (0)">fit</button>',
        '<a id="picture-link" class="meta" href="#"></a>',
        '</div><div id="viewport"><div id="canvas"></div></div></section>',
        '<aside id="details"><div id="details-body"><p class="meta">Click a box in the '
        "picture, or an attribute in the table, for its details.</p></div></aside>",
        "</div>",
        '<section class="diffs"><details><summary>IR diff, before → after '
        '(<a href="ir.diff">ir.diff</a>)</summary>' + _diff_html(ir_diff) + "</details>",
    ]
    for entry in steps:
        if entry.diff_name and entry.diff_text:
            parts.append(
                f'<details id="step-{entry.step.index}"><summary>{entry.step.index:02d} · '
                f"{esc(entry.step.title)}: {esc(entry.summary)} "
                f'(<a href="{esc(entry.diff_name)}">{esc(entry.diff_name)}</a>)</summary>'
                + _diff_html(entry.diff_text)
                + "</details>"
            )
    parts.append(f'<p class="meta">Written by freezeview · pictures: {esc(picture_format)}</p>')
    parts.append("</section>")
    yield from parts
    # One picture's SVG text at a time: a 2,048-block stack's four pictures are 13 MB.
    for picture in pictures:
        yield _template(picture)
    yield _page_data(pictures, explanation, texts)
    yield f"<script>{_asset('review.js')}</script>"
    yield "</body></html>"
