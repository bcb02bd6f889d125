"""freezeview's Textual app. ``FreezeviewApp(model_path).run()`` opens it."""

from __future__ import annotations

from .app import FreezeviewApp

__all__ = ["FreezeviewApp"]
