"""The .code view follows the final frozen module's code when it arrives after the run.

Through the engine process the frozen module's ``.code`` reaches the screen after the
run's last step (the engine reads it once the screen has every step); a user already
looking at the .code view of the last step sees it replace the loaded module's code
without pressing a key.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from freezeview.ui import FreezeviewApp
from freezeview.ui.session import Session

from .conftest import wait_ready

# A whole run of the app in-process: the slow set (make test) runs it.
pytestmark = [pytest.mark.asyncio, pytest.mark.slow]

FINAL = "# .code of the final frozen module"


class LateCodeSession(Session):
    """An in-process session whose final ``.code`` comes late, as the engine process's."""

    arrived: threading.Event

    def run_steps(self, *args: Any, **kwargs: Any) -> Iterator[Any]:  # type: ignore[override]
        self.arrived = threading.Event()
        yield from super().run_steps(*args, **kwargs)
        self._late, self.final_code = self.final_code, None

    def final_code_known(self, timeout: float) -> bool:
        if self.arrived.wait(timeout):
            self.final_code = self._late
            return True
        return False


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
