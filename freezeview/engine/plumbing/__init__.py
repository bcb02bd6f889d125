"""Plumbing every stage shares: errors, files written whole, forked helpers, Ctrl-C.

Takes nothing from the other stages; gives them the error types users see
(:class:`FreezeviewError` and its kinds), atomic output files (:mod:`.atomic`), work
done by a forked copy of the process (:mod:`.forked`), Ctrl-C that waits for torch's
C++ (:mod:`.interrupts`), the paused garbage collector (:mod:`.collector`), freed memory
given back to the system (:mod:`.heap`), equal values held once (:mod:`.sharing`),
torch's C++ standard error captured (:mod:`.stderr_capture`), counts and their nouns
agreed and "did you mean" (:mod:`.wording`) and the lazy names of
every stage's ``__init__`` (:mod:`.lazy`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .atomic import atomic_path, protect_input
    from .collector import collector_paused
    from .errors import (
        BadInputError,
        FreezeviewError,
        OutputError,
        PlanError,
        inputs_rejected,
        torch_cause,
    )
    from .forked import Forked, renewed_in_children
    from .heap import give_back_freed_memory
    from .interrupts import interrupts_deferred
    from .sharing import reuse_equal
    from .stderr_capture import capture_stderr_fd
    from .wording import did_you_mean, plural, unknown_pass

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "atomic_path": "atomic",
        "protect_input": "atomic",
        "collector_paused": "collector",
        "BadInputError": "errors",
        "FreezeviewError": "errors",
        "OutputError": "errors",
        "PlanError": "errors",
        "inputs_rejected": "errors",
        "torch_cause": "errors",
        "Forked": "forked",
        "renewed_in_children": "forked",
        "give_back_freed_memory": "heap",
        "interrupts_deferred": "interrupts",
        "reuse_equal": "sharing",
        "capture_stderr_fd": "stderr_capture",
        "did_you_mean": "wording",
        "plural": "wording",
        "unknown_pass": "wording",
    },
)

__all__ = [
    "BadInputError",
    "Forked",
    "FreezeviewError",
    "OutputError",
    "PlanError",
    "atomic_path",
    "capture_stderr_fd",
    "collector_paused",
    "did_you_mean",
    "give_back_freed_memory",
    "inputs_rejected",
    "interrupts_deferred",
    "plural",
    "protect_input",
    "renewed_in_children",
    "reuse_equal",
    "torch_cause",
    "unknown_pass",
]
