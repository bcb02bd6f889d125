"""The review page's migration section: what ``migrate`` found, in ``index.html``.

``freezeview export --migrate`` runs :func:`~freezeview.engine.migrate.migrate` on the
model and its sample inputs and adds this section to the page the export wrote: the
verdict, how the conversion went (or the node it failed on), every state write kept or
lost with its source line, the input dimensions the program fixed, and "is it as fast?".
It sits in the page's header, folded into one summary line, and is put in place by
rewriting the page whole (:func:`add_migration_section`).
"""

from __future__ import annotations

import html
import os
from pathlib import Path

from ..migrate import BEHAVES_THE_SAME, DOES_NOT_CONVERT, Migration
from ..plumbing import atomic, plural

__all__ = ["add_migration_section", "migration_section"]

# The review page's header ends on a line of its own (review_page.review_page_parts).
_HEADER_END = "\n</header>\n"
_START = '<details class="migration" id="migration">'
_END = "</details><!-- migration -->"


def _summary(migration: Migration) -> str:
    esc = html.escape
    verdict = migration.verdict
    tone = {BEHAVES_THE_SAME: "ok", DOES_NOT_CONVERT: "fails"}.get(verdict, "differs")
    parts = [f'<b>torch.export:</b> <span class="verdict {tone}">{esc(verdict)}</span>']
    lost = migration.lost_writes if migration.conversion.converted else ()
    if lost:
        parts.append(f'<span class="lost">{esc(plural(len(lost), "state write"))} LOST</span>')
    if migration.speed is not None and migration.speed.program is not None:
        parts.append(esc(migration.speed.program.text().split(" (", 1)[0]))
    return "<summary>" + " · ".join(parts) + "</summary>"


def _source(source: str, text: str) -> str:
    esc = html.escape
    where = esc(source) if source else '<span class="meta">no source line recorded</span>'
    return where + (f' <code class="src">{esc(text)}</code>' if text else "")


def _writes(migration: Migration) -> str:
    """The table of state writes: kept or LOST, declared or not, with the writing line."""
    if not migration.writes:
        return '<p class="meta">forward writes no state freezeview knows of.</p>'
    esc = html.escape
    rows = []
    for write in migration.writes:
        if not migration.conversion.converted:
            fate, cls = "not converted", "unknown"
        elif write.carried:
            fate = "kept" if write.declared else "kept, not declared in the graph signature"
            cls = "kept"
        else:
            fate, cls = "LOST", "lost"
        rows.append(
            f'<tr class="{cls}" data-path="{esc(write.path)}"><td><code>{esc(write.path)}</code>'
            f"</td><td>{esc(write.how)}</td><td>{esc(fate)}</td>"
            f"<td>{_source(write.source, write.source_text)}</td></tr>"
        )
    return (
        '<table class="writes"><thead><tr><th>state write</th><th>found by</th>'
        "<th>in the program</th><th>written at</th></tr></thead><tbody>"
        + "".join(rows)
        + "</tbody></table>"
    )


def _conversion(migration: Migration) -> list[str]:
    esc = html.escape
    conv = migration.conversion
    if not conv.available:
        return [f"<p>{esc(conv.cause)}</p>"]
    lines = []
    if conv.unhandled_kinds:
        kinds = ", ".join(f"<code>{esc(k)}</code>" for k in conv.unhandled_kinds)
        lines.append(f"<p>node kinds the converter has no handler for: {kinds}</p>")
    if conv.converted:
        lines.append(f'<p class="meta">converted {esc(conv.method)} in {conv.seconds:.2f} s</p>')
        return lines
    where = ""
    if conv.failed_node is not None:
        node = conv.failed_node
        scope = f" in {esc(node.scope)}" if node.scope else ""
        where = (
            f" on <code>{esc(node.kind)}</code>{scope} at {_source(node.source, node.source_text)}"
        )
    lines.append(f'<p class="failed">failed in {esc(conv.method)}, {esc(conv.stage)}{where}</p>')
    if conv.cause:
        lines.append(f'<p class="meta">torch: {esc(conv.cause)}</p>')
    if conv.hint:
        lines.append(f'<p class="meta">known cause: {esc(conv.hint)}</p>')
    return lines


def migration_section(migration: Migration) -> str:
    """The section's HTML: one ``<details>`` whose summary line gives the verdict."""
    esc = html.escape
    body = [
        '<p class="meta">torch\'s TorchScript-to-ExportedProgram converter (a private torch '
        f"API) on the sample inputs, torch {esc(migration.torch_version)}; "
        "<code>freezeview migrate</code> says the same.</p>",
        *_conversion(migration),
    ]
    if migration.calls:
        same = sum(migration.outputs_same)
        body.append(f"<p>outputs: the same on {same} of {migration.calls} successive calls</p>")
    body.append(_writes(migration))
    if migration.specialised:
        dims = ", ".join(f"<code>{esc(d)}</code>" for d in migration.specialised)
        body.append(f"<p>input dimensions fixed by the program: {dims}</p>")
    if migration.dynamic:
        dims = ", ".join(f"<code>{esc(d)}</code>" for d in migration.dynamic)
        body.append(f"<p>input dimensions left dynamic: {dims}</p>")
    if migration.parameters_as_buffers:
        count = plural(len(migration.parameters_as_buffers), "parameter")
        body.append(f"<p>{esc(count)} held as buffers by the program</p>")
    if migration.second_shape:
        body.append(f"<p>second input shape {esc(migration.second_shape)}</p>")
    if migration.speed is not None:
        body.extend(f'<p class="speed">{esc(line)}</p>' for line in migration.speed.lines())
    if migration.aoti is not None:
        body.extend(f'<p class="speed">{esc(line)}</p>' for line in migration.aoti.lines())
    body.extend(f'<p class="note">{esc(n)}</p>' for n in migration.notes)
    return (
        _START
        + _summary(migration)
        + '<div class="migration-body">'
        + "".join(body)
        + ("</div>" + _END)
    )


def add_migration_section(index: str | os.PathLike[str], migration: Migration) -> Path:
    """Put :func:`migration_section` at the end of the header of the review page at
    ``index`` (replacing one put there before), rewriting the page whole.

    Raises:
        ValueError: ``index`` is not a review page freezeview wrote (no header end).
    """
    path = Path(index)
    page = path.read_text(encoding="utf-8")
    start = page.find(_START)
    if start != -1:
        end = page.find(_END, start)
        page = page[:start] + page[end + len(_END) + 1 :] if end != -1 else page
    cut = page.find(_HEADER_END)
    if cut == -1:
        raise ValueError(f"{path} is not a freezeview review page (no end of its header).")
    page = page[:cut] + "\n" + migration_section(migration) + page[cut:]
    with atomic.atomic_path(path) as tmp:
        Path(tmp).write_text(page, encoding="utf-8")
    return path
