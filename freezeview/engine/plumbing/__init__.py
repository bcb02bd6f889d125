"""Plumbing every stage shares: errors, files written whole, forked helpers, Ctrl-C.

Takes nothing from the other stages; gives them:

- :mod:`.errors`: the errors users see (:class:`FreezeviewError` and its kinds);
- :mod:`.atomic`: files and directories written whole or not at all;
- :mod:`.forked`: pure-Python work done by a forked copy of the process;
- :mod:`.interrupts`: Ctrl-C that waits for torch's C++;
- :mod:`.collector`: the garbage collector paused while big results are built;
- :mod:`.heap`: freed memory given back to the system between stages;
- :mod:`.sharing`: one object for equal values kept side by side;
- :mod:`.stderr_capture`: torch's C++ standard error, captured below Python;
- :mod:`.wording`: counts that agree with their nouns, and "did you mean";
- :mod:`.lazy`: the names of every stage's ``__init__``, imported on first use.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from .lazy import lazy_exports

if TYPE_CHECKING:
    from .atomic import atomic_path, check_output_path, protect_input, save_module, write_text
    from .collector import CatchUp, collector_paused
    from .errors import (
        BadInputError,
        FreezeviewError,
        OutputError,
        PlanError,
        inputs_rejected,
        torch_cause,
    )
    from .forked import Forked, renewed_in_children
    from .heap import give_back_freed_memory, resident_bytes
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
        "check_output_path": "atomic",
        "save_module": "atomic",
        "write_text": "atomic",
        "resident_bytes": "heap",
        "CatchUp": "collector",
    },
)

__all__ = [
    "BadInputError",
    "CatchUp",
    "Forked",
    "FreezeviewError",
    "OutputError",
    "PlanError",
    "atomic_path",
    "capture_stderr_fd",
    "check_output_path",
    "collector_paused",
    "did_you_mean",
    "give_back_freed_memory",
    "inputs_rejected",
    "interrupts_deferred",
    "plural",
    "protect_input",
    "renewed_in_children",
    "resident_bytes",
    "reuse_equal",
    "save_module",
    "torch_cause",
    "unknown_pass",
    "write_text",
]
