"""Regenerate ``screenshots/*.svg`` by driving freezeview's app on the bundled example.

Each screenshot is the app's own ``save_screenshot`` output (SVG), taken headless at a
fixed terminal size, so the pictures in README.md and docs/ always match the current app:

- ``main.svg``: the main screen at 160x48 (model tree, IR, inspector, steps);
- ``attribute.svg``: the kept buffer selected: its reason in the inspector and the IR
  lines that read or write it marked;
- ``diff.svg``: a folding step in diff view;
- ``final.svg``: the last step (the frozen graph);
- ``help.svg``: the help screen with every key;
- ``narrow.svg``: the 80x24 layout (tabs);
- ``graph-view.svg``: the graph view (``v``) on the conv -> batchnorm step's diff;
- ``rerun.svg``: a re-run (``r``) half way: the steps that arrived in the last run's
  rows, the rest of them pending;
- ``migrate.svg``: ``m`` on the example with sample inputs of :data:`HEAT_SHAPE`: will it
  survive ``torch.export``? (its lost state write named with its source line);
- ``graph-heat.svg``: the graph view's heat overlay (``%``, sample inputs of
  :data:`HEAT_SHAPE`) on the conv -> batchnorm step: each box filled by its share of the
  forward's time, the conv selected with its time against the unfrozen module's.

Run: ``.venv/bin/python scripts/export_screenshots.py [MODEL.pt]`` (default: the bundled
``examples/example.pt``; ``make screenshots`` builds it first).
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import threading
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from ui.conftest import GatedSession, wait_ready  # noqa: E402

from freezeview.session import SessionOptions  # noqa: E402
from freezeview.ui import FreezeviewApp  # noqa: E402

OUT = ROOT / "screenshots"
# The graph view on step 6 (conv -> batchnorm) of the example, as a diff.
GRAPH_KEYS = ("n", "n", "n", "n", "n", "v")
# Steps of the re-run that have arrived in the re-run screenshot.
RERUN_ARRIVED = 5
# The heat overlay's sample inputs (the example's forward takes one image batch).
HEAT_SHAPE = "2,3,16,16"


async def _shoot(
    model: Path,
    name: str,
    size: tuple[int, int],
    keys: tuple[str, ...] = (),
    select: str | None = None,
    to_end: bool = False,
    graph: bool = False,
    rerun: bool = False,
    heat: bool = False,
    migrate: bool = False,
) -> Path:
    # The re-run is held half way by an in-process session (the engine process's own
    # answers, tests/session/test_remote.py), released once the picture is taken.
    session = GatedSession(model) if rerun else None
    with tempfile.TemporaryDirectory() as tmp:
        inputs = heat or migrate
        options = SessionOptions(input_shapes=(HEAT_SHAPE,)) if inputs else SessionOptions()
        app = FreezeviewApp(
            model, options=options, output_dir=tmp, show_timings=False, session=session
        )
        async with app.run_test(size=size) as pilot:
            await wait_ready(pilot, timeout=120)
            screen = app.main_screen
            if select is not None:
                screen.model_tree.focus()
                screen.model_tree.select_path(select)
                await pilot.pause()
            while to_end and screen.current_step < len(screen.steps) - 1:
                await pilot.press("n")
            for key in keys:
                await pilot.press(key)
                await wait_ready(pilot)
            while graph and not screen.graph_view.ready:
                await pilot.pause(0.05)
            if heat:
                await _heat(pilot)
            if migrate:
                await pilot.press("m")
                state = screen.migration
                while state is None or state.running or state.summary is None:
                    await pilot.pause(0.1)
                    state = screen.migration
            if session is not None:
                session.gate, session.hold = threading.Event(), RERUN_ARRIVED
                await pilot.press("r")
                while screen.steps_bar.step_count < RERUN_ARRIVED:
                    await pilot.pause(0.05)
            await pilot.pause(0.3)
            app.save_screenshot(filename=f"{name}.svg", path=str(OUT))
            if session is not None and session.gate is not None:
                session.gate.set()
                await wait_ready(pilot)
    return OUT / f"{name}.svg"


async def _heat(pilot) -> None:  # type: ignore[no-untyped-def]
    """``%`` (the plan runs again, each node timed), back to the step shown, its graph
    alone, and the conv's box selected (the inspector gives its time)."""
    screen = pilot.app.main_screen
    step, run = screen.current_step, screen.run_id
    await pilot.press("percent_sign")
    while screen.run_id == run:
        await pilot.pause(0.05)
    await wait_ready(pilot, timeout=120)
    screen.steps_bar.current_step = step
    view = screen.graph_view
    await pilot.press("d")
    while not (view.ready and screen.node_times.get(screen.steps[step].graph)):
        await pilot.pause(0.05)
    layout = view.layout_shown
    conv = [b for b in layout.boxes.values() if b.lines and b.lines[0].startswith("conv")]
    if conv:
        view.select_box(conv[0], follow=True)
    await pilot.pause(0.3)


async def main(model: Path, only: set[str] | None = None) -> list[Path]:
    """Write every screenshot (or those named in ``only``); return their paths."""
    OUT.mkdir(exist_ok=True)
    wide = (160, 48)
    shots: list[Path] = []
    for name, size, kwargs in _shots(wide):
        if not only or name in only:
            shots.append(await _shoot(model, name, size, **kwargs))
    return shots


def _shots(wide: tuple[int, int]) -> list[tuple[str, tuple[int, int], dict[str, Any]]]:
    """Each screenshot: its name, the terminal's size and how it is taken."""
    return [
        ("main", wide, {}),
        ("attribute", wide, {"select": "steps"}),
        ("diff", wide, {"keys": ("n", "d", "d")}),
        ("final", wide, {"to_end": True}),
        ("help", wide, {"keys": ("question_mark",)}),
        ("narrow", (80, 24), {}),
        ("graph-view", wide, {"keys": GRAPH_KEYS, "graph": True}),
        ("rerun", wide, {"rerun": True}),
        ("graph-heat", wide, {"keys": GRAPH_KEYS, "graph": True, "heat": True}),
        ("migrate", wide, {"migrate": True}),
    ]


if __name__ == "__main__":
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else ROOT / "examples" / "example.pt"
    if not target.exists():
        sys.exit(f"{target}: no such file; build it with `make examples/example.pt`.")
    only = set(sys.argv[2:])  # names to take again (default: every screenshot)
    for path in asyncio.run(main(target, only)):
        print(f"wrote {path.relative_to(ROOT)}")
