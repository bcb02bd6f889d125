"""Load: a ``.pt`` path in, a checked TorchScript module out (:class:`LoadedModel`). Uses
plumbing only.

- :mod:`.archive`: what a ``.pt`` file is, checked before torch reads it;
- :mod:`.pickle_scan`: pickles read as opcodes only, without running any of them;
- :mod:`.archive_names`: the attribute paths an archive holds, read without torch;
- :mod:`.extensions`: custom operators' packages and libraries, loaded before a model;
- :mod:`.loading`: ``torch.jit.load`` with one sentence per bad input;
- :mod:`.reload`: the same file loaded again into a fresh compilation unit, sharing weights.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .archive import check_model_kind
    from .archive_names import archive_attribute_paths
    from .loading import LoadedModel, check_eval, in_training_mode, is_already_frozen, load_model
    from .reload import attach_weights, file_stamp, has_code_tensors, share_tensors

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "LoadedModel": "loading",
        "check_eval": "loading",
        "in_training_mode": "loading",
        "is_already_frozen": "loading",
        "load_model": "loading",
        "check_model_kind": "archive",
        "archive_attribute_paths": "archive_names",
        "attach_weights": "reload",
        "file_stamp": "reload",
        "has_code_tensors": "reload",
        "share_tensors": "reload",
    },
)

__all__ = [
    "LoadedModel",
    "archive_attribute_paths",
    "attach_weights",
    "check_eval",
    "check_model_kind",
    "file_stamp",
    "has_code_tensors",
    "in_training_mode",
    "is_already_frozen",
    "load_model",
    "share_tensors",
]
