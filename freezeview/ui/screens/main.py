"""The main screen: model tree, IR pane, inspector and steps bar, with every key.

:class:`MainScreen` is the screen users work in; this file holds its keys (``BINDINGS``)
and their ``action_*`` methods. What it is built on, one idea per file:
:mod:`.main_layout` (the panes, reactives and widgets), :mod:`.main_ir_pane` (what the
IR pane shows and the panes that follow it), :mod:`.main_workers` (the engine calls,
in thread workers, and their results).
"""

from __future__ import annotations

import os
import sys
from typing import TYPE_CHECKING

from textual.binding import Binding
from textual.widgets import Input, Tabs

from ..widgets.ir_view import IRView
from ..widgets.model_tree import FILTERS
from .main_workers import MainWorkers

if TYPE_CHECKING:
    from ..host import ScreenHost

__all__ = ["MainScreen"]

VIEW_MODES = ("ir", "code", "diff")


class MainScreen(MainWorkers):
    """The one screen users work in."""

    BINDINGS = [
        # First, so a narrow footer still shows it (it only appears when narrow).
        Binding("w", "next_pane", "Pane", tooltip="Narrow terminals: show the next pane (tabs)"),
        Binding("n", "next_step", "Next", tooltip="Show the next freezing step"),
        Binding("p", "previous_step", "Prev", tooltip="Show the previous freezing step"),
        Binding("r", "rerun", "Re-run", tooltip="Run freezing again from the start with the plan"),
        Binding(
            "space",
            "toggle_preserve",
            "Preserve",
            tooltip="Add/remove the selected attribute to preserved_attrs (explanation updates)",
        ),
        Binding("t", "toggle_pass", "Pass", tooltip="Switch the highlighted pass on or off"),
        Binding(
            "d", "cycle_view", "IR/code/diff", tooltip="Show the IR, the .code or the step's diff"
        ),
        Binding(
            "f", "cycle_filter", "Filter", tooltip="Show all / inlined / kept / dropped attributes"
        ),
        Binding("g", "render", "SVG", tooltip="Render the current step's graph and diff to SVG"),
        Binding("e", "export", "Export", tooltip="Write everything `freezeview export` writes"),
        Binding(
            "o",
            "open_output",
            "Open",
            tooltip="Open the last picture (g) or review page (e) in the local browser",
        ),
        Binding("slash", "search", "Search", key_display="/", tooltip="Search the IR pane"),
        Binding("question_mark", "help", "Help", key_display="?", tooltip="Show every key"),
    ]

    def on_mount(self) -> None:
        self.title = "freezeview"
        self.sub_title = self.fv_app.model_label
        self.watch_narrow_pane(self.narrow_pane)
        self.watch_loading_model(True)
        self.set_status(f"loading {self.fv_app.model_label} (torch.jit.load)…")
        self.query_one(IRView).focus()
        self.load_model()

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # The pane switcher only matters (and only shows in the footer) when narrow.
        if action == "next_pane":
            return self.has_class("-narrow")
        return True

    def on_resize(self) -> None:
        # Crossing the 120-column breakpoint shows or hides the pane switcher.
        self.call_after_refresh(self.refresh_bindings)

    def action_next_pane(self) -> None:
        """Show the next pane on a narrow terminal."""
        order = ("model", "ir", "inspector", "steps")
        nxt = order[(order.index(self.narrow_pane) + 1) % len(order)]
        self.query_one(Tabs).active = f"tab-{nxt}"

    # -- actions -------------------------------------------------------------------
    def action_open_output(self) -> None:
        """Open the last rendered picture or exported page in the local browser."""
        path = self.last_output
        if path is None:
            self.notify("nothing written yet: g renders the step, e exports", timeout=3)
            return
        if not _has_local_browser():
            self.set_status(f"no browser on this machine (SSH?): open {path} where you are")
            return
        self.app.open_url(path.resolve().as_uri())
        self.set_status(f"opened {path} in the browser")

    def action_next_step(self) -> None:
        """Show the next step (waits for it if it is still being computed)."""
        if self.current_step + 1 < len(self.steps):
            self.current_step += 1
        elif self.stepping:
            self._pending_next = 1
            self.set_status("next step still running; it will show when ready")
        else:
            self.notify("this is the last step", timeout=2)

    def action_previous_step(self) -> None:
        """Show the previous step."""
        self._pending_next = 0
        if self.current_step > 0:
            self.current_step -= 1
        else:
            self.notify("this is the first step", timeout=2)

    def action_rerun(self) -> None:
        """Freeze again from the start with the current plan."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        self.start_run()
        self.set_status("re-running with the current plan…")

    def action_toggle_preserve(self) -> None:
        """Add or remove the selected attribute from ``preserved_attrs``."""
        path = self.model_tree.selected_path
        if not path:
            self.notify("select an attribute or module in the model tree first", timeout=3)
            return
        preserved = self.fv_app.preserved
        if path in preserved:
            preserved.remove(path)
            verb = "no longer preserved"
        else:
            preserved.append(path)
            verb = "preserved"
        self.set_status(f"{path} {verb}; explanation updating (r re-runs the steps)")
        self.update_stale()
        self.start_explain()

    def action_toggle_pass(self) -> None:
        """Switch the highlighted pass on or off."""
        lst = self.steps_bar.passes
        if lst.option_count == 0:
            return
        index = lst.highlighted if lst.highlighted is not None else 0
        option = lst.get_option_at_index(index)
        lst.toggle(option.id if option.id is not None else index)  # type: ignore[arg-type]
        on = option.id in lst.selected
        self.set_status(f"pass {option.id} {'on' if on else 'off'}: press r to re-run")
        self.update_stale()

    def action_cycle_view(self) -> None:
        """IR → code → diff → IR."""
        self.view_mode = VIEW_MODES[(VIEW_MODES.index(self.view_mode) + 1) % len(VIEW_MODES)]

    def action_cycle_filter(self) -> None:
        """Cycle the model tree's status filter."""
        self.status_filter = FILTERS[(FILTERS.index(self.status_filter) + 1) % len(FILTERS)]
        self.set_status(f"model tree shows: {self.status_filter}")

    def action_render(self) -> None:
        """Render the current step (graph and diff) to SVG files."""
        step = self.current()
        if step is None:
            self.notify("no step to render yet", timeout=2)
            return
        before = self.steps[self.current_step - 1].snapshot if self.current_step > 0 else None
        out = self.fv_app.output_dir / "steps"
        self.set_status(f"rendering step {step.name} into {out}…")
        self.render_step(step, before, out)

    def action_export(self) -> None:
        """Export everything into the output directory."""
        if self.session is None or self.loading_model:
            self.notify("the model is still loading", timeout=2)
            return
        out = self.fv_app.output_dir / "export"
        self.set_status(f"exporting into {out}…")
        self.export(out, tuple(self.fv_app.preserved), tuple(self.enabled_passes()))

    def action_search(self) -> None:
        """Open the search box of the IR pane."""
        if self.has_class("-narrow"):
            self.query_one(Tabs).active = "tab-ir"
        search = self.query_one("#search", Input)
        self._search_anchor = self.ir.cursor_line
        search.add_class("-visible")
        search.focus()

    def action_help(self) -> None:
        """Show every key."""
        from .help import HelpScreen

        app: ScreenHost = self.fv_app
        self.app.push_screen(HelpScreen(app.all_bindings(), app.captured_warnings))


def _has_local_browser() -> bool:
    """Whether a browser can open on this machine (not over a plain SSH session)."""
    if sys.platform in ("darwin", "win32"):
        return True
    if os.environ.get("DISPLAY") or os.environ.get("WAYLAND_DISPLAY"):
        return True
    return not os.environ.get("SSH_CONNECTION") and bool(os.environ.get("BROWSER"))
