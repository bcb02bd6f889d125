"""The review page's "where did the time go" and "where the numbers move" sections.

``export --profile`` times each node of the forward (the unfrozen module's and every
step's that changed the graph): :func:`profile_section` is the header's folded section
that says which clock measured what, the dearest kinds and nodes of the unfrozen module
and of the frozen graph, and per step what it changed (kinds and nodes before and after);
:func:`numbers_section` names, for each step bisected (the one that took the outputs past
tolerance), the node whose value first differs: its kind, module and source line, the
difference and any dtype change, its changed inputs and its path to the output, with a
link that shows its outlined box in the step's picture. :func:`step_time` is a step's line
in the timeline.
"""

from __future__ import annotations

import html
from collections.abc import Mapping

from ..draw import HEAT_SCALE
from ..measure import Bisection, format_ms
from .export_profile import Profile, RunFacts, clock_name

__all__ = ["heat_legend", "numbers_section", "profile_section", "step_time"]

_MOST = 5


def _label(profile: Profile) -> str:
    if profile.step is None:
        return "unfrozen module"
    return f"step {profile.step} ({profile.title})"


def heat_legend() -> str:
    """The heat scale's bands as HTML swatches (the pictures' own legend, in the header)."""
    cells = []
    lower = 0.0
    for upper, fill, ink in HEAT_SCALE:
        if lower == 0.0:
            text = f"&lt; {100 * upper:g} %"
        elif upper == float("inf"):
            text = f"&ge; {100 * lower:g} %"
        else:
            text = f"{100 * lower:g}-{100 * upper:g} %"
        cells.append(f'<span style="background:{fill};color:{ink}">{text}</span>')
        lower = upper
    return '<span class="heat-legend" id="page-heat-legend">' + "".join(cells) + "</span>"


def _kinds_table(profile: Profile) -> str:
    esc = html.escape
    rows = "".join(
        f"<tr><td><code>{esc(k.kind)}</code></td><td>{k.count}</td>"
        f"<td>{format_ms(k.ms)}</td><td>{100 * k.share:.1f} %</td></tr>"
        for k in profile.kinds[:_MOST]
    )
    nodes = "".join(
        f"<tr><td><code>{esc(n.kind)}</code> {esc(n.where())}</td><td></td>"
        f"<td>{format_ms(n.ms)}</td><td>{100 * n.share:.1f} %</td></tr>"
        for n in profile.top_nodes(_MOST)
    )
    return (
        f'<table class="times" data-profile="{esc(profile.name)}">'
        "<tr><th>kind</th><th>nodes</th><th>time</th><th>share</th></tr>"
        + rows
        + "<tr><th>node</th><th></th><th>time</th><th>share</th></tr>"
        + nodes
        + "</table>"
    )


def _change_table(change: object) -> str:
    esc = html.escape
    kinds = getattr(change, "kinds", ())
    nodes = getattr(change, "nodes", ())
    rows = "".join(
        f"<tr><td><code>{esc(k.kind)}</code></td><td>{format_ms(k.before_ms)} "
        f"({k.before_count})</td><td>{format_ms(k.after_ms)} ({k.after_count})</td>"
        f"<td>{esc(k.word)}</td></tr>"
        for k in kinds[:_MOST]
    )
    rows += "".join(
        f"<tr><td><code>{esc(n.kind)}</code> {esc(n.where)}</td>"
        f"<td>{format_ms(n.before_ms) if n.before is not None else 'new'}</td>"
        f"<td>{format_ms(n.after_ms) if n.after is not None else 'gone'}</td>"
        f"<td>{esc(n.word)}</td></tr>"
        for n in nodes[:_MOST]
    )
    if not rows:
        return '<p class="meta">no kind or node moved outside the noise.</p>'
    return (
        '<table class="times"><tr><th>kind / node</th><th>before</th><th>after</th>'
        "<th>change</th></tr>" + rows + "</table>"
    )


