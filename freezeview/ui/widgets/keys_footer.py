"""The footer of the main screen: Textual's ``Footer``, rebuilt only when its keys change."""

from __future__ import annotations

from typing import Any

from textual.screen import Screen
from textual.widgets import Footer

__all__ = ["KeysFooter"]


class KeysFooter(Footer):
    """Textual's footer, rebuilt only when the keys it would show have changed.

    ``Footer`` recomposes itself, one widget per key, whenever the screen says its
    bindings may have changed: on every focus change, screen push and resize. Each
    rebuild restyles two dozen new widgets (tens of milliseconds), while moving
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
        return tuple(
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

    def bindings_changed(self, screen: Screen[Any]) -> None:
        """Rebuild (as ``Footer`` does) only when the keys to show are not the ones shown."""
        if self.is_attached and screen is self.screen and screen.app.app_focus:
            keys = self._keys(screen)
            if keys == self._drawn:
                self._bindings_ready = True
                return
            self._drawn = keys
        super().bindings_changed(screen)
