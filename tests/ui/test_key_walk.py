"""A seeded walk of every key the app binds, in every context, on every corpus family.

The keys are not listed here: each context's keys are what the app says is bound there
(``App.active_bindings``: the focused widget's, its containers', the screen's and the
app's ``BINDINGS``), so a new key is walked as soon as it is bound. The contexts are the
model tree, the IR pane, the timeline, the pass list, the graph view at each of its
levels, the help screen and the command palette. After every key the app is still
running (the suite runs it strict: any error in a handler or a render ends it and fails
the test, tests/conftest.py) and what it shows agrees with itself:

- the step in the IR pane's header = the timeline's current row = the diff header's
  step = the graph view's title = the prefix of the files ``g`` writes = the number
  ``freezeview freeze`` gives the step (counted from 0), under one title;
- the inspector describes the selected box of the graph view (a removed op from the
  graph it was removed from);
- a hidden graph view takes no room on screen.

The fast set walks the small model for a few dozen keys. The slow set walks every step
of every family (conv-bn, quantized, RNN, transformer, fork, interface, already-frozen,
and a run whose pass fails) and, at each step, every context: each context's keys are
spread over the steps in turn (a key of a context at every ``spread``-th step, the
steps taking turns), so that every key is pressed in every context of every family
within the suite's time (a key costs the app a frame or more, tens of milliseconds).
``FREEZEVIEW_FULL_WALK=1`` presses every key in every context at every step (minutes a
family); ``scripts/walk_real_models.py`` does the same on real models.
"""

from __future__ import annotations

import json
import os
import random
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from textual.command import CommandPalette
from textual.widgets import Input
from textual.worker import WorkerState

from freezeview.session import SessionOptions
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp
from freezeview.ui.screens.main import MainScreen

from .conftest import step_graph, wait_ready

pytestmark = pytest.mark.asyncio

#: Actions never walked: they end the app or the process (``q`` ends the walk instead).
_NOT_WALKED = {"quit", "app.quit", "suspend_process", "app.suspend_process"}
#: Actions that take seconds (a whole export, a migration with sample inputs): walked once
#: per model, not at each step. (The walk's models have no sample inputs: its ``m`` says
#: so in one sentence, and its keys, write and run again, say why they cannot.)
_ONCE = {"export", "migrate"}
#: Actions that move to another step or start another run (walked on their own).
_MOVES = {"next_step", "previous_step", "rerun"}
#: Graph view actions that do the same at every step and level of a model without sample
#: inputs (the heat overlay says it needs them): walked once per model, in the view.
_GRAPH_ONCE = {"toggle_heat"}

#: Every key at every step (``FREEZEVIEW_FULL_WALK=1``), or each key of a context at one
#: step in ``spread`` (the module docstring).
FULL_WALK = os.environ.get("FREEZEVIEW_FULL_WALK") == "1"

#: The corpus family -> the case that stands for it (tests/corpus), or a model of ours.
FAMILIES = {
    "conv-bn": "conv_bn_relu",
    "quantized": "dynamic_quantized_linear",
    "rnn": "rnn_gru_batch_first",
    "transformer": "transformer",
    "fork": "fork",
    "interface": "module_interface",
    "already-frozen": "frozen_conv_bn",
    "failing-step": "small",
}


# -- models ---------------------------------------------------------------------------
def _save(family: str, folder: Path) -> Path:
    import torch

    path = folder / f"{family}.pt"
    case = FAMILIES[family]
    if case == "small":
        from .models import save_small

        return save_small(path)
    if case == "transformer":
        from torch import nn

        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(8, 2, 16, batch_first=True)
        module = nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
        torch.jit.save(torch.jit.script(module), str(path))
        return path
    from corpus import case_by_name

    torch.jit.save(case_by_name(case).build(), str(path))
    return path