def profile_section(facts: RunFacts) -> str:
    """The header's folded "time per node" section ("" when nothing was profiled)."""
    if not facts.profiled:
        return ""
    esc = html.escape
    first, last = facts.profile_of(None), facts.last()
    shown = [p for p in (first, last) if p is not None]
    parts = []
    if first is not None and last is not None:
        change = facts.changes.get(last.step)
        word = ""
        if change is not None and change.against is None:
            word = f" ({change.word})"
        parts.append(
            f"{esc(_label(first))} {format_ms(first.total_ms)} &rarr; "
            f"{esc(_label(last))} {format_ms(last.total_ms)}{word}"
        )
    elif shown:
        parts.append(f"{esc(_label(shown[0]))} {format_ms(shown[0].total_ms)}")
    else:
        parts.append("no forward could be profiled")
    clocks = ", ".join(dict.fromkeys(clock_name(p) for p in facts.profiles))
    if clocks:
        parts.append(esc(clocks))
    body = [
        "<p class=\"meta\">Each picture's boxes are filled by their share of that graph's "
        "forward (a module box adds up its ops); hover a box for its time. "
        + heat_legend()
        + "</p>"
    ]
    for profile in facts.profiles:
        body.append(
            f'<p class="meta clock"><b>{esc(_label(profile))}</b>: '
            f"{format_ms(profile.total_ms)} in {len(profile.nodes)} nodes, measured by "
            f"{esc(profile.measured_by())}</p>"
        )
    for profile in shown:
        body.append(f"<h3>{esc(_label(profile))}: the dearest kinds and nodes</h3>")
        body.append(_kinds_table(profile))
    for step, change in sorted(facts.changes.items()):
        body.append(
            f'<h3 data-step="{step}">step {step} ({esc(change.title)}): '
            f"{esc(change.summary())}</h3>"
        )
        body.append(_change_table(change))
    body.extend(f'<p class="note">{esc(note)}</p>' for note in facts.notes)
    return (
        '<details class="profile" id="profile"><summary><b>time per node:</b> '
        + " · ".join(parts)
        + '</summary><div class="profile-body">'
        + "".join(body)
        + "</div></details>"
    )


def step_time(facts: RunFacts, step: int) -> str:
    """The timeline's time line for ``step``: ``time 0.044 ms -> 0.026 ms (faster)``."""
    change = facts.changes.get(step)
    if change is None:
        return ""
    return f"time {format_ms(change.before_ms)} -> {format_ms(change.after_ms)} ({change.word})"


def _numbers_item(bisection: Bisection, boxes: Mapping[int, tuple[str, str]]) -> str:
    esc = html.escape
    lines = bisection.lines()
    head = f"<b>{esc(lines[0])}</b>"
    node = bisection.node
    facts = []
    if node is not None and bisection.status == "named":
        where = boxes.get(bisection.step)
        link = (
            f' <a href="#" data-picture="{esc(where[0])}" data-box="{esc(where[1])}">'
            "show its box</a>"
            if where is not None
            else ' <span class="meta">(its box is drawn with --per-step)</span>'
        )
        facts.append(f"<dt>node</dt><dd><code>{esc(node.kind)}</code>{link}</dd>")
        facts.append(f"<dt>module</dt><dd>{esc(node.scope or '<root>')}</dd>")
        facts.append(
            f"<dt>source</dt><dd>{esc(node.source) if node.source else 'not recorded'}</dd>"
        )
        if node.diff is not None:
            facts.append(f"<dt>difference</dt><dd>{esc(node.diff.text())}</dd>")
            dtype = (
                f"{node.diff.dtype_before} -> {node.diff.dtype_after}"
                if node.diff.dtype_changed
                else f"none ({node.diff.dtype_after or 'not a tensor'})"
            )
            facts.append(f"<dt>dtype change</dt><dd>{esc(dtype)}</dd>")
        if bisection.inputs:
            changed = "; ".join(i.text() for i in bisection.inputs[:_MOST])
            facts.append(f"<dt>changed inputs</dt><dd>{esc(changed)}</dd>")
        if bisection.chain:
            chain = " -> ".join(f"{n.kind}" for n in bisection.chain) + " -> output"
            facts.append(f"<dt>path to the output</dt><dd><code>{esc(chain)}</code></dd>")
    # The last line counts what was compared; the lines between say what the list above says.
    rest = f"<li>{esc(lines[-1].strip())}</li>" if len(lines) > 1 else ""
    return (
        f'<div class="bisection" data-step="{bisection.step}" data-status='
        f'"{esc(bisection.status)}">{head}<p>{esc(bisection.message)}</p>'
        + (f"<dl>{''.join(facts)}</dl>" if facts else "")
        + (f'<ul class="meta">{rest}</ul>' if rest else "")
        + "</div>"
    )


def numbers_section(facts: RunFacts, boxes: Mapping[int, tuple[str, str]]) -> str:
    """The header's folded "where the numbers move" section ("" when no step was
    bisected); ``boxes``: per step, the page's picture id and the box key of the node
    named (its outlined box)."""
    if not facts.bisections:
        return ""
    esc = html.escape
    first = facts.bisections[0]
    named = first.node.text() if first.node is not None else first.message
    summary = f"step {first.step} ({first.title}): {named}"
    if first.node is not None and first.node.diff is not None:
        summary += f", {first.node.diff.text()}"
    items = "".join(_numbers_item(b, boxes) for b in facts.bisections)
    return (
        '<details class="numbers" id="numbers-move"><summary><b>where the numbers move:</b> '
        + esc(summary)
        + f'</summary><div class="numbers-body">{items}</div></details>'
    )
