"""Press every key of freezeview's app on real models, at every step, and fail on any error.

The held-out walk of issue 38: for each TorchScript file in a directory, the real app
(:class:`freezeview.ui.FreezeviewApp`, with its engine process, as ``freezeview MODEL.pt``
starts it) is driven by Textual's Pilot at 160x48, 100x30 and 80x24. At every step
(``n`` through all of them) it enters each context - the model tree, the IR pane, the
steps timeline, the passes list, the graph view at every zoom level, the help screen and
the command palette - and presses every key bound there. The keys are read from the
bindings Textual has active in that context (the app's, the screen's and the focused
widget's ``BINDINGS``), never from a hand-made list, so a new key is walked as soon as it
is bound. Then a seeded random order of all those keys is pressed. Any exception ends
the app (``FREEZEVIEW_STRICT_UI=1``, as in the test suite) and fails the model; at the end
``q`` quits and the exit status must be 0.

Run it with a Python environment that has freezeview and torch (real model libraries
are needed only to build the models, not to walk them)::

    python scripts/walk_real_models.py /tmp/fv-real/models
    python scripts/walk_real_models.py MODELS_DIR --only resnet50 --sizes 80x24 --seed 3

Sample inputs are taken from ``NAME.inputs.pt`` beside ``NAME.pt`` when it exists (the
form ``freezeview --inputs`` reads; such files are not walked as models). One line per
model and size is printed: keys pressed, seconds, ``ok`` or ``FAILED`` with the error.
The exit status is 1 when any model failed.

The walking functions (:func:`walk_app` and the contexts) take a running app's Pilot
and nothing of this script's command line, so a test can import them.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import sys
import tempfile
import time
import traceback
import webbrowser
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

#: Sizes the walk runs at, by default (columns, rows).
SIZES: tuple[tuple[int, int], ...] = ((160, 48), (100, 30), (80, 24))
#: Actions never pressed during the walk: they end the app (``q`` comes at the end).
ENDING_ACTIONS = frozenset({"quit", "app.quit", "help_quit", "app.help_quit", "suspend_process"})
#: A key whose answer (its work included) takes longer than this is listed as slow.
SLOW_KEY = 2.0
#: Actions that start work in the engine: the walk lets it finish before the next key.
WORKING_ACTIONS = frozenset(
    {
        "next_step",
        "previous_step",
        "rerun",
        "toggle_preserve",
        "toggle_pass",
        "render",
        "export",
        "graph_view",
        "zoom_in",
        "zoom_out",
        "open_box",
        "toggle_diff",
        "select",
        "select_cursor",
        "toggle_node",
    }
)
#: Actions that write everything ``freezeview export`` writes: pressed once per size at
#: the last step, unless every key at every step is asked for (``--every-step-export``).
ONCE_ACTIONS = frozenset({"export", "open_output"})


@dataclass
class WalkResult:
    """What one walk of one app did."""

    keys: int = 0
    steps: int = 0
    contexts: dict[str, int] = field(default_factory=dict)
    #: Keys after which the app had not settled within the timeout (not a failure).
    slow: list[str] = field(default_factory=list)
    #: Keys that took longer than :data:`SLOW_KEY` seconds, with their time.
    slow_keys: list[str] = field(default_factory=list)
    #: Invariants that did not hold (the header's step against the timeline's).
    broken: list[str] = field(default_factory=list)


# -- waiting -------------------------------------------------------------------------------
def _busy(app: Any) -> bool:
    """True while the app's screen or workers are still working."""
    from textual.worker import WorkerState

    screen = app.main_screen
    if getattr(screen, "loading_model", False) or getattr(screen, "stepping", False):
        return True
    if screen.run_state.explaining:
        return True
    ir_pane = getattr(screen, "ir_pane", None)
    if ir_pane is not None and getattr(ir_pane, "taking_graph", False):
        return True
    return any(w.state in (WorkerState.PENDING, WorkerState.RUNNING) for w in app.workers)


