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
        self._forget_removed_keys()
        super().bindings_changed(screen)

    def _forget_removed_keys(self) -> None:
        """Let the keys of earlier rebuilds go.

        ``Footer`` binds each key widget to its ``compact`` (``data_bind``), which puts a
        watcher of the key on the footer. Textual drops the watchers of closed widgets
        only when the watched value changes, and the footer's ``compact`` never does:
        every rebuild left its keys alive for good (five widgets a re-run in a session,
        7k memory blocks every ten re-runs, without end). Textual offers no call for
        this; its watcher lists are pruned here the way it prunes them itself.
        """
        watchers: dict[str, list[tuple[Any, Any]]] | None = getattr(self, "__watchers", None)
        for found in (watchers or {}).values():
            found[:] = [(node, callback) for node, callback in found if not node._closing]
