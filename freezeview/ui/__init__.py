"""freezeview's Textual app. ``FreezeviewApp(model_path).run()`` opens it.

The app class is imported on first use, so the engine process
(:mod:`freezeview.session.remote`), which lives in this package, starts without
importing Textual.
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