@pytest.fixture
def failing_pass(monkeypatch: pytest.MonkeyPatch) -> str:
    """A pass that raises, registered for this test: its step fails in the app."""
    import torch

    from freezeview.engine.freeze import passes

    def boom(graph: torch._C.Graph, method: str, module: torch._C.ScriptModule) -> bool:
        raise RuntimeError("injected failure")

    info = passes.PassInfo(
        "boom", "boom", "always fails", True, "once", "never", "_jit_pass_inline", boom
    )
    monkeypatch.setitem(passes.REGISTRY, "boom", info)  # type: ignore[index]
    return "boom"


def _cli_steps(path: Path, tmp: Path, passes: list[str] | None) -> list[tuple[int, str]]:
    """``freezeview freeze --json``'s (index, title) per step, run as the CLI runs."""
    import contextlib
    import io

    from freezeview.cli import main

    out = io.StringIO()
    argv = ["freeze", str(path), "-o", str(tmp / "cli-frozen.pt"), "--json"]
    if passes is not None:
        argv += ["--passes", ",".join(passes)]
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        main(argv)
    steps = []
    for line in out.getvalue().splitlines():
        if line.startswith("{"):
            doc = json.loads(line)
            if "index" in doc and "title" in doc:
                steps.append((int(doc["index"]), str(doc["title"])))
    return steps


# -- the app ---------------------------------------------------------------------------
def _app(path: Path, tmp: Path, passes: list[str] | None = None) -> FreezeviewApp:
    return FreezeviewApp(
        path,
        output_dir=tmp / "out",
        show_timings=False,
        # The session runs the plan: the app's own ``passes`` only seed a session it
        # makes itself (the CLI's RemoteSession gets them the same way).
        session=Session(path=path, options=SessionOptions(passes=passes)),
        options=SessionOptions(passes=passes),
    )


def _busy(app: FreezeviewApp) -> bool:
    screen = app.main_screen
    running = (WorkerState.PENDING, WorkerState.RUNNING)
    return bool(
        screen.loading_model
        or screen.stepping
        or screen.run_state.explaining
        or screen.ir_pane.taking_graph
        or (screen.graph_shown and screen.steps and not screen.graph_view.ready)
        or any(w.state in running for w in app.workers)
    )


async def _settle(pilot: Any, timeout: float = 20.0) -> None:
    """Wait until nothing the last key started is still under way."""
    app = pilot.app
    deadline = time.monotonic() + timeout
    await pilot.pause()
    if not _busy(app):
        return
    while _busy(app) and time.monotonic() < deadline:
        await pilot.pause(0.01)
    await pilot.pause()


