"""Load a ``.pt`` file as a TorchScript module, with one clear sentence per bad input.

freezeview is opened on files from other people, other machines and other torch
versions, often when something is already wrong. Before handing a file to
``torch.jit.load``, :func:`~.archive.check_model_file` checks what the file is, cheaply
and without running anything (the path, the format, the archive; :mod:`.archive`), and
pickles are only ever read as opcodes (:mod:`.pickle_scan`), so a hostile pickle runs no
code. This module loads what passed: the packages and libraries that define custom
operators first (:mod:`.extensions`), then ``torch.jit.load``, whose errors become one
sentence each, and whose warnings (Python's and those its C++ prints) become
information on the :class:`LoadedModel`.
"""

from __future__ import annotations

import os
import re
import time
import warnings
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from ..plumbing import (
    BadInputError,
    PlanError,
    capture_stderr_fd,
    interrupts_deferred,
    protect_input,
)
from .archive import check_model_file, first_line
from .extensions import auto_import_for, load_extensions, unknown_operator
from .pickle_scan import pickle_globals, sniff_pickle, storage_refs

__all__ = [
    "LoadedModel",
    "check_eval",
    "check_model_file",
    "in_training_mode",
    "is_already_frozen",
    "load_model",
    "pickle_globals",
    "sniff_pickle",
    "storage_refs",
]


@dataclass
class LoadedModel:
    """A TorchScript module and what freezeview learned while loading it.

    Attributes:
        module: the loaded ``torch.jit.ScriptModule`` (never written back to disk).
        path: the file it came from, or None for a module passed in from Python.
        name: a short display name (the file name, or the module's type name).
        load_seconds: wall time of ``torch.jit.load``.
        warnings: warnings torch raised while loading, as text.
        was_training: True if the module was in training mode when loaded.
        notes: what freezeview did on its own while loading, one sentence each (a
            package it imported to define a custom operator).
        already_frozen: the module is the output of ``torch.jit.freeze`` (or of
            ``optimize_for_inference`` / ``optimize_for_mobile``, which freeze): see
            :func:`is_already_frozen`.
    """

    module: torch.jit.ScriptModule
    path: Path | None = None
    name: str = ""
    load_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    was_training: bool = False
    notes: list[str] = field(default_factory=list)
    already_frozen: bool = False

    @classmethod
    def from_module(cls, module: torch.jit.ScriptModule, name: str | None = None) -> LoadedModel:
        """Wrap a ScriptModule built in Python (no file involved).

        Args:
            module: a scripted or traced module.
            name: display name; defaults to the module's original class name.

        Returns:
            A :class:`LoadedModel` with ``path=None``.

        Raises:
            BadInputError: ``module`` is a plain ``nn.Module`` (or anything else).
        """
        if not isinstance(module, torch.jit.ScriptModule):
            raise BadInputError(
                f"{type(module).__name__} is not a TorchScript module: "
                "script or trace it first (torch.jit.script / torch.jit.trace)."
            )
        return cls(
            module=module,
            name=name or module.original_name,
            was_training=in_training_mode(module),
            already_frozen=is_already_frozen(module),
        )


#: What the load's note says of an already-frozen file, after its name: what torch does.
ALREADY_FROZEN_TEXT = (
    "is already frozen (torch.jit.freeze's output: its weights are constants and its "
    "`training` flag is gone). torch.jit.freeze refuses it as torch.jit.load gives it "
    "(AttributeError: it reads that flag) and freezes it again once `.eval()` was called "
    "on it; freezeview calls `.eval()` and freezes it again, as torch then does."
)


def is_already_frozen(module: torch.jit.ScriptModule) -> bool:
    """Whether ``module`` is already frozen (what ``torch.jit.freeze`` returns).

    Every scripted or traced module has a ``training`` attribute; freezing folds it (it
    is False: torch freezes only eval-mode modules) and removes it with every other
    attribute nothing reads any more. A root module without it is therefore a frozen
    one, saved or not. Freezing it again is what torch allows and freezeview runs.

    Args:
        module: a ScriptModule.
    """
    return not module._c.hasattr("training")


