"""The footer of the main screen: Textual's ``Footer``, rebuilt only when its keys change."""

from __future__ import annotations

from typing import Any

from textual.app import ComposeResult
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Footer

__all__ = ["KEPT_TO_THE_END", "LEAST_USEFUL_FIRST", "KeysFooter"]

#: Actions whose keys the footer always shows, however narrow: help lists the rest.
KEPT_TO_THE_END = frozenset({"help", "quit", "dismiss"})
#: The keys that go first when the footer is too narrow for all, the first first; keys
#: of other actions (a pane's own) go after these and before the main ones, whose
#: order is the end of this list read backwards (Next goes last).
LEAST_USEFUL_FIRST = (
    "open_output",
    "migrate",  # once a model: the help screen and the palette list it
    "render",
    "export",
    "cycle_filter",
    "find_attribute",
    "search",
)
_MAIN_LAST = (
    "toggle_pass",
    "cycle_view",
    "graph_view",
    "previous_step",
    "rerun",
    "toggle_preserve",
    "next_pane",
    "next_step",
)
# Columns of the command palette's key, docked on the right (``▏^p palette``).
_PALETTE_WIDTH = 13


class KeysFooter(Footer):
    """Textual's footer, rebuilt only when the keys it would show have changed.

    ``Footer`` recomposes itself, one widget per key, whenever the screen says its
    bindings may have changed: on every focus change, screen push and resize. Each
    rebuild makes and restyles a new widget for every key shown, while moving
    between freezeview's panes almost never changes what the footer shows. This
    subclass compares what the footer would draw with what it drew and skips the
    rebuild when they are the same; it draws exactly what ``Footer`` draws.
    """

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._drawn: tuple[object, ...] | None = None

    def _keys(self, screen: Screen[Any]) -> tuple[object, ...]:
        """What the footer's compose reads from the screen's bindings: the keys it shows
        (a focused widget's hidden keys, such as a tree's arrows, change nothing) and the
        command palette's key."""
        palette = screen.app.COMMAND_PALETTE_BINDING
        # The width decides which keys fit (see compose).
        keys = tuple(
            (
                key,
                binding.action,
                binding.description,
                binding.group,
                binding.tooltip,
                enabled,
                tooltip,
                screen.app.get_key_display(binding),
            )
            for key, (_node, binding, enabled, tooltip) in screen.active_bindings.items()
            if binding.show or key == palette
        )
        return (screen.app.size.width, *keys)

    def compose(self) -> ComposeResult:
        """``Footer``'s keys, less the least useful ones when they do not all fit: help
        (``?``) and quit (``q``) stay at any width."""
        widgets = list(super().compose())
        keys = [w for w in widgets if _is_key(w) and not w.has_class("-command-palette")]
        room = self.app.size.width - _PALETTE_WIDTH
        used = sum(_key_width(w) for w in keys)
        dropped: set[int] = set()
        for key in sorted(keys, key=lambda w: _drop_rank(w, keys)):
            if used <= room:
                break
            if getattr(key, "action", "") in KEPT_TO_THE_END:
                continue
            dropped.add(id(key))
            used -= _key_width(key)
        yield from (w for w in widgets if id(w) not in dropped)

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """Rebuild (as ``Footer`` does) only when the keys to show are not the ones shown."""
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            keys = self._keys(screen)
            if keys == self._drawn:
                self._bindings_ready = True
                return
            self._drawn = keys
        self._forget_removed_keys()
        super().bindings_changed(screen)

    def _forget_removed_keys(self) -> None:
        """Let the keys of earlier rebuilds go.

        ``Footer`` binds each key widget to its ``compact`` (``data_bind``), which puts a
        watcher of the key on the footer. Textual drops the watchers of closed widgets
        only when the watched value is set, and the footer's ``compact`` never is: every
        rebuild left its keys alive for good (some at every re-run in a session, a leak
        without end). Textual has no call to remove a
        watcher (https://github.com/Textualize/textual/issues/6666, open); its public
        ``mutate_reactive`` sets ``compact`` again to its own value, which runs the
        watchers and so drops those of closed keys (the live keys are told the value
        they have). tests/ui/test_keys_footer.py fails if that stops freeing them.
        """
        self.mutate_reactive(Footer.compact)


def _is_key(widget: Widget) -> bool:
    """Whether ``widget`` is one of ``Footer``'s keys (the class is not exported)."""
    return type(widget).__name__ == "FooterKey"


def _key_width(key: Widget) -> int:
    """The columns a footer key takes: `` n Next`` and the space after it."""
    return len(str(getattr(key, "key_display", ""))) + len(str(getattr(key, "description", ""))) + 3


def _drop_rank(key: Widget, keys: list[Widget]) -> tuple[int, int]:
    """When ``key`` goes, among ``keys``: the least useful first (see
    :data:`LEAST_USEFUL_FIRST`), then a pane's own keys from the last shown, then the
    main keys, Next last."""
    action = str(getattr(key, "action", ""))
    if action in LEAST_USEFUL_FIRST:
        return 0, LEAST_USEFUL_FIRST.index(action)
    if action in _MAIN_LAST:
        return 2, _MAIN_LAST.index(action)
    return 1, -keys.index(key)
