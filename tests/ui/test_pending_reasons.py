"""The model tree after a toggle (issue 23): torch's statuses at once with the reasons
marked pending, then freezeview's reasons; a toggle while they are pending never shows
the earlier names' reasons. Statuses are checked against torch's own freeze."""

from __future__ import annotations

import threading
from pathlib import Path
from typing import Any

import pytest
import torch

import freezeview.engine.reasons as reasons
from freezeview.session.explain_turns import reasons_pending
from freezeview.ui.messages import ExplanationReady
from freezeview.ui.screens.main import MainScreen
from freezeview.ui.widgets.inspector import attribute_panel
from freezeview.ui.widgets.status_line import StatusLine

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


def _handled(monkeypatch: pytest.MonkeyPatch) -> list[dict[str, Any]]:
    """What the screen did with each explanation: the message, and whether the tree
    took its views (with the attribute ``scale`` as the tree showed it then)."""
    seen: list[dict[str, Any]] = []
    real = MainScreen.on_explanation_ready

    def recording(self: MainScreen, message: ExplanationReady) -> None:
        real(self, message)
        shown = self.summaries is message.summaries
        tree = self.model_tree
        seen.append(
            {
                "request": message.request,
                "complete": message.complete,
                "preserved": message.preserved,
                "shown": shown,
                "scale": tree.view_of("scale") if shown else None,
            }
        )

    monkeypatch.setattr(MainScreen, "on_explanation_ready", recording)
    return seen


async def test_the_tree_shows_torchs_statuses_then_the_reasons(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _handled(monkeypatch)
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        screen.model_tree.focus()
        assert screen.model_tree.select_path("scale")
        await pilot.pause()
        seen.clear()
        await pilot.press("space")
        await wait_ready(pilot)
        assert [(s["complete"], s["shown"]) for s in seen] == [(False, True), (True, True)]
        pending, final = seen[0]["scale"], seen[1]["scale"]
        frozen = torch.jit.freeze(torch.jit.load(str(small_pt)), preserved_attrs=["scale"])
        assert hasattr(frozen, "scale")  # torch keeps it
        assert pending.status == "kept" and pending.preserved
        # The inspector of an attribute whose reasons are pending says so.
        assert reasons_pending(pending)
        assert "still working out" in str(_plain(attribute_panel(pending)))
        assert final.status == "kept" and final.reasons[0].code == "preserved"
        assert not any(reasons_pending(v) for v in screen.summaries)


async def test_the_inspector_shows_the_reasons_when_they_arrive(
    small_pt: Path, tmp_path: Path
) -> None:
    """The attribute under the cursor is inspected again when its reasons come: the
    pending sentence goes without moving the cursor, and the status line says so."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        screen.model_tree.focus()
        assert screen.model_tree.select_path("scale")
        await pilot.pause()
        await pilot.press("space")
        await wait_ready(pilot)
        await pilot.pause()
        assert screen.model_tree.selected_path == "scale"
        final = screen.model_tree.view_of("scale")
        assert final is not None and not reasons_pending(final)
        text = screen.inspector.plain_text()
        assert "still working out" not in text
        assert final.reasons[0].message.split()[0] in text
        assert "reasons updated" in str(screen.query_one(StatusLine).render())


async def test_a_toggle_while_reasons_are_pending_never_shows_the_earlier_ones(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``scale`` is toggled, then ``head`` while scale's reasons are still worked out:
    the tree never takes the reasons of ``scale`` alone, not even if they come late."""
    gate = threading.Event()
    real = reasons.explain

    def slow(*args: Any, **kwargs: Any) -> Any:
        if tuple(kwargs.get("preserved_attrs", ())) == ("scale",):
            gate.wait(30)  # the replay of ``scale`` alone is under way
        return real(*args, **kwargs)

    monkeypatch.setattr(reasons, "explain", slow)
    seen = _handled(monkeypatch)
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        tree = screen.model_tree
        tree.focus()
        assert tree.select_path("scale")
        await pilot.pause()
        seen.clear()
        await pilot.press("space")
        for _ in range(500):
            await pilot.pause(0.01)
            if seen:
                break
        assert seen and not seen[0]["complete"]  # torch's statuses, reasons pending
        first_request = seen[0]["request"]
        assert tree.select_path("head")
        await pilot.pause()
        await pilot.press("space")
        gate.set()
        await wait_ready(pilot)
        # A late answer for the first request is stale even if it came.
        late = [v for v in screen.summaries]
        screen.post_message(ExplanationReady(late, ("scale",), None, first_request))
        await pilot.pause()
        shown = [s for s in seen if s["shown"]]
        assert all(s["preserved"] == ("scale", "head") for s in shown if s["complete"]), shown
        assert not any(s["request"] == first_request and s["complete"] for s in shown)
        assert shown[-1]["complete"] and shown[-1]["preserved"] == ("scale", "head")
        head = tree.view_of("head")
        assert head is not None and head.status == "kept" and head.preserved
        assert not any(reasons_pending(v) for v in screen.summaries)


def _plain(renderable: Any) -> str:
    from rich.console import Console

    console = Console(width=200, record=True)
    console.print(renderable)
    return console.export_text()
