"""The migrate screen (``m``): will the model survive ``torch.export``, with proof.

``freezeview migrate`` in the app. The session runs torch's converter on the model file
with the app's sample inputs (in a child process of the engine's), runs the TorchScript
module and the ExportedProgram side by side and times them; this screen shows, while it
runs, how long it has been running, then the verdict, coloured, and the same lines the
command line prints (``Migration.report_lines``): the lost state writes loud, each with
the line that writes it, the parameters held as buffers, the input dimensions fixed,
the speed. ``w`` writes the ``.pt2`` next to what ``e`` exports only when the program
behaves the same (else one sentence says why), ``f`` writes it anyway and lists the
differences, ``r`` runs the migration again, escape closes the screen.

The migrations belong to the main screen (:class:`MigrationState`, its workers): the
screen may close while one runs, and opened again it shows the one found for the
model instead of converting again.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from rich.text import Text
from textual.app import ComposeResult
from textual.binding import Binding
from textual.containers import Vertical, VerticalScroll
from textual.dom import DOMNode
from textual.screen import ModalScreen
from textual.widgets import Static

from ...session import FreezeviewError

if TYPE_CHECKING:
    from ...session import EngineSession, MigrationSummary

__all__ = ["LINE_STYLES", "MigrateScreen", "MigrationState"]

#: How each kind of line (the engine's ``LINE_KINDS``) is drawn: what changes in
#: behaviour loud, what stays the same quiet.
LINE_STYLES = {
    "unavailable": "bold red",
    "converter": "",
    "outputs": "green",
    "outputs-differ": "bold red",
    "write-kept": "green",
    "write-undeclared": "yellow",
    "write-lost": "bold red",
    "buffers": "yellow",
    "fixed": "yellow",
    "second-shape": "yellow",
    "speed": "cyan",
    "aoti": "cyan",
    "note": "dim",
    "written": "green",
    "not-written": "yellow",
}
#: The verdict's colour: behaves the same, converts with differences, does not convert.
VERDICT_COLOURS = ("green", "yellow", "red")
# Seconds between two redraws of the elapsed time while a migration runs.
_TICK = 0.5


class MigrationState:
    """The main screen's migrations of its model, and what the last one found.

    One owner: changed by its own methods on the event loop (the workers hand their
    results back there), watched by the migrate screen while it is open.

    Args:
        host: the screen whose workers run the migrations (they outlive this screen).
        session: the engine session of the model.
        output: where ``w`` and ``f`` write the ``.pt2``.
    """

    def __init__(self, host: DOMNode, session: EngineSession, output: Path) -> None:
        self.host = host
        self.session = session
        self.output = output
        #: The last migration found (None before the first has ended).
        self.summary: MigrationSummary | None = None
        #: Why the last migration could not run, in one sentence (empty when it ran).
        self.error = ""
        #: What is under way (``migrating``, ``writing``), empty when nothing is.
        self.running = ""
        #: When it started (``time.monotonic``).
        self.started = 0.0
        #: What the last write did, in one sentence, and the differences written anyway.
        self.said = ""
        self.written_despite: tuple[str, ...] = ()
        self._watchers: list[Callable[[], None]] = []

    @property
    def elapsed(self) -> float:
        """Seconds since what is under way started."""
        return time.monotonic() - self.started if self.running else 0.0

    def watch(self, callback: Callable[[], None]) -> Callable[[], None]:
        """Call ``callback`` after every change; returns what stops it."""
        self._watchers.append(callback)
        return lambda: self._watchers.remove(callback) if callback in self._watchers else None

    def _changed(self) -> None:
        for callback in list(self._watchers):
            callback()

    def start(self, *, again: bool = False, write: bool = False, force: bool = False) -> bool:
        """Migrate (``again``: anew), or write the program (``write``, ``force``), in a
        worker of the host; False when something is under way already."""
        if self.running:
            return False
        self.running = "writing" if write else "migrating"
        self.started = time.monotonic()
        if not write:
            self.error, self.said, self.written_despite = "", "", ()
        output = self.output if write else None
        self.host.run_worker(
            lambda: self._work(output, force, again),
            thread=True,
            group="migrate",
            exit_on_error=False,
            description=self.running,
        )
        self._changed()
        return True

    def _work(self, output: Path | None, force: bool, again: bool) -> None:
        """The session's migrate (blocking, in the worker's thread); the result handed
        back to the event loop."""
        try:
            found = self.session.migrate(output, force, again)
        except FreezeviewError as exc:
            self._back(self._failed, exc.message)
        except Exception as exc:
            # A defect: said here too, then the screen's one failure handler has it.
            self._back(self._failed, f"{type(exc).__name__}: {str(exc)[:200]}")
            raise
        else:
            self._back(self._found, found, output is not None, force)

    def _back(self, method: Callable[..., None], *args: object) -> None:
        # Nobody to tell once the app has quit (the user left while it ran).
        with contextlib.suppress(RuntimeError):
            self.host.app.call_from_thread(method, *args)

    def _found(self, found: MigrationSummary, wrote: bool, force: bool) -> None:
        self.running = ""
        self.summary = found
        if wrote and found.written:
            self.written_despite = found.differences if force else ()
            listed = len(self.written_despite)
            self.said = f"wrote {found.written}" + (
                f" anyway, with the {listed} difference{'s' if listed != 1 else ''} listed above"
                if listed
                else ""
            )
        elif wrote:
            self.said = found.not_written
        self._changed()

    def _failed(self, sentence: str) -> None:
        if self.running == "writing":
            self.said = f"not written: {sentence}"
        else:
            self.error = sentence
        self.running = ""
        self._changed()

    def refusal(self, force: bool) -> str:
        """Why ``w`` (or with ``force`` ``f``) cannot write now, in one sentence; empty
        when it can."""
        found = self.summary
        if self.running:
            return f"still {self.running}: wait for it to end."
        if found is None:
            why = f": {self.error}" if self.error else ""
            return f"nothing to write: the migration did not run{why}"
        if not found.converted:
            return "nothing to write: the model does not convert."
        if not found.same and not force:
            return (
                "not written: the program does not behave the same; f writes it anyway, "
                "with the differences listed."
            )
        return ""


class MigrateScreen(ModalScreen[None]):
    """Will the model survive ``torch.export``? (See the module docstring.)"""

    BINDINGS = [
        Binding("escape,q", "dismiss", "Close", tooltip="Back to the model"),
        Binding(
            "w",
            "write",
            "Write .pt2",
            tooltip="Write the ExportedProgram (.pt2) when it behaves the same",
        ),
        Binding(
            "f",
            "force",
            "Write anyway",
            tooltip="Write the .pt2 even though it differs, the differences listed",
        ),
        Binding("r", "again", "Run again", tooltip="Convert and compare again"),
    ]

    def __init__(self, state: MigrationState) -> None:
        super().__init__()
        #: The main screen's migrations, shown here.
        self.state = state
        self._unwatch: Callable[[], None] | None = None

    def compose(self) -> ComposeResult:
        with Vertical(id="migrate-box"):
            yield Static(
                Text("Will it survive torch.export?  freezeview migrate", style="bold"),
                id="migrate-title",
            )
            yield Static("", id="migrate-verdict")
            with VerticalScroll(id="migrate-lines"):
                yield Static("", id="migrate-findings")
            yield Static("", id="migrate-said")
            yield Static(
                Text(
                    "w write .pt2 · f write anyway · r run again · ↑↓ scroll · esc close",
                    style="italic dim",
                ),
                id="migrate-keys",
            )

    def on_mount(self) -> None:
        state = self.state
        self._unwatch = state.watch(self.show)
        # The migration found for this model, or the one under way; else one now.
        if state.summary is None and not state.running and not state.error:
            state.start()
        self.show()
        self.set_interval(_TICK, self._tick)

    def on_unmount(self) -> None:
        if self._unwatch is not None:
            self._unwatch()

    def _tick(self) -> None:
        if self.state.running:
            self.show()

    def show(self) -> None:
        """Draw the state: progress, or the verdict and the findings."""
        state = self.state
        found = state.summary
        verdict = self.query_one("#migrate-verdict", Static)
        findings = self.query_one("#migrate-findings", Static)
        if state.running == "migrating" or (found is None and state.running):
            verdict.update(
                Text(
                    f"converting with torch's converter and comparing… {state.elapsed:.0f} s",
                    style="bold",
                )
            )
            findings.update(
                Text(
                    "torch's converter runs in a child process; it takes from under a "
                    "second to tens of seconds. Esc closes this screen meanwhile; m shows "
                    "it again.",
                    style="dim",
                )
            )
        elif found is None:
            verdict.update(Text(f"could not migrate: {state.error}", style="bold red"))
            findings.update("")
        else:
            verdict.update(verdict_text(found))
            text = findings_text(found)
            if state.written_despite:
                # What --force lists: the differences the written program has.
                text.append("\n\nwritten anyway, with these differences:", style="bold yellow")
                for difference in state.written_despite:
                    text.append(f"\n  {difference}", style="yellow")
            findings.update(text)
        said = self.query_one("#migrate-said", Static)
        if state.running == "writing":
            said.update(Text(f"writing {state.output}… {state.elapsed:.0f} s"))
        elif state.said:
            written = found is not None and found.written and state.said.startswith("wrote")
            said.update(Text(state.said, style="bold green" if written else "bold yellow"))
        elif found is None or not found.converted:
            # Nothing was converted: there is no program to write.
            said.update("")
        else:
            said.update(Text(f"w writes {state.output}", style="dim"))

    def action_write(self) -> None:
        """Write the ``.pt2`` when the program behaves the same; else say why not."""
        self._write(force=False)

    def action_force(self) -> None:
        """Write the ``.pt2`` even though it differs (the CLI's ``--force``)."""
        self._write(force=True)

    def _write(self, force: bool) -> None:
        state = self.state
        refusal = state.refusal(force)
        if refusal:
            state.said, state.written_despite = refusal, ()
            self.show()
            return
        state.start(write=True, force=force)

    def action_again(self) -> None:
        """Run the migration again (the model file may have changed)."""
        if not self.state.start(again=True):
            self.notify(f"still {self.state.running}", timeout=2)


def verdict_text(found: MigrationSummary) -> Text:
    """The verdict and the model, coloured: green, yellow, red."""
    colour = VERDICT_COLOURS[0 if found.same else 1 if found.converted else 2]
    head = next((text for kind, text in found.lines if kind == "verdict"), found.verdict)
    return Text(head, style=f"bold {colour}")


def findings_text(found: MigrationSummary) -> Text:
    """Every line ``freezeview migrate`` prints under the verdict, styled by kind."""
    text = Text()
    for kind, line in found.lines:
        if kind in ("verdict", "written", "not-written"):
            continue  # the verdict is the header; what was written is said below
        if text:
            text.append("\n")
        text.append(line, style=LINE_STYLES.get(kind, ""))
    return text
