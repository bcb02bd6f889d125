"""Load: a ``.pt`` path in, a checked TorchScript module out (:class:`LoadedModel`).

The file is read as an archive and its pickles as opcodes before torch sees it
(:mod:`.archive`, :mod:`.pickle_scan`), custom operator libraries are loaded first
(:mod:`.extensions`), and every bad input is one sentence (:mod:`.loading`). Uses
plumbing only.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .loading import LoadedModel, check_eval, in_training_mode, is_already_frozen, load_model

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LoadedModel": "loading",
        "check_eval": "loading",
        "in_training_mode": "loading",
        "is_already_frozen": "loading",
        "load_model": "loading",
    },
)

__all__ = [
    "LoadedModel",
    "check_eval",
    "in_training_mode",
    "is_already_frozen",
    "load_model",
]