async def settle(pilot: Any, timeout: float = 60.0) -> bool:
    """Wait until the model is loaded, the run has arrived and no worker runs (False on
    timeout, or when the app has ended)."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if app._exit_renderables or not app.is_running:
            return False
        screen = app.main_screen
        if screen.has_class("-failed"):
            return True
        if getattr(screen, "run_id", 1) > 0 and not _busy(app):
            await pilot.pause()
            return True
    return False


# -- contexts ------------------------------------------------------------------------------
async def back_to_main(pilot: Any) -> None:
    """Close whatever screen (help, palette) is above the main screen."""
    app = pilot.app
    for _ in range(5):
        if app.screen is app.main_screen:
            return
        app.pop_screen()
        await pilot.pause()


#: A narrow terminal's panes (its tabs) and the widget that holds each.
_NARROW_PANES = {
    "model": "model-pane",
    "ir": "ir-pane",
    "inspector": "inspector-pane",
    "steps": "steps-bar",
}


async def _focus(pilot: Any, widget: Any) -> None:
    await back_to_main(pilot)
    screen = pilot.app.main_screen
    if screen.graph_shown:
        screen.action_graph_view()  # hide it: the panes come back
        await pilot.pause()
    if screen.has_class("-narrow"):
        # A narrow terminal shows one pane: the one holding the widget, by its tab.
        for pane, pane_id in _NARROW_PANES.items():
            if widget in screen.query_one(f"#{pane_id}").walk_children():
                screen.narrow_pane = pane
                break
        await pilot.pause()
    widget.focus()
    await pilot.pause()


async def enter_tree(pilot: Any) -> None:
    """Focus the model tree."""
    await _focus(pilot, pilot.app.main_screen.model_tree)


async def enter_ir(pilot: Any) -> None:
    """Focus the IR pane's text."""
    await _focus(pilot, pilot.app.main_screen.ir)


async def enter_steps(pilot: Any) -> None:
    """Focus the steps timeline."""
    await _focus(pilot, pilot.app.main_screen.steps_bar.timeline)


async def enter_passes(pilot: Any) -> None:
    """Focus the passes list."""
    await _focus(pilot, pilot.app.main_screen.steps_bar.passes)


async def enter_graph(pilot: Any) -> None:
    """Show the graph view (``v``) and focus its canvas."""
    await back_to_main(pilot)
    screen = pilot.app.main_screen
    if not screen.graph_shown:
        await pilot.press("v")
        await settle(pilot)
    screen.graph_view.canvas_view.focus()
    await pilot.pause()


async def enter_help(pilot: Any) -> None:
    """Open the help screen (``?``)."""
    from freezeview.ui.screens.help import HelpScreen

    await back_to_main(pilot)
    await pilot.press("question_mark")
    await pilot.pause()
    assert isinstance(pilot.app.screen, HelpScreen), "? did not open the help screen"


async def enter_palette(pilot: Any) -> None:
    """Open the command palette."""
    from textual.command import CommandPalette

    await back_to_main(pilot)
    pilot.app.action_command_palette()
    await pilot.pause()
    assert isinstance(pilot.app.screen, CommandPalette), "the command palette did not open"


def _in_context(app: Any, name: str) -> bool:
    """Whether the app is still in the context ``name`` (a key may have left it)."""
    from textual.command import CommandPalette

    from freezeview.ui.screens.help import HelpScreen

    screen = app.main_screen
    if name == "help":
        return isinstance(app.screen, HelpScreen)
    if name == "palette":
        return isinstance(app.screen, CommandPalette)
    if app.screen is not screen:
        return False
    if name.startswith("graph"):
        return bool(screen.graph_shown)
    widgets = {
        "tree": screen.model_tree,
        "ir": screen.ir,
        "steps": screen.steps_bar.timeline,
        "passes": screen.steps_bar.passes,
    }
    return app.focused is widgets[name] and not screen.graph_shown


#: The contexts walked at each step, in order.
WALKED = ("tree", "ir", "steps", "passes", "graph", "help", "palette")

CONTEXTS: dict[str, Callable[[Any], Awaitable[None]]] = {
    "tree": enter_tree,
    "ir": enter_ir,
    "steps": enter_steps,
    "passes": enter_passes,
    "graph": enter_graph,
    "help": enter_help,
    "palette": enter_palette,
}


