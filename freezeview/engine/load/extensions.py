"""Custom operators: the packages and libraries that define them, loaded before a model.

A scripted detection model calls ``torchvision::nms``; torch can load it only once a
Python package (``import torchvision``) or a shared library (``torch.ops.load_library``)
has registered the operator. freezeview loads what the user names (``--import MODULE``,
``--load-library PATH``) before it reads the model; when a model names an operator
nobody registered and a Python package of the operator's namespace is installed,
freezeview imports that package by itself and says so. It imports nothing else.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import sys
from collections.abc import Sequence
from pathlib import Path

import torch

from ..plumbing import BadInputError

__all__ = [
    "auto_import_for",
    "load_extensions",
    "unknown_operator",
]

_UNKNOWN_OP = re.compile(r"Unknown builtin op: (?P<op>\w+::\w+(?:\.\w+)?)")
# What torch.jit.load says in other words for an operator nobody registered.
_UNKNOWN_OP_OTHER = re.compile(
    r"(?:No such operator|Couldn't find an operator for) (?P<op>\w+::\w+)"
)


def unknown_operator(message: str) -> str | None:
    """The ``namespace::name`` of the operator torch could not find, if that is the error."""
    found = _UNKNOWN_OP.search(message) or _UNKNOWN_OP_OTHER.search(message)
    return found["op"] if found else None


def _gist(exc: BaseException) -> str:
    for line in str(exc).splitlines():
        if line.strip():
            return line.strip()[:200]
    return type(exc).__name__


def import_module(name: str) -> None:
    """Import ``name`` (``--import``), one sentence if it cannot be imported."""
    try:
        importlib.import_module(name)
    except ImportError as exc:
        raise BadInputError(
            f"--import {name}: freezeview could not import it ({_gist(exc)}); install the "
            "package that registers the operators, or check the name."
        ) from exc
    except Exception as exc:
        # Importing runs the package's own code; whatever it raises is its failure.
        raise BadInputError(
            f"--import {name}: importing it failed ({type(exc).__name__}: {_gist(exc)})."
        ) from exc


def load_library(path: str) -> None:
    """``torch.ops.load_library(path)`` (``--load-library``), one sentence on failure."""
    p = Path(path)
    if not p.exists():
        raise BadInputError(f"--load-library {path}: no such file.")
    if not p.is_file():
        raise BadInputError(f"--load-library {path} is a directory, not a shared library.")
    try:
        torch.ops.load_library(str(p))
    except (OSError, RuntimeError) as exc:
        raise BadInputError(
            f"--load-library {path}: torch could not load it as a shared library "
            f"({_gist(exc)}); build it against torch {torch.__version__.split('+')[0]}."
        ) from exc


def load_extensions(imports: Sequence[str] = (), libraries: Sequence[str] = ()) -> None:
    """Import every package and load every library the user named, in that order.

    Args:
        imports: Python modules to import (``--import``, e.g. ``torchvision``).
        libraries: shared libraries to load with ``torch.ops.load_library``.

    Raises:
        BadInputError: one of them cannot be imported or loaded (one sentence).
    """
    for name in imports:
        import_module(name)
    for path in libraries:
        load_library(path)


def auto_import_for(operator: str) -> str | None:
    """Import the installed Python package named like ``operator``'s namespace.

    Args:
        operator: ``namespace::name`` from torch's "Unknown builtin op" error.

    Returns:
        The line to tell the user when a package was imported (``freezeview imported
        fvops to define the operator fvops::scale ...``), or None when there is no such
        package, it was imported already, or importing it failed.
    """
    namespace = operator.split("::", 1)[0]
    if not namespace.isidentifier() or namespace in sys.modules:
        return None
    try:
        if importlib.util.find_spec(namespace) is None:
            return None
        importlib.import_module(namespace)
    except Exception:
        return None  # the usual sentence follows; it names the --import flag
    return (
        f"freezeview imported {namespace} to define the operator {operator} "
        f"(pass --import {namespace} to say so)."
    )
