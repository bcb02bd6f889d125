"""Write files whole or not at all.

Every file freezeview writes (frozen models, SVGs, reports) goes to a temporary file in
the target directory and is renamed into place, so an interrupted run (Ctrl-C, a
failing pass, a full disk) never leaves a partial file behind and never clobbers the
previous version.
"""

from __future__ import annotations

import contextlib
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import OutputError

__all__ = ["atomic_path", "check_output_path", "write_bytes", "write_text"]


def check_output_path(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Check that ``path`` can be written; return it as a Path.

    Raises:
        OutputError: the directory is missing or not writable, the path is a directory,
            or the file exists and ``force`` is False.
    """
    p = Path(path)
    parent = p.parent if str(p.parent) else Path(".")
    if p.is_dir():
        raise OutputError(f"{p} is a directory; give a file name to write.")
    if not parent.is_dir():
        raise OutputError(f"cannot write {p}: directory {parent} does not exist.")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise OutputError(f"cannot write {p}: directory {parent} is not writable.")
    if p.exists() and not force:
        raise OutputError(f"{p} already exists; pass --force to overwrite it.")
    return p


@contextlib.contextmanager
def atomic_path(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``.

    On any exception (KeyboardInterrupt included) the temporary file is removed and
    ``path`` is left exactly as it was.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    try:
        fd, tmp_name = tempfile.mkstemp(prefix=f".{target.name}.", suffix=".tmp", dir=parent)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from exc
    os.close(fd)
    tmp = Path(tmp_name)
    # mkstemp creates 0600 files; give the result the permissions a plain open() would.
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)
    try:
        yield tmp
        os.replace(tmp, target)
    except BaseException:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def _write(path: str | os.PathLike[str], writer: Callable[[Path], None]) -> Path:
    target = Path(path)
    try:
        with atomic_path(target) as tmp:
            writer(tmp)
    except OSError as exc:
        raise OutputError(f"cannot write {target}: {exc.strerror or exc}.") from exc
    return target


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``data`` to ``path``."""
    return _write(path, lambda tmp: tmp.write_bytes(data))


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 ``text`` to ``path``."""
    return _write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))
