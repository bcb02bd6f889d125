"""The .code view shows the final frozen module's code, read when the view shows it.

Through the engine process the frozen module's ``.code`` is read only when the ``.code``
view of a step from the clean-up on shows it (torch prints it in seconds at 70k nodes);
a user already looking at that view when the run ends sees it come without pressing a
key.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

from .conftest import wait_ready

# A whole run of the app in-process: the slow set (make test) runs it.
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

FINAL = "# .code of the final frozen module"


class LateCodeSession(Session):
    """An in-process session whose final ``.code`` is read when asked, as the engine
    process's, and comes late."""

    arrived: threading.Event
    asked = 0

    def run_steps(self, *args: Any, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        self.arrived = threading.Event()
        yield from super().run_steps(*args, **kwargs)
        self._late, self.final_code = self.final_code, None

    def read_final_code(self) -> str | None:
        self.asked += 1
        if self.arrived.wait(30):
            self.final_code = self._late
        return self.final_code


async def test_the_code_view_shows_the_final_code_when_it_arrives(
    small_pt: Path, tmp_path: Path
) -> None:
    session = LateCodeSession(path=small_pt)
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=session)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        for _ in range(len(screen.steps)):
            await pilot.press("n")
        await pilot.press("d")
        await pilot.pause()
        assert screen.view_mode == "code"
        assert FINAL not in "\n".join(screen.ir.plain_lines())
        session.arrived.set()
        for _ in range(100):
            await pilot.pause(0.02)
            if FINAL in "\n".join(screen.ir.plain_lines()):
                break
        text = "\n".join(screen.ir.plain_lines())
        assert FINAL in text and "def forward" in text
        assert session.asked == 1


async def test_the_final_code_is_read_only_when_shown(small_pt: Path, tmp_path: Path) -> None:
    """A run nobody looks at the ``.code`` of never has it read; the first look does."""
    session = LateCodeSession(path=small_pt)
    app = FreezeviewApp(small_pt, output_dir=tmp_path / "out", session=session)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        await pilot.press("r")
        await wait_ready(pilot)
        for _ in range(len(screen.steps)):
            await pilot.press("n")
        await pilot.pause(0.2)
        assert session.asked == 0  # two runs, every step shown as IR: never read
        session.arrived.set()
        await pilot.press("d")  # .code
        for _ in range(100):
            await pilot.pause(0.02)
            if FINAL in "\n".join(screen.ir.plain_lines()):
                break
        assert session.asked == 1
