"""The migrate screen (``m``, ui/screens/migrate.py): ``freezeview migrate`` in the app.

The slow tests run torch's converter on the bundled example through the app, as the
user does (``freezeview MODEL.pt --inputs X.pt``: the engine process, its converter's
child process), and hold the screen to what the command line finds on the same model
and inputs: the verdict, every lost state write with its source line, and a ``.pt2``
that loads with ``torch.export.load`` as the one ``migrate -o`` writes. The fast tests
drive the screen's keys without a converter: without sample inputs (one sentence), and
with a session whose migrate answers with migrations built by hand, to check what the
keys do with each verdict.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import pytest
from repo_paths import ROOT
from textual.app import App
from textual.widgets import Static

from freezeview.engine.migrate import Conversion, Migration, StateWrite
from freezeview.session import MigrationSummary, SessionOptions
from freezeview.session.local import Session
from freezeview.session.migrations import NO_INPUTS
from freezeview.session.summaries import migration_summary
from freezeview.ui import FreezeviewApp
from freezeview.ui.screens.main import MainScreen
from freezeview.ui.screens.migrate import MigrateScreen, MigrationState

from .conftest import wait_ready

pytestmark = pytest.mark.asyncio

EXAMPLE = ROOT / "examples" / "example.pt"


def _text(app: FreezeviewApp, selector: str) -> str:
    """What a Static of the migrate screen shows, as plain text."""
    rendered = app.screen.query_one(selector, Static).render()
    return str(getattr(rendered, "plain", rendered))


def _style(app: FreezeviewApp, selector: str, needle: str) -> str:
    """The style of the span of a Static's text that holds ``needle``."""
    text = app.screen.query_one(selector, Static).render()
    plain = text.plain  # type: ignore[union-attr]
    start = plain.index(needle)
    for span in text.spans:  # type: ignore[union-attr]
        if span.start <= start < span.end:
            return str(span.style)
    return str(text.style)  # type: ignore[union-attr]


async def _settled(pilot: Any) -> None:
    """Wait until the migration (or write) under way has ended."""
    state = pilot.app.main_screen.migration
    for _ in range(2000):
        await pilot.pause(0.02)
        if state is not None and not state.running:
            break
    await pilot.pause()


# -- fast: the screen's keys, without a converter or a model ------------------------------
class _Stub:
    """A session's migrate that answers with ``found`` (a Migration built by hand) and
    writes as the session does, counting its conversions."""

    def __init__(self, found: Migration) -> None:
        self.found = found
        self.conversions = 0

    def migrate(
        self, output: Path | None = None, force: bool = False, again: bool = False
    ) -> MigrationSummary:
        from freezeview.engine.migrate import write_program

        if again or not self.conversions:
            self.conversions += 1
        if output is None:
            return migration_summary(self.found)
        kept = output.parent / "kept.pt2"
        kept.parent.mkdir(parents=True, exist_ok=True)
        kept.write_bytes(b"program")
        return migration_summary(write_program(self.found, kept, output, force=force))


class _Host(App[None]):
    """The migrate screen over an empty screen, styled as in the app."""

    CSS_PATH = str(ROOT / "freezeview" / "ui" / "app.tcss")

    def __init__(self, session: Any, output: Path) -> None:
        super().__init__()
        self.session = session
        self.output = output

    def on_mount(self) -> None:
        self.state = MigrationState(self.screen, self.session, self.output)
        self.push_screen(MigrateScreen(self.state))


LOST = StateWrite("last_scale", "set-attr", "", "net.py:73", "self.last_scale = scale")
DIFFERING = Migration(
    "net.pt",
    "2.13",
    Conversion(True, seconds=0.3),
    calls=3,
    outputs_same=(True,) * 3,
    writes=(LOST,),
)


async def _key(pilot: Any, key: str) -> None:
    """``key`` as the terminal sends it, then whatever it started waited for (Pilot's
    own press waits a frame or more for the screen to look idle)."""
    pilot.app.simulate_key(key)
    await _done(pilot)


async def _done(pilot: Any) -> None:
    for _ in range(500):
        await pilot.pause()
        if not pilot.app.state.running:
            break
    await pilot.pause()


async def test_w_writes_only_what_behaves_the_same_and_f_lists_the_differences(
    tmp_path: Path,
) -> None:
    session = _Stub(DIFFERING)
    out = tmp_path / "net.pt2"
    app = _Host(session, out)
    async with app.run_test(size=(80, 24)) as pilot:
        await _done(pilot)
        verdict = _text(app, "#migrate-verdict")
        assert verdict == f"{DIFFERING.verdict} (net.pt)"
        assert "yellow" in _style(app, "#migrate-verdict", verdict)
        lost = "state write LOST: last_scale (set-attr, net.py:73: self.last_scale = scale)"
        assert lost in _text(app, "#migrate-findings").replace("\n", " ")
        assert "red" in _style(app, "#migrate-findings", "state write LOST")
        await _key(pilot, "w")
        assert not out.exists()
        assert _text(app, "#migrate-said") == (
            "not written: the program does not behave the same; f writes it anyway, with the "
            "differences listed."
        )
        await _key(pilot, "f")
        assert out.read_bytes() == b"program"
        assert (
            _text(app, "#migrate-said") == f"wrote {out} anyway, with the 1 difference listed above"
        )
        listed = _text(app, "#migrate-findings").split("written anyway, with these differences:")
        assert [x.strip() for x in listed[1].strip().splitlines()] == list(DIFFERING.differences)
        assert session.conversions == 1  # written from the migration found
        await _key(pilot, "r")
        assert session.conversions == 2
        # A model that behaves the same is written by w, under a green verdict.
        session.found = dataclasses.replace(DIFFERING, writes=())
        await _key(pilot, "r")
        assert "green" in _style(app, "#migrate-verdict", "converts and behaves the same")
        out.unlink()
        await _key(pilot, "w")
        assert out.exists() and _text(app, "#migrate-said") == f"wrote {out}"
        # Without a converter: its one sentence, and nothing to write.
        session.found = Migration("net.pt", "2.13", Conversion(False, False, cause="no converter."))
        await _key(pilot, "r")
        assert _text(app, "#migrate-findings") == "no converter."
        assert "red" in _style(app, "#migrate-verdict", "does not convert")
        assert _text(app, "#migrate-said") == ""  # no program: no "w writes ..."
        await _key(pilot, "f")
        assert _text(app, "#migrate-said") == "nothing to write: the model does not convert."


