"""The main screen's footer is rebuilt only when the keys it shows change."""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.ui.widgets.keys_footer import KeysFooter

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


def shown(footer: KeysFooter) -> list[tuple[str, str]]:
    """(key, description) of every key the footer draws, in order (Textual's FooterKey
    widgets, selected by their type name: the class is not exported)."""
    return [(key.key, key.description) for key in footer.query("FooterKey")]  # type: ignore[attr-defined]


@pytest.mark.slow
async def test_focus_moves_keep_the_footer_and_new_keys_rebuild_it(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    rebuilds: list[int] = []
    recompose = KeysFooter.recompose

    async def counted(self: KeysFooter) -> None:
        rebuilds.append(1)
        await recompose(self)

    monkeypatch.setattr(KeysFooter, "recompose", counted)
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        footer = screen.query_one(KeysFooter)
        keys = shown(footer)
        assert ("n", "Next") in keys and not any(k == "w" for k, _ in keys)
        before = len(rebuilds)
        for widget in (screen.inspector, screen.ir, screen.inspector, screen.ir):
            widget.focus()
            await pilot.pause()
            assert screen.focused is widget
        # Textual's Footer rebuilds on each of these focus changes; the keys are the same.
        assert len(rebuilds) == before and shown(footer) == keys
        screen.steps_bar.passes.focus()  # the pass list adds keys of its own
        await pilot.pause()
        assert len(rebuilds) == before + 1 and shown(footer) != keys
        screen.ir.focus()
        await pilot.pause()
        assert len(rebuilds) == before + 2 and shown(footer) == keys
        await pilot.resize_terminal(100, 40)  # narrow: the pane switcher `w` appears
        await pilot.pause()
        await pilot.pause()
        assert len(rebuilds) == before + 3 and ("w", "Pane") in shown(footer)