class Walk:
    """What the walk checks after each key (see the module docstring)."""

    def __init__(self, pilot: Any, cli: list[tuple[int, str]], seed: int, seen: list[Any]) -> None:
        self.pilot = pilot
        #: Every selection the graph view handed the inspector (the ``selections``
        #: fixture); ``fresh`` marks where the last key's begin.
        self.seen = seen
        self.fresh = 0
        self.app: FreezeviewApp = pilot.app
        self.cli = cli
        self.rng = random.Random(seed)
        self.pressed = 0
        self.rendered: Path | None = None
        #: A context's key is pressed at one turn in ``spread`` (1: at every turn); the
        #: turn is the step, or in the graph view its visit and level.
        self.spread = 1
        self.turn = 0
        self.graph_visits = 0
        #: The modal screens whose keys were walked (a spread walk walks each once).
        self.modals_walked: set[str] = set()

    @property
    def screen(self) -> MainScreen:
        return self.app.main_screen

    async def press(self, key: str, *, typed: bool = False) -> None:
        """``key`` as a binding's key (``App.simulate_key``: the app handles it as a key
        from the terminal), or ``typed`` as a character into an input (``Pilot.press``);
        then everything it started is waited for."""
        self.pressed += 1
        self.fresh = len(self.seen)
        if typed or isinstance(self.app.focused, Input):
            await self.pilot.press(key)
        else:
            # Pilot.press would also wait for the process to look idle, a tenth of a
            # second a key; _settle waits on the app's own state instead.
            self.app.simulate_key(key)
        await _settle(self.pilot)
        assert self.app.is_running, f"the app ended on {key!r}"
        if self.app.screen is self.screen:
            self.check(key)
            self.check_selection()

    # -- the invariants -------------------------------------------------------------
    def check(self, key: str) -> None:
        screen = self.screen
        graph = screen.graph_view
        if not screen.graph_shown:
            assert not graph.display and graph.region.area == 0, f"{key}: a hidden graph shows"
        index = screen.current_step
        if not 0 <= index < len(screen.steps):
            return
        step = screen.steps[index]
        said = f"step {step.index} · {step.title}"
        if self.cli:
            assert self.cli[index] == (step.index, step.title), (key, self.cli[index], said)
        assert said in str(screen.query_one("#ir-title").render()), key
        timeline = screen.steps_bar.timeline
        if index < timeline.row_count:
            row = timeline.get_row_at(index)
            assert str(row[0]) == str(step.index) and str(row[1]).startswith(step.title), key
            if not timeline.has_focus:
                assert timeline.cursor_row == index, f"{key}: the timeline shows another row"
        if screen.view_mode == "diff" and index > 0:
            heads = [x for x in screen.ir.document.splitlines()[:4] if x.startswith("+++ ")]
            assert not heads or heads[0] == f"+++ {step.index} · {step.title}", (key, heads)
        if screen.graph_shown and graph.ready:
            assert said[: len("step 0")] in str(graph.query_one("#graph-title").render()), key
        last = screen.delivery.last
        if key == "g" and last is not None and last != self.rendered:
            self.rendered = last
            assert last.name.startswith(f"{step.index:02d}-"), (last.name, said)

    def check_selection(self) -> None:
        """The inspector says what the box the last key selected in the graph view is."""
        view = self.screen.graph_view
        box = view.selected
        if box is None or len(self.seen) <= self.fresh or not self.screen.graph_shown:
            return
        shown, snapshot, node_id = self.seen[-1]
        if shown is not box or snapshot is None or node_id is None:
            return
        index = self.screen.current_step
        own = index - 1 if box.role == "ghost" else index
        expected = step_graph(self.screen, own)
        assert len(snapshot.nodes_in_order()) == len(expected.nodes_in_order()), box.lines
        kind = snapshot.node(node_id).kind
        assert kind in self.screen.inspector.plain_text(200), (kind, box.lines)

    # -- contexts ---------------------------------------------------------------------
    def keys(self, *, moves: bool = False, once: bool = False, own: bool = False) -> list[str]:
        """The keys bound where the focus is now (one key per binding), shuffled;
        ``own``: only the focused widget's and its containers' (not the screen's or
        the app's, which work the same from every context)."""
        out = []
        for key, active in self.app.active_bindings.items():
            if own and (active.node is self.app or isinstance(active.node, MainScreen)):
                continue
            action = active.binding.action
            if action in _NOT_WALKED or (action in _MOVES and not moves):
                continue
            if action in _ONCE and not once:
                continue
            if action in _GRAPH_ONCE and self.spread > 1:
                continue
            out.append(key)
        self.rng.shuffle(out)
        return out

    async def leave_modal(self) -> None:
        """Back to the main screen, an input closed."""
        for _ in range(4):
            focused = self.app.focused
            if self.app.screen is self.screen and not isinstance(focused, Input):
                return
            await self.pilot.press("escape")
            await _settle(self.pilot)

    async def modal(self) -> None:
        """The help screen or the palette: each of its keys, typing, then back (in a
        spread walk, its keys the first time each modal opens; later only back)."""
        kind = type(self.app.screen).__name__
        if self.spread > 1 and kind in self.modals_walked:
            await self.leave_modal()
            return
        self.modals_walked.add(kind)
        if isinstance(self.app.screen, CommandPalette):
            # Typing filters the commands; enter would run one (quit among them).
            for key in ("n", "e", "down", "up", "backspace"):
                await self.press(key, typed=True)
        else:
            for key in self.keys():
                if self.app.screen is self.screen:
                    break
                action = self.app.active_bindings[key].binding.action
                if action not in ("dismiss", "app.pop_screen"):
                    await self.press(key)
        await self.leave_modal()

    async def sweep(self, focus: Callable[[], None], own: bool = True) -> None:
        """Every key bound in one context (its own, or with ``own`` False the screen's
        and the app's too), each pressed from that context."""
        focus()
        await _settle(self.pilot)
        keys = self.keys(own=own)
        if self.spread > 1:
            # This step's turn of the context's keys: over ``spread`` steps, each once.
            order = sorted(keys)
            keys = [k for k in keys if (order.index(k) + self.turn) % self.spread == 0]
        for key in keys:
            focus()
            await self.press(key)
            if self.app.screen is not self.screen:
                await self.modal()
            elif isinstance(self.app.focused, Input):
                for typed in ("c", "o", "enter"):
                    await self.press(typed, typed=True)
                await self.leave_modal()
            if self.screen.current_step != self.index:
                await self.go_to(self.index)

    index = -1

    async def go_to(self, index: int) -> None:
        """Show step ``index`` (n and p, as a user moves)."""
        screen = self.screen
        for _ in range(2 * len(screen.steps) + 2):
            if screen.current_step == index:
                return
            await self.press("n" if screen.current_step < index else "p")
        assert screen.current_step == index

    def focus(self, selector: str) -> Callable[[], None]:
        def put() -> None:
            if self.screen.has_class("-narrow"):
                pane = {"#tree": "model", "#ir": "ir", "#timeline": "steps", "#passes": "steps"}
                self.screen.narrow_pane = pane.get(selector, "ir")
            widget = self.screen.query_one(selector)
            if widget.display and widget.focusable:
                widget.focus()

        return put

    async def graph_levels(self) -> None:
        """The graph view at every level: each of its keys at each (in a spread walk,
        each key at each level over two visits, the levels taking turns)."""
        screen = self.screen
        if not screen.graph_shown:
            await self.press("v")
        view = screen.graph_view
        layout = view.layout_shown
        levels = len(layout.levels) if layout is not None else 1
        spread, turn = self.spread, self.turn
        if spread > 1:
            self.spread = 2
        for level in range(levels):
            self.turn = self.graph_visits + level
            await self.sweep(lambda: view.canvas_view.focus() if view.display else None)
            for _ in range(self.rng.randint(1, 3)):
                await self.press("right_square_bracket")
            if not screen.graph_shown:
                await self.press("v")
            view.canvas_view.focus()
            await self.press("plus")
        self.spread, self.turn = spread, turn
        if self.graph_visits == 0 and spread > 1 and view.display:
            for action in sorted(_GRAPH_ONCE):  # once a model (see _GRAPH_ONCE)
                view.canvas_view.focus()
                key = next(
                    k for k, a in self.app.active_bindings.items() if a.binding.action == action
                )
                await self.press(key)
                status = str(screen.query_one("#status").render())
                assert not view.heat and "sample inputs" in status, status
        self.graph_visits += 1
        if screen.graph_shown:
            await self.press("v")


