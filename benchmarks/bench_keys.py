"""How long each key of freezeview's app waits on a big graph, and what the screen holds.

Drives the real app (:class:`~freezeview.ui.FreezeviewApp` with its engine process, as
``freezeview MODEL.pt`` runs it) headless with Textual's Pilot, and measures the event
loop's stalls with a 5 ms ticker: its lateness is how long a key pressed at that moment
waits before the screen handles it. For each key the largest stall from the press until
the screen has settled is reported (target: < 100 ms at every size), with the Pilot
round trip (press to every queue drained) against an idle baseline.

Keys, during the first run (steps still arriving) and after it: ``n``/``p`` (stepping),
``d`` (IR → code → diff → IR), ``esc``, the model tree (arrows), ``space`` (a preserved
attribute toggled: explanation again), ``t`` (a pass toggled), ``r`` (a re-run's start
and the steps arriving), ``v`` (the graph view shown, stepped, hidden).

Then the screen's deep garbage collection forced due at an ``r`` (``r deep due``: it
must not run on the key, nor at the run's start, but once the keys have paused; how long
it took then, with no key waiting, is printed). Stalls while a deep collection runs on
the quiet timer (2 s without a key, as the app runs it) are counted apart from the keys'
and printed on their own line: no key is pressed then here, and one pressed in such a
moment by a user would wait for it.

Then the screen process's memory (this process: it runs the screen, the engine is a
child) after the first run and after ``--reruns`` re-runs (r, with preserved attributes
and passes toggled on the way; target: within 10 % of after the first run; an L48
session's screen under 0.5 GB), each read in the IR view, and once while a step's diff
is shown (two graphs and their diff: the most the screen holds).

Run: ``.venv/bin/python benchmarks/bench_keys.py /tmp/fv-ladder/L48.pt [--reruns 50]``.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))


def rss_mb() -> float:
    """This process's resident memory (the screen process), MB."""
    with open(f"/proc/{os.getpid()}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


class Watchdog:
    """``--trace``: print the main thread's stack (and which other threads hold what)
    whenever the event loop has been held for more than ``limit`` seconds."""

    def __init__(self, ticker: Ticker, limit: float = 0.06) -> None:
        import threading

        self.ticker = ticker
        self.limit = limit
        self.main = threading.main_thread().ident
        self.seen: set[str] = set()
        self._stop = False
        threading.Thread(target=self._watch, daemon=True).start()

    def _watch(self) -> None:
        import threading
        import traceback

        while not self._stop:
            time.sleep(0.02)
            late = time.perf_counter() - self.ticker._last
            if late > self.limit:
                frames = sys._current_frames()
                names = {t.ident: t.name for t in threading.enumerate()}
                report = []
                for ident, frame in frames.items():
                    if ident == threading.get_ident():
                        continue
                    stack = traceback.format_stack(frame, limit=12)
                    lines = [x for x in "".join(stack).splitlines() if "/asyncio/" not in x]
                    report.append(f"[{names.get(ident, ident)}]\n" + "\n".join(lines[-10:]))
                key = "".join(r[-300:] for r in report)
                if key not in self.seen:
                    self.seen.add(key)
                    body = "\n".join(report)
                    print(f"--- event loop held {late * 1000:.0f} ms; threads:\n{body}", flush=True)

    def stop(self) -> None:
        self._stop = True


class Ticker:
    """A 5 ms interval on the app's event loop; lateness = how long the loop was held.

    Each tick also notes the CPU time the event loop's own thread used since the last
    (the ticker runs on it): a long stall with little of it behind it was spent waiting,
    for the GIL (another thread of the screen) or for a core (other processes).
    """

    def __init__(self, app: Any, tick: float = 0.005) -> None:
        self.tick = tick
        self.samples: list[tuple[float, float, float]] = []  # (when, lateness, cpu)
        self._last = time.perf_counter()
        self._cpu = time.thread_time()
        self._timer = app.set_interval(tick, self._on_tick)

    def _on_tick(self) -> None:
        now, cpu = time.perf_counter(), time.thread_time()
        self.samples.append((now, now - self._last - self.tick, cpu - self._cpu))
        self._last, self._cpu = now, cpu

    def worst(self, since: float, until: float | None = None) -> tuple[float, float]:
        """The largest stall after ``since`` (and before ``until``), and the event
        loop's own CPU seconds during it. Stalls that overlap a deep collection run by
        the quiet timer (:class:`QuietSweeps`: nobody at the keys for 2 s, no key
        waiting on it here) are counted apart, not as the key's."""
        end = until if until is not None else float("inf")
        picked = [
            (lat, cpu)
            for t, lat, cpu in self.samples
            if since < t <= end and not QuietSweeps.overlaps(t - lat - self.tick, t)
        ]
        return max(picked, default=(0.0, 0.0))

    def quiet_worst(self) -> float:
        """The largest stall overlapping a deep collection run by the quiet timer."""
        return max(
            (lat for t, lat, _ in self.samples if QuietSweeps.overlaps(t - lat - self.tick, t)),
            default=0.0,
        )

    def stop(self) -> None:
        self._timer.stop()


class QuietSweeps:
    """When the screen's deep collections ran on the quiet timer (after 2 s without a
    key, as ``screens/main.py`` runs them): ``(start, end)`` perf_counter pairs. A key
    pressed in such a moment would wait for it; in this benchmark none is, and the
    stall is reported apart from the keys'."""

    spans: list[tuple[float, float]] = []

    @classmethod
    def install(cls) -> None:
        from freezeview.session import collector

        deep = collector.deep_sweep

        def timed() -> float:
            quiet = collector.idle_seconds() >= 2.0  # the quiet timer's, not a run start's
            start = time.perf_counter()
            try:
                return deep()
            finally:
                if quiet:
                    cls.spans.append((start, time.perf_counter()))

        collector.deep_sweep = timed  # deep_sweep_if_due looks the name up per call

    @classmethod
    def overlaps(cls, begin: float, end: float) -> bool:
        return any(begin <= b and end >= a for a, b in cls.spans)


async def wait_ready(pilot: Any, timeout: float) -> None:
    """Until the model is loaded and explained and every step has arrived (as
    tests/ui/conftest.py's, which is not imported: its models import torch, and this
    process stands for the screen's, which never does)."""
    screen = pilot.app.main_screen
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        await pilot.pause(0.02)
        if screen.has_class("-failed"):
            raise RuntimeError("the model did not open")
        busy = screen.loading_model or screen.stepping or screen.run_state.explaining
        if screen.run_id and not busy:
            await pilot.pause()
            return
    raise RuntimeError("the app did not settle in time")


async def settle(pilot: Any, seconds: float = 0.3) -> None:
    """Let what a key started reach the screen (workers' results included)."""
    await pilot.pause(seconds)


async def main_async(args: argparse.Namespace) -> int:
    from freezeview.ui import FreezeviewApp

    path = Path(args.model)
    app = FreezeviewApp(path, output_dir=Path("/tmp") / "fv-bench-keys-out", show_timings=False)
    results: dict[str, list[tuple[float, float]]] = {}
    diff_rss = 0.0
    trips: dict[str, list[float]] = {}

    def record(name: str, stall: tuple[float, float], trip: float | None = None) -> None:
        results.setdefault(name, []).append(stall)
        if trip is not None:
            trips.setdefault(name, []).append(trip)

    QuietSweeps.install()
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        ticker = Ticker(app)
        watchdog = Watchdog(ticker) if args.trace else None

        async def key(name: str, *keys: str, wait: float = 0.3) -> None:
            t0 = time.perf_counter()
            await pilot.press(*keys)
            trip = time.perf_counter() - t0
            await settle(pilot, wait)
            record(name, ticker.worst(t0), trip)

        async def ir_view() -> None:
            while screen.ir_pane.view_mode != "ir":
                await pilot.press("d")
                await settle(pilot, 0.3)

        # -- during the first run: load, explain, steps arriving --------------------
        while screen.loading_model:
            await pilot.pause(0.05)
        t_loaded = time.perf_counter()
        while screen.run_id == 0 or not screen.steps:
            await pilot.pause(0.02)
        while screen.stepping:
            await key("during run: n", "n", wait=0.1)
            await key("during run: d", "d", wait=0.1)
            await key("during run: p", "p", wait=0.1)
        await wait_ready(pilot, timeout=1200)
        record("during run (all)", ticker.worst(t_loaded))
        # Back to the IR view: how many ``d`` the run had time for must not decide
        # which view (IR, code, or a diff holding two graphs) the memory is read in.
        await ir_view()
        await settle(pilot, 1.0)
        first_rss = rss_mb()
        print(f"screen RSS after the first run: {first_rss:.0f} MB", flush=True)

        # -- idle baseline: a key with nothing bound -------------------------------
        for _ in range(5):
            await key("idle (unbound key)", "z", wait=0.05)

        # -- after the run -----------------------------------------------------------
        steps = len(screen.steps)
        for _ in range(steps - 1):
            await key("n", "n")
        for _ in range(min(steps - 1, 4)):
            await key("p", "p")
        for _ in range(2):
            for _ in range(3):
                await key("d", "d", wait=1.0)
                if screen.ir_pane.view_mode == "diff":
                    diff_rss = rss_mb()  # the most the screen holds: two graphs and a diff
        screen.ir_pane.open_search()
        await settle(pilot, 0.1)
        await key("esc", "escape")
        screen.ir.focus()
        await settle(pilot, 0.1)
        for _ in range(6):
            await key("IR: down", "down", wait=0.4)
        await key("IR: pagedown", "pagedown", wait=0.4)
        screen.model_tree.focus()
        await settle(pilot, 0.1)
        for _ in range(8):
            await key("tree: down", "down")
        await key("tree: up", "up")
        await key("v (shown)", "v", wait=2.0)
        await key("v: n", "n", wait=2.0)
        await key("v (hidden)", "v")
        screen.model_tree.focus()
        await settle(pilot, 0.1)

        async def rerun(toggle: Callable[[], Awaitable[None]] | None = None, tag: str = "") -> None:
            if toggle is not None:
                await toggle()
            t0 = time.perf_counter()
            await pilot.press("r")
            record(f"r{tag} (pressed)", ticker.worst(t0), time.perf_counter() - t0)
            await pilot.pause(0.5)
            record(f"r{tag} (start, 0.5 s)", ticker.worst(t0))
            await wait_ready(pilot, timeout=1200)
            record(f"r{tag} (whole re-run)", ticker.worst(t0))

        async def toggle_preserve() -> None:
            screen.model_tree.focus()
            await key("space (preserve)", "space", wait=0.2)
            while screen.run_state.explaining:
                await pilot.pause(0.02)

        async def toggle_pass() -> None:
            passes = screen.steps_bar.passes
            passes.focus()
            passes.highlighted = min(2, passes.option_count - 1)
            await key("t (pass)", "t")

        # The baseline: after the first run and every key above on it (its diffs, the
        # graph view's layouts, the tree's rows), so what re-runs add is what they keep.
        await settle(pilot, 0.5)
        rss = [rss_mb()]
        print(f"screen RSS after the first run and the keys on it: {rss[0]:.0f} MB", flush=True)
        print(f"screen RSS with a step's diff shown: {diff_rss:.0f} MB", flush=True)
        for i in range(args.reruns):
            toggle = (None, toggle_preserve, toggle_pass)[i % 3]
            await rerun(toggle)
            if i % 10 == 9 or i == args.reruns - 1:
                await settle(pilot, 0.5)
                rss.append(rss_mb())
                print(f"screen RSS after {i + 1} re-runs: {rss[-1]:.0f} MB", flush=True)
        # -- the screen's deep garbage collection due (it walks every object the
        # screen tracks): r must not wait for it; it runs once the keys pause (2 s).
        from freezeview.session import collector

        due, collector.DUE_GARBAGE = collector.DUE_GARBAGE, -(10**9)
        share, collector.DUE_SHARE = collector.DUE_SHARE, 0.0
        deep_before = len(collector.deep_sweeps)
        await rerun(tag=" deep due")
        # Right after a re-run (the IR pane receiving the new run's graphs): stepping,
        # the views, the search's esc, the graph view.
        screen.ir.focus()
        await key("after r: n", "n")
        await key("after r: d", "d", wait=1.0)
        await key("after r: p", "p")
        screen.ir_pane.open_search()
        await key("after r: esc", "escape")
        await key("after r: v (shown)", "v", wait=2.0)
        await key("after r: v (hidden)", "v")
        t0 = time.perf_counter()
        while len(collector.deep_sweeps) == deep_before and time.perf_counter() - t0 < 30:
            await pilot.pause(0.1)
        collector.DUE_GARBAGE, collector.DUE_SHARE = due, share
        quiet_deep = collector.deep_sweeps[deep_before:]
        ticker.stop()
        if watchdog is not None:
            watchdog.stop()
        engine_pid = getattr(app.session, "pid", None)

    print(
        f"model {path.name}; largest event-loop stall per key (ms), the event loop's own "
        "CPU during it (ms), Pilot round trip (ms):"
    )
    for name, stalls in results.items():
        trip = trips.get(name)
        extra = f"   round trip median {statistics.median(trip) * 1000:6.0f}" if trip else ""
        stall, cpu = max(stalls)
        print(
            f"  {name:22s} max {stall * 1000:6.0f} (cpu {cpu * 1000:4.0f}) "
            f"over {len(stalls):3d}{extra}"
        )
    worst = max(max(v)[0] for v in results.values())
    print(f"largest stall on a key: {worst * 1000:.0f} ms (target < 100 ms)")
    print(
        f"deep collections on the quiet timer (2 s without a key; none waited on here): "
        f"{len(QuietSweeps.spans)}, their largest stall {ticker.quiet_worst() * 1000:.0f} ms"
    )
    deep = collector.deep_sweeps
    if deep:
        print(
            f"deep collections: {len(deep)}, longest {max(deep)[0] * 1000:.0f} ms, "
            f"most objects {max(d[1] for d in deep)}"
        )
    print(
        "the deep collection forced due at an r: r and the keys after it above; it ran "
        + (
            f"once the keys paused: {quiet_deep[0][0] * 1000:.0f} ms over {quiet_deep[0][1]} "
            "objects (no key waiting)"
            if quiet_deep
            else "not within 30 s"
        )
    )
    print(
        f"screen RSS: first run (and its keys) {rss[0]:.0f} MB, last {rss[-1]:.0f} MB "
        f"({(rss[-1] / rss[0] - 1) * 100:+.1f} %); engine pid was {engine_pid}"
    )
    assert "torch" not in sys.modules, "the screen process imported torch"
    return 0 if worst < 0.1 else 1


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("model", help="a saved TorchScript model (e.g. /tmp/fv-ladder/L12.pt)")
    parser.add_argument("--reruns", type=int, default=3, help="re-runs after the first run")
    parser.add_argument("--trace", action="store_true", help="print where long stalls are")
    return asyncio.run(main_async(parser.parse_args()))


if __name__ == "__main__":
    sys.exit(main())
