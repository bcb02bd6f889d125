"""A model file loaded again, for a process that freezes one model many times.

torch registers every frozen clone's class types, their methods and graphs in the
compilation unit of the module it was cloned from, and offers no way to remove them (a
compilation unit can drop its free functions, never a class): a process that freezes
one loaded model again and again grows with each freeze, for as long as the model
lives. ``torch.jit.load`` makes a new compilation unit for each load, so the same file
loaded again, and used instead, leaves all of that behind with the old model.

:func:`file_stamp` says whether the file is still the one first loaded (a file changed
on disk is never loaded in its place); :func:`share_tensors` points the new model's
parameters and buffers at the old model's tensors (equal values, the same sharing
between slots), so that both models alive together cost one set of weights, not two,
and the old model's weights go once nothing else holds them.
"""

from __future__ import annotations

import os
from itertools import chain
from typing import Any

import torch

__all__ = ["file_stamp", "share_tensors"]


def file_stamp(path: str | os.PathLike[str]) -> tuple[int, ...] | None:
    """The file's device, inode, size and modification time (None if it cannot be read).

    Two equal stamps taken before and after a load say the file did not change while it
    was read; a later stamp equal to them says it is still that file.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


def _slots(module: torch.jit.ScriptModule) -> list[tuple[str, Any, str, torch.Tensor]]:
    """(submodule path, its C++ module, slot name, tensor) of every parameter and buffer,
    a submodule reached by several paths listed under each."""
    return [
        (path, sub._c, name, tensor)
        for path, sub in module.named_modules(remove_duplicate=False)
        for name, tensor in chain(
            sub.named_parameters(recurse=False), sub.named_buffers(recurse=False)
        )
    ]


def _alike(a: torch.Tensor, b: torch.Tensor) -> bool:
    return (
        a.dtype == b.dtype
        and a.device == b.device
        and a.layout == b.layout
        and a.shape == b.shape
        and a.stride() == b.stride()
        and a.storage_offset() == b.storage_offset()
        and a.requires_grad == b.requires_grad
        and bool(torch.equal(a, b))
    )


def share_tensors(fresh: torch.jit.ScriptModule, old: torch.jit.ScriptModule) -> int:
    """Point ``fresh``'s parameters and buffers at ``old``'s tensors at the same paths.

    Only when the two agree everywhere: the same slots, equal tensors (dtype, shape,
    strides, values), and the same sharing (a tensor or storage in two slots of one is
    one in the same slots of the other). Otherwise nothing changes.

    Args:
        fresh: a model just loaded from the file ``old`` was loaded from.
        old: the model it replaces.

    Returns:
        How many slots now hold ``old``'s tensors (0 when the two disagree).
    """
    new_slots, old_slots = _slots(fresh), _slots(old)
    if [(p, n) for p, _, n, _ in new_slots] != [(p, n) for p, _, n, _ in old_slots]:
        return 0
    tensors: dict[int, int] = {}
    back: dict[int, int] = {}
    storages: dict[int, int] = {}
    storages_back: dict[int, int] = {}
    compared: set[int] = set()
    for (_, _, _, a), (_, _, _, b) in zip(new_slots, old_slots, strict=True):
        if a.is_sparse or b.is_sparse or a.layout != torch.strided:
            return 0
        sa, sb = a.untyped_storage().data_ptr(), b.untyped_storage().data_ptr()
        if tensors.setdefault(id(a), id(b)) != id(b) or back.setdefault(id(b), id(a)) != id(a):
            return 0
        if (sa or sb) and (
            storages.setdefault(sa, sb) != sb or storages_back.setdefault(sb, sa) != sa
        ):
            return 0  # (empty tensors have no storage to share)
        if id(a) not in compared:
            try:
                if not _alike(a, b):
                    return 0
            except RuntimeError:  # a kind of tensor torch cannot compare
                return 0
            compared.add(id(a))
    for (_, cmod, name, _), (_, _, _, tensor) in zip(new_slots, old_slots, strict=True):
        cmod.setattr(name, tensor)
    return len(new_slots)