def context_keys(app: Any, *, once_actions: bool, own_only: bool = False) -> list[str]:
    """Every key Textual has bound in the app's current context, less those that end it;
    with ``own_only``, less the main screen's and the app's keys too (the context's own).

    ``enter`` in the command palette runs its highlighted command (it may be *Quit*):
    it is left out there (:func:`walk_palette_commands` runs the palette's commands).
    """
    from textual.command import CommandPalette

    keys = []
    for key, active in app.screen.active_bindings.items():
        action = active.binding.action
        if action in ENDING_ACTIONS or action.split("(")[0] in ENDING_ACTIONS:
            continue
        if not once_actions and action in ONCE_ACTIONS:
            continue
        if key == "enter" and isinstance(app.screen, CommandPalette):
            continue
        if own_only and (active.node is app or active.node is app.main_screen):
            continue
        keys.append(key)
    return keys


def _action_of(app: Any, key: str) -> str:
    active = app.screen.active_bindings.get(key)
    return active.binding.action if active is not None else ""


async def press(pilot: Any, key: str, result: WalkResult, label: str) -> None:
    """Press ``key``; let the engine work it starts finish when it starts some."""
    action = _action_of(pilot.app, key)
    start = time.monotonic()
    await pilot.press(key)
    result.keys += 1
    if action in WORKING_ACTIONS and not await settle(pilot, 120.0):
        if not pilot.app.is_running:
            raise RuntimeError(f"the app ended after {label}: {key}")
        result.slow.append(f"{label}:{key}")
    if not pilot.app.is_running:
        raise RuntimeError(f"the app ended after {label}: {key}")
    seconds = time.monotonic() - start
    if seconds > SLOW_KEY:
        result.slow_keys.append(f"{label}:{key} {seconds:.1f} s")


async def walk_context(
    pilot: Any, name: str, result: WalkResult, label: str, *, once_actions: bool, own_only: bool
) -> set[str]:
    """Enter context ``name`` and press each of its keys there (re-entering it when a key
    left it); the keys pressed."""
    enter = CONTEXTS[name.split("@")[0]]
    await enter(pilot)
    keys = context_keys(pilot.app, once_actions=once_actions, own_only=own_only)
    result.contexts[name] = result.contexts.get(name, 0) + len(keys)
    for key in keys:
        if not _in_context(pilot.app, name):
            await enter(pilot)
        await press(pilot, key, result, f"{label} {name}")
    await back_to_main(pilot)
    return set(keys)


async def walk_graph_levels(
    pilot: Any, result: WalkResult, label: str, *, once_actions: bool, own_only: bool
) -> set[str]:
    """The graph view's keys at each of its zoom levels, coarsest first."""
    await enter_graph(pilot)
    view = pilot.app.main_screen.graph_view
    levels_of = getattr(view, "_levels", None)
    count = len(levels_of()) if callable(levels_of) else 4
    for _ in range(max(count, 1)):  # to the top level
        await press(pilot, "minus", result, f"{label} graph")
    seen: set[str] = set()
    for level in range(max(count, 1)):
        await enter_graph(pilot)
        for _ in range(level):
            await press(pilot, "plus", result, f"{label} graph")
        # The screen's keys at the coarsest level only (unless every key everywhere).
        own = own_only or level > 0
        keys = context_keys(pilot.app, once_actions=once_actions, own_only=own)
        result.contexts[f"graph@{level}"] = result.contexts.get(f"graph@{level}", 0) + len(keys)
        for key in keys:
            if not _in_context(pilot.app, "graph"):
                await enter_graph(pilot)
            await press(pilot, key, result, f"{label} graph@{level}")
        seen.update(keys)
    await _focus(pilot, pilot.app.main_screen.ir)
    return seen


async def walk_palette_commands(pilot: Any, result: WalkResult, label: str) -> None:
    """Run one of the main screen's keys from the command palette, by its description."""
    from freezeview.ui.screens.main_keys import MAIN_KEYS

    index = result.steps % len(MAIN_KEYS)
    binding: Any = MAIN_KEYS[index]
    if binding.action in ENDING_ACTIONS or binding.action in ONCE_ACTIONS:
        return
    await enter_palette(pilot)
    await pilot.press(*binding.description)
    await pilot.pause(0.3)  # the palette's search runs in a worker
    await pilot.press("enter")
    result.keys += len(binding.description) + 1
    await settle(pilot)
    await back_to_main(pilot)