@pytest.fixture
def selections(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Any]]:
    """Every selection the graph view hands the inspector: (box, snapshot, node id)."""
    from freezeview.ui.screens import main

    seen: list[Any] = []
    panel = main.selection_panel

    def recording(box, snapshot, node_id, views, inventory):  # type: ignore[no-untyped-def]
        seen.append((box, snapshot, node_id))
        return panel(box, snapshot, node_id, views, inventory)

    monkeypatch.setattr(main, "selection_panel", recording)
    monkeypatch.setattr("freezeview.ui.screens.delivery.has_local_browser", lambda: False)
    yield seen


async def _walk_everything(
    path: Path, tmp: Path, seen: list[Any], size: tuple[int, int], passes: list[str] | None
) -> int:
    """Every key in every context at every step; the number of keys pressed."""
    cli = _cli_steps(path, tmp, passes)
    app = _app(path, tmp, passes)
    async with app.run_test(size=size) as pilot:
        await wait_ready(pilot)
        walk = Walk(pilot, [] if passes else cli, seed=len(path.name), seen=seen)
        screen = app.main_screen
        if not FULL_WALK:
            walk.spread = max(1, len(screen.steps))
        assert not screen.has_class("-failed"), "the model did not load"
        if passes:
            # The same plan as the CLI's, stopped at the same failed step.
            assert [(s.index, s.title) for s in screen.steps] == cli
            assert screen.steps[-1].error
        contexts = ["#tree", "#ir", "#timeline", "#passes"]
        for index in range(len(screen.steps)):
            walk.index = walk.turn = index
            await walk.go_to(index)
            # The screen's and the app's keys from one context, chosen by the seed;
            # each context's own keys from each.
            await walk.sweep(walk.focus(walk.rng.choice(contexts)), own=False)
            for selector in contexts:
                await walk.sweep(walk.focus(selector))
            # The graph view's levels: at every step in a full walk, else at a step with
            # a diff to draw and at the last.
            if FULL_WALK or index in (min(1, len(screen.steps) - 1), len(screen.steps) - 1):
                await walk.graph_levels()
            await walk.go_to(index)
        # What moves or takes long: once (the migrate screen's own keys with it).
        for key in walk.keys(moves=True, once=True):
            await walk.press(key)
            if app.screen is not screen:
                await walk.modal()
            await walk.leave_modal()
        assert "MigrateScreen" in walk.modals_walked
        await walk.press("ctrl+p")
        await walk.modal()
        await pilot.press("q")
        await pilot.pause()
    assert app.return_code == 0
    return walk.pressed


