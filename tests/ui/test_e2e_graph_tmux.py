"""End to end: the graph view (``v``) of the real ``freezeview`` console script in a tmux
pseudo-terminal (no graphics protocol there: the character view is the whole view).

Opens the bundled example, shows the graph, pans, zooms out to module boxes and in
again, steps with ``n`` (the view follows), finds a box with ``/``, hides it, quits.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from .test_e2e_tmux import SCRIPT, STRICT, _tmux, _wait_for

REPO = Path(__file__).resolve().parents[2]

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("tmux") is None, reason="tmux is not installed"),
    pytest.mark.skipif(
        not SCRIPT.exists(), reason="the freezeview console script is not installed"
    ),
]


def _graph_pane(screen: str) -> str:
    """The left column of the screen (where the graph view sits at 160 columns)."""
    return "\n".join(line[:74] for line in screen.splitlines())


def test_graph_view_in_tmux(tmp_path: Path) -> None:
    source = REPO / "examples" / "example.pt"
    if source.exists():
        model = tmp_path / "example.pt"
        shutil.copyfile(source, model)
    else:
        from .models import save_small

        model = save_small(tmp_path / "example.pt")
    session = f"fv-graph-{os.getpid()}"
    done = tmp_path / "exit-code"
    # The app starts once the window's size is fixed: a window without clients is given
    # tmux's default 80x24 whenever another session of the same server comes or goes.
    # Strict: an error in the app ends it (exit 1) instead of a sentence and a log file.
    command = f"sleep 0.5; cd {tmp_path} && {STRICT} {SCRIPT} {model.name} -o out; echo $? > {done}"
    _tmux("new-session", "-d", "-s", session, "-x", "160", "-y", "48", command)
    _tmux("set-option", "-w", "-t", session, "window-size", "manual")
    _tmux("resize-window", "-t", session, "-x", "160", "-y", "48")
    try:
        _wait_for(session, lambda s: "final graph" in s)
        _tmux("send-keys", "-t", session, "v")
        screen = _wait_for(session, lambda s: "graph · step 0 · inline calls" in s and "boxes" in s)
        level = re.search(r"\[(every op|module level \d+)\]", screen)
        assert level is not None
        drawn = _graph_pane(screen)
        assert re.search(r"[╭╔┏┌][─═━┄]+", drawn), "no box is drawn"
        # Panning moves the picture.
        _tmux("send-keys", "-t", session, "j", "j", "j", "l")
        moved = _wait_for(session, lambda s: _graph_pane(s) != drawn, timeout=10)
        assert _graph_pane(moved) != drawn
        # Zoom out, then in again: the level in the title changes and comes back.
        _tmux("send-keys", "-t", session, "-")
        out = _wait_for(session, lambda s: level.group(0) not in s and "boxes" in s, 30)
        assert "[module level" in out
        _tmux("send-keys", "-t", session, "+")
        _wait_for(session, lambda s: level.group(0) in s, timeout=30)
        # n steps and the view follows, as a diff.
        _tmux("send-keys", "-t", session, "n")
        _wait_for(
            session, lambda s: "diff · step 1 · fold attributes" in s and "boxes" in s, timeout=30
        )
        # / finds a box: the inspector shows its node.
        _tmux("send-keys", "-t", session, "/")
        _wait_for(session, lambda s: "find a box" in s, timeout=10)  # typed text goes there
        _tmux("send-keys", "-t", session, "conv2d", "Enter", "Escape")
        _wait_for(session, lambda s: "aten::conv2d" in s, timeout=10)
        # An escape followed at once by a key reads as alt+key (the terminal's rule).
        time.sleep(0.5)
        _tmux("send-keys", "-t", session, "v")
        _wait_for(session, lambda s: "diff · step" not in s, timeout=10)
        _tmux("send-keys", "-t", session, "q")
        deadline = time.monotonic() + 20
        while not done.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        assert done.read_text().strip() == "0"
    finally:
        subprocess.run(["tmux", "kill-session", "-t", session], capture_output=True)
