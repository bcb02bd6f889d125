"""The main screen's footer is rebuilt only when the keys it shows change."""

from __future__ import annotations

import gc
import weakref
from pathlib import Path
from typing import Any, ClassVar

import pytest
from textual.app import App, ComposeResult
from textual.binding import Binding, BindingsMap, BindingType
from textual.widgets import Static

from freezeview.ui.screens.main_keys import MAIN_KEYS
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
        # The focus starts in the model tree; its space is the screen's, in its place.
        assert screen.focused is screen.model_tree
        keys = shown(footer)
        assert ("n", "Next") in keys and not any(k == "w" for k, _ in keys)
        assert keys.index(("space", "Preserve")) > keys.index(("n", "Next"))
        before = len(rebuilds)
        for widget in (screen.ir, screen.inspector, screen.model_tree, screen.ir):
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


class _TwoPanes(App[None]):
    """Two focusable panes with keys of their own: each focus move rebuilds the footer."""

    def compose(self) -> ComposeResult:
        yield _Pane(id="left", classes="a")
        yield _Pane(id="right", classes="b")
        yield KeysFooter()


class _Pane(Static, can_focus=True):
    BINDINGS: ClassVar[list[BindingType]] = [("x", "noop", "Left key")]

    def __init__(self, **kwargs: Any) -> None:
        super().__init__("pane", **kwargs)
        if "b" in kwargs.get("classes", ""):
            self._bindings = BindingsMap([Binding("y", "noop", "Right key")])

    def action_noop(self) -> None:
        pass


@pytest.mark.slow
async def test_the_keys_of_earlier_rebuilds_are_let_go() -> None:
    """Textual's Footer binds each key widget to its ``compact``, and drops the watchers
    of removed keys only when ``compact`` changes, which it never does: every rebuild
    left its keys alive for good (five widgets a re-run in a session). The keys a
    rebuild replaced are freed once the next rebuild comes."""
    app = _TwoPanes()
    async with app.run_test(size=(80, 10)) as pilot:
        footer = app.query_one(KeysFooter)
        left, right = app.query_one("#left"), app.query_one("#right")
        first: list[weakref.ref[Any]] = []
        for pane in (left, right, left, right):
            pane.focus()
            await pilot.pause()
            await pilot.pause()
            if not first:
                first = [weakref.ref(key) for key in footer.query("FooterKey")]
        assert first and "Right key" in [k.description for k in footer.query("FooterKey")]  # type: ignore[attr-defined]
        gc.collect()
        assert [ref() for ref in first if ref() is not None] == []


class _MainKeys(App[None]):
    """The main screen's keys and quit, on a footer alone."""

    BINDINGS: ClassVar[list[BindingType]] = [*MAIN_KEYS, Binding("q", "quit", "Quit")]

    def compose(self) -> ComposeResult:
        yield KeysFooter()


@pytest.mark.parametrize("width", [60, 80, 100, 200])
async def test_help_and_quit_stay_when_the_footer_is_short(width: int) -> None:
    """When the keys do not all fit, the least useful go first: `?` and `q` stay at any
    width, Next stays longer than Open, and at full width every key shows."""
    app = _MainKeys()
    async with app.run_test(size=(width, 10)) as pilot:
        await pilot.pause()
        footer = app.query_one(KeysFooter)
        keys = [k for k, _ in shown(footer)]
        assert "question_mark" in keys and "q" in keys, keys
        drawn = sum(k.size.width for k in footer.query("FooterKey"))  # type: ignore[attr-defined]
        assert drawn <= width, (width, keys)
        every = [b.key for b in MAIN_KEYS if isinstance(b, Binding)]
        if width >= 200:
            assert set(every) - {"w"} <= set(keys)  # (w: only when narrow, in the app)
        else:
            assert "o" not in keys and "n" in keys, keys