async def test_a_short_walk(small_pt: Path, tmp_path: Path, selections: list[Any]) -> None:
    """The fast set's walk: the small model, a seeded random order of keys from every
    context, the invariants after each."""
    cli = _cli_steps(small_pt, tmp_path, None)
    app = _app(small_pt, tmp_path)
    rng = random.Random(38)
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot)
        walk = Walk(pilot, cli, seed=38, seen=selections)
        screen = app.main_screen
        assert [(s.index, s.title) for s in screen.steps] == cli
        contexts = [walk.focus(s) for s in ("#tree", "#ir", "#timeline", "#passes")]
        await walk.press("n")
        await walk.press("v")
        contexts.append(lambda: screen.graph_view.canvas_view.focus())
        for _ in range(24):
            rng.choice(contexts)()
            keys = walk.keys(moves=True)
            if not keys:
                continue
            await walk.press(keys[0])
            if app.screen is not screen:
                await walk.modal()
            await walk.leave_modal()
        # The graph view at a step with removed ops: every box, each described.
        await walk.go_to(1)
        if not screen.graph_shown:
            await walk.press("v")
        for _ in range(8):
            await walk.press("right_square_bracket")
        await walk.press("g")
        assert walk.rendered is not None
        await pilot.press("q")
    assert app.return_code == 0


#: Each family is walked at one terminal size, the sizes taking turns, so the walk sees
#: the wide, the middle and the narrow layout (the narrow one has tabs for its panes).
SIZES = ((160, 48), (100, 30), (80, 24))

#: The slow walks run one after another on one xdist worker, from the start of the run:
#: a walk spends most of its time waiting for the app's frames and workers, and three at
#: once (one a worker) leave the machine's cores idle, while one beside two workers
#: that compute keeps them busy.
_ONE_WORKER = pytest.mark.xdist_group("key-walk")


@pytest.mark.slow
@_ONE_WORKER
@pytest.mark.parametrize("family", [f for f in FAMILIES if f != "failing-step"])
async def test_every_key_everywhere(family: str, tmp_path: Path, selections: list[Any]) -> None:
    path = _save(family, tmp_path)
    size = SIZES[list(FAMILIES).index(family) % len(SIZES)]
    pressed = await _walk_everything(path, tmp_path, selections, size, None)
    assert pressed > 100


@pytest.mark.slow
@_ONE_WORKER
async def test_every_key_on_a_failed_step(
    tmp_path: Path, selections: list[Any], failing_pass: str
) -> None:
    path = _save("failing-step", tmp_path)
    passes = ["remove_dropout", failing_pass, "fold_conv_bn"]
    await _walk_everything(path, tmp_path, selections, (80, 24), passes)