async def goto_step(pilot: Any, index: int) -> int:
    """Select step ``index`` (clamped to the steps there are) with ``n``/``p``."""
    screen = pilot.app.main_screen
    await back_to_main(pilot)
    for _ in range(2 * max(len(screen.steps), 1) + 2):
        target = min(index, len(screen.steps) - 1)
        if screen.current_step == target or target < 0:
            return target
        await pilot.press("n" if screen.current_step < target else "p")
        await settle(pilot)
    return screen.current_step  # type: ignore[no-any-return]


def check_invariants(app: Any, result: WalkResult, label: str) -> None:
    """The step shown is the timeline's selected row (unless the timeline has the focus:
    its cursor then moves on its own, as the user reads the rows)."""
    screen = app.main_screen
    timeline = screen.steps_bar.timeline
    row = timeline.cursor_row
    if screen.steps and not timeline.has_focus and row != screen.current_step:
        result.broken.append(f"{label}: step {screen.current_step} shown, timeline row {row}")


async def walk_app(
    pilot: Any,
    *,
    seed: int = 0,
    random_keys: int = 200,
    every_step_export: bool = False,
    full: bool = False,
    max_steps: int = 0,
    log: Callable[[str], None] | None = None,
) -> WalkResult:
    """Walk every context's keys at every step, then ``random_keys`` keys in a seeded
    random order. Raises whatever the app raised (run it with ``FREEZEVIEW_STRICT_UI=1``).

    Every context's own keys are pressed at every step; the main screen's keys (``n``,
    ``r``, ``space``, ...: bound on the screen, so the same wherever the focus is) in
    every context too with ``full``, else in one context per step, each context in turn.
    ``max_steps`` (0: every step) walks that many steps, spread from the first to the last.
    """
    result = WalkResult()
    app = pilot.app
    if not await settle(pilot, 300.0):
        result.slow.append("load")
    screen = app.main_screen
    every_key: set[str] = set()
    index = 0
    while True:
        step = await goto_step(pilot, index)
        label = f"step {step}"
        if log is not None:
            log(
                f"  {label}/{len(screen.steps)} keys so far {result.keys}, "
                f"slow: {result.slow_keys[-8:]}"
            )
        last = step >= len(screen.steps) - 1
        once = every_step_export or last
        # The main screen's keys (the same in every context) are pressed in every
        # context with ``full``, else in one context per step, in turn.
        turn = WALKED[result.steps % len(WALKED)]
        for name in WALKED:
            await goto_step(pilot, step)
            own = not full and name != turn
            if name == "graph":
                every_key |= await walk_graph_levels(
                    pilot, result, label, once_actions=once, own_only=own
                )
            else:
                every_key |= await walk_context(
                    pilot, name, result, label, once_actions=once, own_only=own
                )
        await walk_palette_commands(pilot, result, label)
        await goto_step(pilot, step)
        check_invariants(app, result, label)
        result.steps += 1
        index = step + 1
        if max_steps and result.steps < max_steps and len(screen.steps) > max_steps:
            # A quick walk: the steps spread from the first to the last.
            index = max(index, round(result.steps * (len(screen.steps) - 1) / (max_steps - 1)))
        if index >= len(screen.steps) or (max_steps and result.steps >= max_steps):
            break
    rng = random.Random(seed)
    pool = sorted(every_key)
    for _ in range(random_keys if pool else 0):
        key = rng.choice(pool)
        action = _action_of(app, key)
        if action in ENDING_ACTIONS or (key == "enter" and app.screen is not screen):
            continue
        await press(pilot, key, result, f"random (seed {seed})")
    await back_to_main(pilot)
    await settle(pilot)
    return result


# -- the script ----------------------------------------------------------------------------
def models_in(folder: Path, only: Iterable[str] = ()) -> list[tuple[Path, Path | None]]:
    """The ``.pt`` models of ``folder`` with their ``NAME.inputs.pt``, if any."""
    wanted = set(only)
    out = []
    for path in sorted(folder.glob("*.pt")):
        if path.name.endswith(".inputs.pt"):
            continue
        if wanted and path.stem not in wanted:
            continue
        inputs = path.with_name(f"{path.stem}.inputs.pt")
        out.append((path, inputs if inputs.exists() else None))
    return out


