"""The catalogue's bad models, opened in the app: an error on screen, and the app goes on.

For every input ``bad_inputs.catalogue.app_catalogue()`` lists (files that cannot be
loaded, and models torch refuses to freeze), the app started on it with Textual's Pilot
must show the catalogue's sentence in its status line, no traceback anywhere on
screen, still answer keys, quit on ``q``, never run a hostile pickle and never touch
the file. Each input is opened with the engine's session in this process, and one per
way of failing through the engine process too.
"""

from __future__ import annotations

import hashlib
import re
import time
from pathlib import Path

import pytest
from bad_inputs.catalogue import MARKER_NAME, app_catalogue

pytest.importorskip("freezeview.ui", reason="the app (freezeview.ui) is not present")

from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

pytestmark = pytest.mark.asyncio

SIZE = (160, 48)
# The app does its torch work in an engine process. Every input is opened with the
# in-process Session that process runs (the same sentences: tests/ui/
# test_remote_session.py); through the engine process itself, one input per way of
# failing: the hostile files (nothing may ever run them), a damaged archive, a file
# that is no model, a missing path and a model torch refuses to freeze (each engine
# process imports torch, about a second of CPU). All in the slow set: in the fast set,
# tests/cli/test_app_dead_ends.py starts the app on bad input (refused before its screen
# opens), and the CLI's batch runs every input through main(), what the script calls.
THROUGH_ENGINE = {
    "hostile-pickle",
    "hostile-torch-save",
    "hostile-torchscript",
    "truncated",
    "state-dict",
    "missing-path",
    "training-mode",
}


def _params() -> list[object]:
    params = []
    for name, build, message in app_catalogue():
        params.append(pytest.param(name, build, message, False, id=f"{name}-in-process"))
        if name in THROUGH_ENGINE:
            params.append(pytest.param(name, build, message, True, id=name))
    return params


async def _settle(pilot, timeout: float = 60.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the app has failed to load, or loaded and finished its workers."""
    from textual.worker import WorkerState

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.05)
        busy = [
            w for w in pilot.app.workers if w.state in (WorkerState.PENDING, WorkerState.RUNNING)
        ]
        status = _status(pilot.app)
        # Between the load worker's end and the explain/freeze workers' start nothing is
        # busy for a moment, while the status still says what comes next ("…").
        if not busy and "loading" not in status.lower() and not status.rstrip().endswith("…"):
            await pilot.pause()
            return
    raise AssertionError(f"the app did not settle: {_status(pilot.app)!r}")


def _status(app: FreezeviewApp) -> str:
    return str(app.main_screen.query_one("#status").render())


@pytest.mark.parametrize(("name", "build", "message", "engine_process"), _params())
@pytest.mark.slow
async def test_app_shows_the_sentence_and_goes_on(
    name: str, build: object, message: str, engine_process: bool, tmp_path: Path
) -> None:
    model = build(tmp_path)  # type: ignore[operator]
    digest = hashlib.sha256(model.read_bytes()).hexdigest() if model.is_file() else None
    session = None if engine_process else Session(path=model)
    app = FreezeviewApp(model, output_dir=tmp_path / "out", session=session)  # type: ignore[arg-type]
    async with app.run_test(size=SIZE) as pilot:
        await _settle(pilot)
        status = _status(app)
        assert "failed" in status, status
        assert re.search(message, status, re.IGNORECASE | re.DOTALL), status
        screen_text = "\n".join(app.main_screen.ir.plain_lines())
        assert "Traceback" not in screen_text and "Traceback" not in status
        await pilot.press("n", "d", "r")  # keys still work after the error
        await _settle(pilot)
        await pilot.press("q")
        await pilot.pause()
    assert not (tmp_path / MARKER_NAME).exists(), "the hostile pickle ran"
    if digest is not None:
        assert hashlib.sha256(model.read_bytes()).hexdigest() == digest
