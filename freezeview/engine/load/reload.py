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
and the old model's weights go once nothing else holds them. Better still, a model
whose tensors are all parameters and buffers is loaded without its weights
(``map_location="meta"``) and given the old model's (:func:`attach_weights`): no second
set of weights exists even while it loads (+150 MB at 48 layers otherwise).
"""

from __future__ import annotations

import os
import zipfile
from itertools import chain
from typing import Any

import torch

from .pickle_scan import storage_refs

__all__ = ["attach_weights", "file_stamp", "has_code_tensors", "share_tensors"]


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


def has_code_tensors(path: str | os.PathLike[str]) -> bool:
    """Whether the archive's code holds tensor constants (``constants.pkl`` names a
    storage), which a model loaded without its weights would lack. True when unsure."""
    try:
        with zipfile.ZipFile(path) as archive:
            names = [n for n in archive.namelist() if n.endswith("/constants.pkl")]
            return len(names) != 1 or bool(storage_refs(archive.read(names[0])))
    except (OSError, zipfile.BadZipFile, KeyError, ValueError):
        return True


def _plain(value: Any) -> bool:
    """True for an attribute value that holds no tensor and no object freezeview cannot
    look into (submodules are walked on their own)."""
    if value is None or isinstance(value, (bool, int, float, str, torch.ScriptModule)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_plain(v) for v in value)
    if isinstance(value, dict):
        return all(_plain(k) and _plain(v) for k, v in value.items())
    return False


def attach_weights(fresh: torch.jit.ScriptModule, old: torch.jit.ScriptModule) -> bool:
    """Give ``fresh``, loaded with ``map_location="meta"``, ``old``'s tensors.

    Only when every tensor of ``fresh``'s state is a parameter or buffer with its match
    in ``old`` (the same slots, shapes, dtypes and strides, the same tensor in the same
    slots); any other attribute must hold no tensor and no object. The archive's code
    constants are the caller's to check (:func:`has_code_tensors`).

    Returns:
        True when ``fresh`` holds ``old``'s tensors in every slot; False when it may not
        (then ``fresh`` must not be used).
    """
    new_slots, old_slots = _slots(fresh), _slots(old)
    if [(p, n) for p, _, n, _ in new_slots] != [(p, n) for p, _, n, _ in old_slots]:
        return False
    tensors: dict[int, int] = {}
    back: dict[int, int] = {}
    for (_, _, _, a), (_, _, _, b) in zip(new_slots, old_slots, strict=True):
        if tensors.setdefault(id(a), id(b)) != id(b) or back.setdefault(id(b), id(a)) != id(a):
            return False
        if not (
            a.is_meta
            and a.dtype == b.dtype
            and a.layout == b.layout == torch.strided
            and a.shape == b.shape
            and a.stride() == b.stride()
            and a.requires_grad == b.requires_grad
        ):
            return False
    try:
        for path, sub in fresh.named_modules(remove_duplicate=False):
            held = {n for p, _, n, _ in new_slots if p == path}
            iterators = torch._C._jit_debug_module_iterators  # type: ignore[attr-defined]
            named = iterators(sub._c)["named_attributes"]
            if not all(n in held or _plain(v) for n, v in named):
                return False
    except Exception:  # a value torch cannot hand to Python: not looked into
        return False
    for (_, cmod, name, _), (_, _, _, tensor) in zip(new_slots, old_slots, strict=True):
        cmod.setattr(name, tensor)
    return True
