"""Fixtures for the app's tests: a small saved model and a stable terminal."""

from __future__ import annotations

import difflib
import html
import itertools
import re
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.widgets import Input

from freezeview.session.local import Session

from .models import save_small


@pytest.fixture(autouse=True)
def no_thread_outlives_its_test() -> Iterator[None]:
    """Wait for the threads a test started (the app's thread workers) before the next test.

    An app run in-process leaves its thread workers to finish after ``run_test`` returns;
    one still highlighting IR would call ``gc.freeze()`` in the middle of a later test on
    the same worker (tests of the collector count frozen objects).
    """
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 30
    for thread in set(threading.enumerate()) - before:
        thread.join(timeout=max(0.0, deadline - time.monotonic()))
    left = [t.name for t in set(threading.enumerate()) - before if t.is_alive()]
    assert not left, f"threads still running after the test: {left}"


@pytest.fixture(autouse=True)
def no_cursor_blink(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Stop the search box's cursor blinking so snapshots are stable."""
    monkeypatch.setattr(Input, "cursor_blink", False)
    yield


@pytest.fixture(scope="session")
def small_pt() -> Iterator[Path]:
    """``Small`` scripted in eval mode and saved (built once per test session).

    Kept outside pytest's rotating temp root: parallel pytest runs prune each other's
    old base directories, which would delete the model under a running app.
    """
    import shutil
    import tempfile

    folder = Path(tempfile.mkdtemp(prefix="freezeview-ui-"))
    yield save_small(folder / "small.pt")
    shutil.rmtree(folder, ignore_errors=True)


class GatedSession(Session):
    """The app's in-process session whose runs stop after ``hold`` steps until ``gate``
    opens (a re-run caught half way: tests, the re-run screenshot), and end after
    ``limit`` steps when it is set (a plan with fewer steps than the run before)."""

    def __init__(self, path: Path) -> None:
        super().__init__(path=path)
        self.gate: threading.Event | None = None
        self.hold = 2
        self.limit: int | None = None

    def run_steps(self, *args: Any, **kwargs: Any) -> Iterator[Any]:
        for index, step in enumerate(super().run_steps(*args, **kwargs)):
            if self.limit is not None and index >= self.limit:
                return
            if self.gate is not None and index == self.hold:
                self.gate.wait(60)
            yield step


def step_graph(screen, index: int):  # type: ignore[no-untyped-def]
    """The graph of the screen's step ``index`` (taken from the engine if need be)."""
    return screen.session.step_graph(screen.steps[index].graph)


async def wait_ready(pilot, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    """Wait until the model is loaded, explained and every step has arrived."""
    import time

    screen = pilot.app.main_screen
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        failed = screen.has_class("-failed")
        settled = (
            not screen.loading_model
            and screen.run_id > 0
            and not screen.stepping
            and not screen.run_state.explaining
            and not screen.ir_pane.taking_graph
        )
        if failed or settled:
            await pilot.pause()
            return
    raise AssertionError(
        "the app did not settle in time: "
        f"{screen.loading_model=} {screen.run_id=} {screen.stepping=} "
        f"{screen.run_state.explaining=}"
    )


# -- pictures taken on one torch release, compared on every release ------------------------
#
# The pictures in __snapshots__/ are taken on CI's torch release (PICTURES_TORCH), where
# they are compared as they are. On any other release part of the screen is torch's own
# and differs: the line numbers of torch's source (``functional.py:2850``) that the IR
# shows for inlined library code, and the warnings that release prints (``torch warned:
# ...``). There the screen's text is compared row by row with the picture's, those parts
# masked in both (tests/ui/test_snapshots.py checks that the masking tells other screens
# apart).

#: The torch release (major, minor) the pictures in __snapshots__/ were taken on.
PICTURES_TORCH = (2, 13)
#: The model's own file; a source position in any other file is torch's.
_MODEL_FILE = "models.py"
SNAPSHOTS = Path(__file__).parent / "__snapshots__"
_TEXT = re.compile(r'<text class="[^"]*" x="([\d.]+)" y="([\d.]+)"[^>]*>([^<]*)</text>')
_POSITION = re.compile(r"\b(\w+\.py):\d+(?::\d*)?")
_BLOCKS = re.compile("[\u2580-\u259f]")


def _this_torch() -> tuple[int, int]:
    """The installed torch's (major, minor), read without importing torch."""
    from importlib.metadata import version

    major, minor = version("torch").split(".")[:2]
    return int(major), int(minor)


def screen_rows(svg: str) -> list[str]:
    """A screenshot's text, row by row, with what depends on the torch release masked.

    Positions in torch's own source become ``file.py:#``; rows of torch's warnings are
    left out, and with them what their presence moves: scrollbar thumbs (block glyphs
    are dropped) and a pane's empty rows (a run of identical rows counts once). Spaces
    are collapsed, so a shorter line number does not move the rest.
    """
    rows: dict[float, list[tuple[float, str]]] = {}
    for x, y, text in _TEXT.findall(svg):
        rows.setdefault(float(y), []).append((float(x), html.unescape(text)))
    out = []
    for y in sorted(rows):
        row = "".join(text for _, text in sorted(rows[y])).replace("\xa0", " ")
        if "torch warned:" in row:
            continue
        row = _POSITION.sub(
            lambda m: m.group(0) if m.group(1) == _MODEL_FILE else f"{m.group(1)}:#", row
        )
        out.append(" ".join(_BLOCKS.sub("", row).split()))
    return [row for row, _ in itertools.groupby(out)]


@pytest.fixture
def snap_compare(snap_compare, monkeypatch: pytest.MonkeyPatch) -> Callable[..., bool]:  # type: ignore[no-untyped-def]
    """pytest-textual-snapshot's comparison; on a torch release other than
    :data:`PICTURES_TORCH` it compares the screen's text with the picture's, torch's own
    parts masked (the picture is still the one the test uses, and the one its report shows)."""
    if _this_torch() != PICTURES_TORCH:
        from pytest_textual_snapshot import SVGImageExtension

        def matches(self, *, serialized_data, snapshot_data) -> bool:  # type: ignore[no-untyped-def]
            expected, shown = screen_rows(str(snapshot_data)), screen_rows(str(serialized_data))
            if shown != expected:
                print("\n".join(difflib.unified_diff(expected, shown, "picture", "screen", n=1)))
            return shown == expected

        monkeypatch.setattr(SVGImageExtension, "matches", matches)
    return snap_compare  # type: ignore[no-any-return]