def in_training_mode(module: torch.jit.ScriptModule) -> bool:
    """Whether ``module`` is in training mode.

    A module without a ``training`` attribute (an already-frozen one, see
    :func:`is_already_frozen`) is in eval mode: freezing removed the flag after folding it
    to False, and torch's own ``module.training`` would raise ``AttributeError`` on it.

    Args:
        module: a ScriptModule.
    """
    cmod = module._c
    return bool(cmod.hasattr("training") and cmod.getattr("training"))


# --------------------------------------------------------------------------- torch errors


def _torch_error_sentence(p: Path, exc: BaseException) -> str:
    """Turn an exception from ``torch.jit.load`` into one sentence for the user."""
    text = str(exc)
    first = first_line(exc)
    ver = torch.__version__.split("+")[0]
    op = unknown_operator(text)
    if op:
        namespace = op.split("::", 1)[0]
        return (
            f"{p} uses the operator {op}, which nothing has registered with torch {ver} "
            f"here: pass --import PACKAGE (the Python package that defines it, e.g. "
            f"--import {namespace}) or --load-library PATH (its shared library)."
        )
    newer = re.search(
        r"file with version (\d+), but the maximum supported version for reading is (\d+)", text
    )
    if newer or re.search(r"version_? <= kMaxSupportedFileFormatVersion", text):
        detail = (
            f" (format {newer.group(1)}; this torch reads up to {newer.group(2)})" if newer else ""
        )
        return (
            f"{p} was saved by a newer torch than {ver}{detail}: inspect it with the torch "
            "version that saved it, or a newer one."
        )
    typ = re.search(r"Unknown type name '([^']+)'", text)
    if typ:
        return (
            f"{p} refers to the type {typ.group(1)}, which its code does not define: the "
            "archive is damaged or incomplete; save the model again with torch.jit.save."
        )
    missing = re.search(r"failed locating file (\S+?):? file not found", text)
    if missing:
        return (
            f"{p} is damaged or incomplete: archive member {missing.group(1)!r} is "
            "missing; copy or save the model again."
        )
    if "required keyword attribute 'value' is undefined" in text:
        # A prim::Constant whose value torch.jit.save could not write: the MKLDNN tensors
        # optimize_for_inference makes for convolutions are written as nothing.
        return (
            f"{p} holds a graph constant that torch.jit.save could not write (the MKLDNN "
            "weights optimize_for_inference makes), so torch cannot load it back: save the "
            "model before optimize_for_inference (torch.jit.freeze's output loads, and "
            "freezeview freeze --optimize-for-inference shows what that pass does)."
        )
    if ("CUDA" in text and "is_available" in text) or "support for cuda" in text:
        return f"{p} holds CUDA tensors and this machine has no CUDA: pass --map-location cpu."
    return (
        f"{p} could not be loaded by torch.jit.load ({first}): check that the file is "
        f"intact, or save it again with torch {ver}."
    )


def _check_map_location(map_location: str) -> None:
    try:
        device = torch.device(map_location)
    except (RuntimeError, TypeError, ValueError):
        raise BadInputError(
            f"--map-location {map_location!r} is not a device: use cpu, or a device such as cuda:0."
        ) from None
    if device.type == "cuda" and not torch.cuda.is_available():
        raise BadInputError(
            f"--map-location {map_location!r} asks for CUDA, which this torch cannot use "
            "here: use --map-location cpu."
        )


# --------------------------------------------------------------------------- load


