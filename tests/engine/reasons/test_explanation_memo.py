"""The explanations the app keeps by preserved names (``engine/reasons/explanation_memo.py``)
and their views (``session/explain_turns.py``) hold one copy of what they share (issue 23).

A toggle of one preserved name changes a few verdicts of thousands; each set of names
kept used to hold its own copy of every verdict and view (7.4 MB a set at 512 blocks,
30 MB for the four kept), which the engine process carried through every re-run.
"""

from __future__ import annotations

from pathlib import Path

import torch
from torch import nn

from freezeview.engine.reasons.explanation_memo import KEPT
from freezeview.session.local import Session


def _stack(path: Path, blocks: int = 24) -> Path:
    torch.manual_seed(0)
    model = nn.Sequential(
        *(nn.Sequential(nn.Conv2d(4, 4, 3, padding=1), nn.BatchNorm2d(4)) for _ in range(blocks))
    )
    torch.jit.save(torch.jit.script(model.eval()), str(path))
    return path


def _toggled(session: Session) -> tuple[list[str], dict[tuple[str, ...], list[str]]]:
    """Explain with no names, then with each of KEPT - 1 parameters preserved alone;
    the statuses each gave, by names."""
    session.open()
    statuses = {(): [v.status for v in session.explain([])]}
    assert session.inventory is not None
    params = [a.path for a in session.inventory.attributes if a.kind == "parameter"]
    for name in params[: KEPT - 1]:
        statuses[(name,)] = [v.status for v in session.explain([name])]
    return params, statuses


def test_kept_explanations_share_the_verdicts_they_agree_on(tmp_path: Path) -> None:
    """The four sets of names kept hold one verdict object for each verdict they agree
    on (four before), and each still answers its own names as torch decides."""
    session = Session(path=_stack(tmp_path / "stack.pt"))
    params, statuses = _toggled(session)
    kept = session._explainer.memo._kept
    assert len(kept) == KEPT
    explanations = [explanation for _, explanation in kept.values()]
    per_set = len(explanations[0].attributes)
    distinct = {id(v) for e in explanations for v in e.attributes}
    # Each toggle changes the preserved parameter's verdict (and little else).
    assert per_set < len(distinct) <= per_set + 4 * (KEPT - 1), (per_set, len(distinct))
    lines = {id(line) for e in explanations for line in e.torch_log}
    assert len(lines) < sum(len(e.torch_log) for e in explanations)
    # Shared or not, every set of names is answered as before, as torch decides.
    paths = [v.path for v in session.explain([])]
    for names, expected in statuses.items():
        assert [v.status for v in session.explain(list(names))] == expected
        frozen = torch.jit.freeze(torch.jit.load(str(session.path)), preserved_attrs=list(names))
        for name in params[: KEPT - 1]:
            status = dict(zip(paths, expected, strict=True))[name]
            assert (status == "kept") == _has(frozen, name), (names, name, status)


def _has(module: torch.jit.ScriptModule, path: str) -> bool:
    owner, _, leaf = path.rpartition(".")
    for part in owner.split(".") if owner else ():
        if not hasattr(module, part):  # the submodule itself is gone
            return False
        module = getattr(module, part)
    return hasattr(module, leaf)


def test_kept_summaries_share_the_summaries_they_agree_on(tmp_path: Path) -> None:
    """The app's views of the kept explanations: one object for each view the sets of
    names agree on; the preserved parameter's own view is its set's."""
    session = Session(path=_stack(tmp_path / "stack.pt"))
    params, _ = _toggled(session)
    views = session._explainer._summaries
    assert len(views) == KEPT
    per_set = len(next(iter(views.values()))[1])
    distinct = {id(v) for _, made in views.values() for v in made}
    assert per_set < len(distinct) <= per_set + 4 * (KEPT - 1), (per_set, len(distinct))
    mine = {v.path: v for v in views[(params[0],)][1]}
    assert mine[params[0]].preserved
    assert not {v.path: v for v in views[()][1]}[params[0]].preserved