async def walk_model(
    path: Path,
    inputs: Path | None,
    size: tuple[int, int],
    *,
    seed: int,
    random_keys: int,
    every_step_export: bool,
    full: bool,
    max_steps: int,
    time_budget: float,
    verbose: bool,
) -> tuple[WalkResult, int | None]:
    """Open the app on ``path`` at ``size``, walk it, quit with ``q``; the walk and the
    app's exit status."""
    from freezeview.session import SessionOptions
    from freezeview.ui import FreezeviewApp

    out = Path(tempfile.mkdtemp(prefix=f"walk-{path.stem}-"))
    app = FreezeviewApp(
        path,
        options=SessionOptions(inputs_file=inputs, time_budget=time_budget),
        output_dir=out,
        show_timings=False,
    )
    log = (lambda text: print(text, file=sys.stderr, flush=True)) if verbose else None
    async with app.run_test(size=size) as pilot:
        result = await walk_app(
            pilot,
            seed=seed,
            random_keys=random_keys,
            every_step_export=every_step_export,
            full=full,
            max_steps=max_steps,
            log=log,
        )
        await pilot.press("q")
        await pilot.pause()
    return result, app.return_code


def main(argv: list[str] | None = None) -> int:
    """Walk every model of the folder at every size; 1 when any failed."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("folder", type=Path, help="a directory of TorchScript .pt files")
    parser.add_argument("--only", action="append", default=[], help="walk only this model")
    parser.add_argument("--sizes", default=",".join(f"{c}x{r}" for c, r in SIZES))
    parser.add_argument("--seed", type=int, default=0, help="seed of the random key order")
    parser.add_argument("--random-keys", type=int, default=200, help="random keys per walk")
    parser.add_argument(
        "--every-step-export", action="store_true", help="press e and o at every step too"
    )
    parser.add_argument(
        "--time-budget",
        type=float,
        default=0.05,
        help="seconds of timing per step in the app (its --time-budget)",
    )
    parser.add_argument(
        "--full",
        action="store_true",
        help="press the main screen's keys in every context at every step (slow: r re-runs)",
    )
    parser.add_argument(
        "--max-steps",
        type=int,
        default=0,
        help="a quick walk: this many steps, first to last (default 0: every step)",
    )
    parser.add_argument("--verbose", action="store_true", help="say each step on stderr")
    args = parser.parse_args(argv)
    os.environ["FREEZEVIEW_STRICT_UI"] = "1"  # any error ends the app and fails the walk
    webbrowser.open = lambda *a, **k: True  # type: ignore[assignment,unused-ignore]  # o
    sizes = [tuple(int(n) for n in s.split("x")) for s in args.sizes.split(",")]
    failed = 0
    for path, inputs in models_in(args.folder, args.only):
        for cols, rows in sizes:
            start = time.perf_counter()
            try:
                result, status = asyncio.run(
                    walk_model(
                        path,
                        inputs,
                        (cols, rows),
                        seed=args.seed,
                        random_keys=args.random_keys,
                        every_step_export=args.every_step_export,
                        full=args.full,
                        max_steps=args.max_steps,
                        time_budget=args.time_budget,
                        verbose=args.verbose,
                    )
                )
            except Exception as error:  # any error of the app: the walk failed
                failed += 1
                seconds = time.perf_counter() - start
                tail = "".join(traceback.format_exception(error)[-3:]).strip().replace("\n", " | ")
                print(f"{path.stem} {cols}x{rows}: {seconds:.0f} s FAILED {tail}", flush=True)
                continue
            seconds = time.perf_counter() - start
            ok = status == 0
            failed += not ok
            verdict = "ok" if ok else f"FAILED exit status {status}"
            extra = ""
            if result.slow:
                extra += f" slow: {', '.join(result.slow[:5])}"
            if result.slow_keys:
                extra += f"; {len(result.slow_keys)} keys over {SLOW_KEY:.0f} s"
                worst = sorted(result.slow_keys, key=lambda k: -float(k.split()[-2]))[:3]
                extra += f" (slowest: {', '.join(worst)})"
            if result.broken:
                extra += f" invariants broken: {'; '.join(result.broken[:3])}"
            print(
                f"{path.stem} {cols}x{rows}: {result.keys} keys, {result.steps} steps, "
                f"{seconds:.0f} s {verdict}{extra}",
                flush=True,
            )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