def load_model(
    path: str | os.PathLike[str],
    *,
    map_location: str = "cpu",
    eval_mode: bool = False,
    imports: Sequence[str] = (),
    libraries: Sequence[str] = (),
) -> LoadedModel:
    """Load a TorchScript model from ``path``.

    The file is checked first (:func:`check_model_file`), so the usual ways a file goes
    wrong get a sentence that says what the file is and what to do, and a hostile
    pickle is never handed to anything that could run it. The file is only read.

    Args:
        path: a ``.pt`` file written by ``torch.jit.save``.
        map_location: where tensors go (``"cpu"`` unless asked otherwise).
        eval_mode: switch a training-mode module to eval mode (``--eval``).
        imports: Python packages that register the model's custom operators, imported
            first (``--import``).
        libraries: shared libraries that do, loaded with ``torch.ops.load_library``
            (``--load-library``).

    Returns:
        A :class:`LoadedModel`. ``was_training`` tells whether the file held a module in
        training mode (freezing it without ``eval_mode`` raises a :class:`PlanError`);
        ``notes`` says what freezeview did on its own (a package imported for an
        operator).

    Raises:
        BadInputError: the path is missing, a directory, empty, not a zip, truncated,
            damaged, a ``torch.save`` pickle, or torch cannot load it; an import or a
            library that cannot be loaded.

    Example::

        loaded = load_model("model.pt")
        print(loaded.module.code)
    """
    p = check_model_file(path)
    _check_map_location(map_location)
    load_extensions(imports, libraries)

    start = time.perf_counter()
    notes: list[str] = []
    printed: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            module = _jit_load(p, map_location, printed)
        except Exception as exc:
            # A custom operator nobody registered: its namespace's package, if one is
            # installed, is what defines it (torchvision::nms and torchvision).
            op = unknown_operator(str(exc))
            note = auto_import_for(op) if op else None
            if note is None:
                raise BadInputError(_torch_error_sentence(p, exc)) from exc
            notes.append(note)
            try:
                module = _jit_load(p, map_location, printed)
            except Exception as again:
                raise BadInputError(_torch_error_sentence(p, again)) from again
    elapsed = time.perf_counter() - start
    protect_input(p)  # no output of this process may overwrite the model it read
    if not isinstance(module, torch.jit.ScriptModule):
        raise BadInputError(
            f"{p} loaded as {type(module).__name__}, not a TorchScript module: save a "
            "scripted or traced module with torch.jit.save."
        )
    if is_already_frozen(module):
        # Every command prints the load's notes (the app shows them): the one place that
        # says so for explain, freeze, export, check, compare and the app alike.
        notes.append(f"{p.name} {ALREADY_FROZEN_TEXT}")
    loaded = LoadedModel(
        module=module,
        path=p,
        name=p.name,
        load_seconds=elapsed,
        warnings=[f"{w.category.__name__}: {w.message}" for w in caught] + printed,
        was_training=in_training_mode(module),
        notes=notes,
        already_frozen=is_already_frozen(module),
    )
    if eval_mode and loaded.was_training:
        module.eval()
    if loaded.already_frozen:
        # torch.jit.freeze reads `module.training` first; `.eval()` sets it on the
        # Python side only (the C++ module stays without it), and torch then freezes
        # the module again, as freezeview's own stepwise freeze does.
        module.eval()
    return loaded


# c10's own warning lines (`[W1124 05:00:08.128 Quantizer.cpp:111] Warning: ...`), which
# torch prints straight to file descriptor 2 while it runs a model's __setstate__.
_CPP_WARNING = re.compile(r"^\[W\d{4} [\d:.]+ (?:\d+ )?[\w.]+:\d+\] (?:Warning: )?")


def _jit_load(p: Path, map_location: str, warnings_out: list[str]) -> torch.jit.ScriptModule:
    # torch.jit.load calls back into Python (class resolution): see interrupts.py.
    with interrupts_deferred(), capture_stderr_fd(_CPP_WARNING) as printed:
        module = torch.jit.load(str(p), map_location=map_location)
    warnings_out.extend(_CPP_WARNING.sub("", line) for line in printed)
    return module


def check_eval(loaded: LoadedModel) -> None:
    """Raise :class:`PlanError` if the module is still in training mode.

    torch.jit.freeze refuses training-mode modules; freezeview says how to fix it.

    Args:
        loaded: the model as loaded by :func:`load_model` or ``LoadedModel.from_module``.

    Raises:
        PlanError: the module (or the file it came from) is in training mode.
    """
    if in_training_mode(loaded.module):
        raise PlanError(
            f"{loaded.path or loaded.name} holds a module in training mode, and freezing "
            "needs eval mode: pass --eval (or call .eval() on the module before saving it)."
        )