async def test_without_sample_inputs_it_is_one_sentence(tmp_path: Path) -> None:
    app = _Host(Session(path=tmp_path / "model.pt"), tmp_path / "model.pt2")
    async with app.run_test(size=(80, 24)) as pilot:
        await _done(pilot)
        assert _text(app, "#migrate-verdict") == f"could not migrate: {NO_INPUTS}"
        for key in ("w", "f"):
            await _key(pilot, key)
            said = _text(app, "#migrate-said")
            assert said == f"nothing to write: the migration did not run: {NO_INPUTS}", key
        assert not list(tmp_path.iterdir())


@pytest.mark.slow  # the app on a model, about a second
async def test_m_opens_it_over_the_main_screen_and_no_key_ends_the_session(
    small_pt: Path, tmp_path: Path
) -> None:
    session = Session(path=small_pt)
    app = FreezeviewApp(small_pt, output_dir=tmp_path, show_timings=False, session=session)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        await pilot.press("m")
        await _settled(pilot)
        assert isinstance(app.screen, MigrateScreen)
        assert _text(app, "#migrate-verdict") == f"could not migrate: {NO_INPUTS}"
        await pilot.press("w", "f", "r")
        await _settled(pilot)
        await pilot.press("q")  # closes the screen, not the app
        assert isinstance(app.screen, MainScreen) and app.is_running
        await pilot.press("m")
        assert _text(app, "#migrate-verdict") == f"could not migrate: {NO_INPUTS}"
        await pilot.press("escape")
        assert isinstance(app.screen, MainScreen) and app.is_running
        assert not list(tmp_path.iterdir())  # nothing written
        await pilot.press("q")
    assert app.return_code == 0


# -- slow: torch's converter on the bundled example, through the app ------------------------
@pytest.fixture(scope="module")
def example_inputs(tmp_path_factory: pytest.TempPathFactory) -> Path:
    import torch

    torch.manual_seed(0)
    path = tmp_path_factory.mktemp("inputs") / "x.pt"
    torch.save(torch.randn(1, 3, 16, 16), str(path))
    return path


@pytest.mark.slow
async def test_the_screen_shows_what_migrate_finds_and_writes_what_it_writes(
    example_inputs: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    from freezeview.cli import main

    cli_out = tmp_path / "cli.pt2"
    argv = ["migrate", str(EXAMPLE), "--inputs", str(example_inputs), "--time-budget", "0"]
    code = main([*argv, "-o", str(cli_out), "--force", "--json"])
    document = json.loads(capsys.readouterr().out)
    # A write is lost to a program only where there is one (torch 2.4's converter does
    # not convert the example: no write is named lost then, by either).
    converted = document["conversion"]["converted"]
    lost = [w for w in document["behaviour"]["writes"] if converted and not w["carried"]]

    options = SessionOptions(inputs_file=example_inputs, time_budget=0.0)
    # In-process: the engine process's side of migrate is held by tests/session/
    # test_migrations.py (its dispatch); this is the converter itself, through the app.
    session = Session(path=EXAMPLE, options=options)
    app = FreezeviewApp(
        EXAMPLE, options=options, output_dir=tmp_path / "out", show_timings=False, session=session
    )
    out = tmp_path / "out" / "example.pt2"
    async with app.run_test(size=(160, 48)) as pilot:
        await wait_ready(pilot, timeout=60)
        await pilot.press("m")
        await pilot.pause(0.6)
        assert "converting with torch's converter" in _text(app, "#migrate-verdict")
        await _settled(pilot)
        verdict = _text(app, "#migrate-verdict")
        assert verdict == f"{document['verdict']} ({EXAMPLE})"
        findings = _text(app, "#migrate-findings")
        for write in lost:
            line = f"state write LOST: {write['path']} ({write['how']}, {write['source']}"
            assert f"{line}: {write['source_text']})" in findings
            assert "red" in _style(app, "#migrate-findings", line)
        assert (code == 0) == ("behaves the same" in verdict)
        await pilot.press("w")
        await _settled(pilot)
        assert out.exists() == (code == 0)
        await pilot.press("f")
        await _settled(pilot)
        said = _text(app, "#migrate-said")
        if converted:
            assert said.startswith(f"wrote {out}")
        else:
            assert said == "nothing to write: the model does not convert."
        await pilot.press("escape", "q")
    if not converted:
        assert not out.exists() and not cli_out.exists()
        return

    # The program written from the app is the one the command line writes.
    x = torch.load(str(example_inputs))
    ours, theirs = torch.export.load(str(out)), torch.export.load(str(cli_out))
    assert ours.state_dict.keys() == theirs.state_dict.keys()
    assert all(torch.equal(ours.state_dict[k], theirs.state_dict[k]) for k in ours.state_dict)
    assert [n.target for n in ours.graph.nodes] == [n.target for n in theirs.graph.nodes]
    script = torch.jit.load(str(EXAMPLE))
    with torch.no_grad():
        assert torch.allclose(ours.module()(x.clone()), script(x.clone()))
