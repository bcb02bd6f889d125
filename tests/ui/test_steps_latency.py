"""The steps bar's latency column and the run's verdict (ui/widgets/steps_bar.py,
session/local.py), driven through the real app with Pilot.

With sample inputs every step that changed the graph is timed; the column appears, the
rows of changed steps carry a figure, unchanged ones ``-``, and the title ends with the
verdict once the run is over. Without inputs there is no column at all. Structure only,
never speed.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.session import SessionOptions
from freezeview.session.local import Session
from freezeview.ui import FreezeviewApp

from .conftest import wait_ready

pytestmark = pytest.mark.asyncio

SIZE = (200, 48)


def _app(path: Path, tmp_path: Path, shapes: list[str]) -> FreezeviewApp:
    options = SessionOptions(input_shapes=shapes, time_budget=0.01)
    session = Session(path=path, options=options)
    return FreezeviewApp(path, options=options, output_dir=tmp_path / "out", session=session)


async def test_latency_column_and_verdict_with_inputs(small_pt: Path, tmp_path: Path) -> None:
    # tests/ui/models.py's Small: a 3-channel conv block (its buffer written in forward
    # is put back after every timed block).
    app = _app(small_pt, tmp_path, ["1,3,8,8"])
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        table = screen.steps_bar.timeline
        for run in range(2):  # the first run, then a re-run into the last run's rows
            if run:
                await pilot.press("r")
                await wait_ready(pilot, timeout=60)
            assert "latency" in table.columns and table.row_count == len(screen.steps)
            for step in screen.steps:
                cell = str(table.get_cell(str(step.index), "latency"))
                assert cell == (step.latency or "-"), step.name
                # A re-run shows the last run's inline and fold steps again, their graphs
                # released: the timing they had stands.
                assert ("ms" in cell) == step.changed, (run, step.name)
            title = str(screen.query_one("#timeline-title").render())
            assert screen.steps[-1].verdict.startswith("frozen forward")
            assert screen.steps[-1].verdict in title


async def test_no_latency_column_without_inputs(small_pt: Path, tmp_path: Path) -> None:
    app = _app(small_pt, tmp_path, [])
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        assert "latency" not in screen.steps_bar.timeline.columns
        assert all(step.latency == "" and step.verdict == "" for step in screen.steps)


@pytest.mark.parametrize(
    ("autograd", "expected", "word"),
    [(False, (True, False), "inference_mode"), (True, (False, True), "autograd")],
)
async def test_the_verdict_names_how_forwards_were_timed(
    small_pt: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    autograd: bool,
    expected: tuple[bool, bool],
    word: str,
) -> None:
    """The app's ``--autograd`` reaches the timing (read off torch inside each timed
    call), and the verdict on the steps bar names the mode."""
    import torch

    import freezeview.engine.measure.measured_run as measured_run

    real = measured_run.time_forward
    seen: set[tuple[bool, bool]] = set()

    def recording(call, **kwargs):  # type: ignore[no-untyped-def]
        def wrapped():  # type: ignore[no-untyped-def]
            seen.add((torch.is_inference_mode_enabled(), torch.is_grad_enabled()))
            return call()

        return real(wrapped, **kwargs)

    monkeypatch.setattr(measured_run, "time_forward", recording)
    shapes = ["1,3,8,8"]
    options = SessionOptions(input_shapes=shapes, time_budget=0.01, autograd=autograd)
    session = Session(path=small_pt, options=options)
    app = FreezeviewApp(small_pt, options=options, output_dir=tmp_path / "out", session=session)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot, timeout=60)
        screen = app.main_screen
        verdict = screen.steps[-1].verdict
        assert word in verdict
        other = "autograd" if word == "inference_mode" else "inference_mode"
        assert other not in verdict
        assert verdict in str(screen.query_one("#timeline-title").render())
    assert seen == {expected}


async def test_the_apps_autograd_option_reaches_the_engine_session(
    small_pt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``freezeview MODEL.pt --autograd`` hands ``autograd`` to the engine process's
    session (what RemoteSession sends is what Session is made of)."""
    import freezeview.session as session_package
    from freezeview.cli import build_parser
    from freezeview.cli.app import open_app

    got: dict[str, object] = {}

    class Stop(Exception):
        pass

    def fake(path, options):  # type: ignore[no-untyped-def]
        got.update(path=path, options=options)
        raise Stop

    monkeypatch.setattr(session_package, "RemoteSession", fake)
    for argv, autograd in (([], False), (["--autograd"], True)):
        args = build_parser(("app",)).parse_args(["app", str(small_pt), *argv])
        with pytest.raises(Stop):
            open_app(args)
        session = Session(path=got["path"], options=got["options"])  # type: ignore[arg-type]
        assert session.options.autograd is autograd
