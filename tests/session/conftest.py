"""The session's tests share the app's fixtures: the small model on disk, and the checks
that no thread outlives its test and no cursor blinks (tests/ui/conftest.py)."""

from __future__ import annotations

from ui.conftest import no_cursor_blink, no_thread_outlives_its_test, small_pt

__all__ = ["no_cursor_blink", "no_thread_outlives_its_test", "small_pt"]
