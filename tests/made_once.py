"""Bytes that a fresh interpreter makes for the tests, made once for every pytest worker.

Some test models must be made by another interpreter (TorchScript renames classes
scripted twice in one process; a class whose source is deleted afterwards cannot be
imported). Each such interpreter imports torch, about 1.5 s of CPU. The bytes are kept
in a file named after everything that decides them, so the second pytest worker, and the
next run, read the file instead of starting the interpreter again.
"""

from __future__ import annotations

import hashlib
import io
import os
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterable
from pathlib import Path

import torch

__all__ = ["made_once"]


def made_once(
    name: str, sources: Iterable[str | bytes], make: Callable[[], dict[str, bytes]]
) -> dict[str, bytes]:
    """The archives ``make()`` returns, read from a kept file when one was made before.

    Args:
        name: a word for the file's name.
        sources: everything besides torch and Python that decides the bytes (the
            builders' source text).
        make: builds the archives, by name.

    Returns:
        ``{name: bytes}`` as ``make()`` returned it.
    """
    key = hashlib.sha256(f"{torch.__version__} {sys.version}".encode())
    for source in sources:
        key.update(source.encode() if isinstance(source, str) else source)
    kept = Path(tempfile.gettempdir()) / f"freezeview-tests-{name}-{key.hexdigest()[:20]}.zip"
    try:
        with zipfile.ZipFile(kept) as archive:
            return {member: archive.read(member) for member in archive.namelist()}
    except (OSError, zipfile.BadZipFile):
        pass
    made = make()
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for member, data in made.items():
            archive.writestr(member, data)
    part = kept.with_name(f"{kept.name}.{os.getpid()}")
    part.write_bytes(buffer.getvalue())
    os.replace(part, kept)  # whole or absent, whichever worker writes first
    return made
