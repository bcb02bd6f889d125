"""Snapshot tests of the app's main states (pytest-textual-snapshot).

Each test's docstring says what a reviewer should see in the SVG. Regenerate after an
intended change with ``pytest tests/ui/test_snapshots.py --snapshot-update`` and look
at the report. Wall times are hidden (``show_timings=False``) so pictures are stable.

The pictures are taken on CI's torch release; on any other release ``snap_compare``
compares the screen's text with them, torch's own line numbers and warnings masked
(``tests/ui/conftest.py``).
"""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest

from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

from .conftest import SNAPSHOTS, screen_rows, wait_ready


def test_masking_keeps_all_but_torchs_own_parts() -> None:
    """The masked comparison tells screens apart except in torch's line numbers and
    warnings (so the picture tests can fail on every release)."""

    def svg(*rows: str) -> str:
        return "".join(
            f'<text class="r1" x="0" y="{i}" textLength="9">{html.escape(r)}</text>'
            for i, r in enumerate(rows)
        )

    base = screen_rows(svg("%4 = aten::linear(%x) # functional.py:2850:22", "│ │", "q Quit"))
    assert base == ["%4 = aten::linear(%x) # functional.py:#", "│ │", "q Quit"]
    assert base == screen_rows(
        svg(
            "%4 = aten::linear(%x)   # functional.py:2474:2",
            "torch warned: X",
            "│ │",
            "│ │",
            "q Quit",
        )
    )
    assert base != screen_rows(svg("%4 = aten::conv(%x) # functional.py:2850:22", "│ │", "q Quit"))
    assert screen_rows(svg("# models.py:37:8")) != screen_rows(svg("# models.py:38:8"))
    recorded = screen_rows((SNAPSHOTS / "test_snapshots" / "test_main_screen_wide.svg").read_text())
    assert any("functional.py:#" in row for row in recorded)
    assert any(re.search(r"models\.py:\d+", row) for row in recorded)


@pytest.fixture
def small_here(small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The small model copied into the working directory, opened by a relative path
    (so no temporary path appears on screen)."""
    monkeypatch.chdir(tmp_path)
    target = Path("small.pt")
    target.write_bytes(small_pt.read_bytes())
    return target


def make_app(path: Path, *, engine_process: bool = False) -> FreezeviewApp:
    """The app on ``path``; the torch work in this process unless ``engine_process``.

    What the screen shows does not depend on where the engine runs (the engine process
    runs the same :class:`Session`), and this process has torch imported already.
    """
    session = None if engine_process else Session(path=path)
    return FreezeviewApp(path, output_dir="out", show_timings=False, session=session)


def test_main_screen_wide(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """Model tree with badges (calls kept: in-place-write), the inlined IR of step 1,
    the inspector prompt, the passes with checkboxes and all 13 steps."""
    assert snap_compare(make_app(small_here), terminal_size=(160, 48), run_before=wait_ready)


def test_main_screen_narrow(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """80x24: tabs (Model, IR n/N, Inspector, Steps) and only the IR pane below them."""
    assert snap_compare(make_app(small_here), terminal_size=(80, 24), run_before=wait_ready)


def test_diff_view(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """Step 2 (fold_attributes) in diff view: removed GetAttr lines red, constants green."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_ready(pilot)
        await pilot.press("n", "d", "d")
        await wait_ready(pilot)

    assert snap_compare(make_app(small_here), terminal_size=(160, 48), run_before=run_before)


def test_help_screen(snap_compare, small_here: Path) -> None:  # type: ignore[no-untyped-def]
    """The help screen over the main screen: every key, its action and what it does."""

    async def run_before(pilot) -> None:  # type: ignore[no-untyped-def]
        await wait_ready(pilot)
        await pilot.press("question_mark")

    assert snap_compare(make_app(small_here), terminal_size=(160, 48), run_before=run_before)


def test_error_state(snap_compare, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A file that is not a model: the IR pane says why in one sentence, the status line
    is red, an error notification shows; footer keys remain."""
    monkeypatch.chdir(tmp_path)
    Path("broken.pt").write_bytes(b"this is not a TorchScript archive")
    app = make_app(Path("broken.pt"))
    assert snap_compare(app, terminal_size=(160, 48), run_before=wait_ready)
