"""freezeview's Textual app, the screen's process only: ``FreezeviewApp(model_path).run()``
opens it.

Nothing here imports torch or an engine module: the engine is reached through
:mod:`freezeview.session`'s public names. The app class is imported on first use.

- :mod:`.app`: :class:`FreezeviewApp`: the engine session started (or given), the screen;
- :mod:`.screens`: the main screen, its keys, its runs of the plan, the help screen;
- :mod:`.widgets`: the panes, each owning its state and saying what happened by messages;
- :mod:`.messages`: messages of the main screen that no one widget owns;
- :mod:`.host`: what the main screen needs of the app hosting it (a ``Protocol``);
- :mod:`.failures`: an error of the app's own: one sentence on screen, the traceback logged;
- :mod:`.textual_caches`: Textual's caches kept from holding what the screen dropped;
- :mod:`.tree_rows`: the model tree's rows laid out from an explanation, off the event loop;
- :mod:`.lexer`: the Pygments lexer for TorchScript IR;
- :mod:`.graphics`: whether the terminal shows real pictures (kitty graphics, sixel).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import FreezeviewApp

__all__ = ["FreezeviewApp"]


def __getattr__(name: str) -> Any:
    if name == "FreezeviewApp":
        from .app import FreezeviewApp

        return FreezeviewApp
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
