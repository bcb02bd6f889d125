"""Write files whole or not at all.

Every file freezeview writes (frozen models, SVGs, reports) goes to a temporary file in
the target directory and is renamed into place, so an interrupted run (Ctrl-C, a
failing pass, a full disk) never leaves a partial file behind and never clobbers the
previous version. The temporary file is flushed to disk before the rename, so even a
power cut leaves either the old file or the complete new one.

Typical use::

    out = check_output_path(args.output, force=args.force)   # fail before any work
    ...                                                       # slow work
    with atomic_path(out) as tmp:
        torch.jit.save(frozen, str(tmp))                      # renamed onto out on success
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import signal
import tempfile
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

from .errors import OutputError

__all__ = [
    "Terminated",
    "atomic_directory",
    "atomic_path",
    "check_output_path",
    "protect_input",
    "save_module",
    "write_bytes",
    "write_text",
]

# Hidden temporary names next to the target: a crash (SIGKILL, power cut) can leave one
# behind, and a dotfile with this suffix is easy to recognise and delete.
_TMP_SUFFIX = ".freezeview-tmp"


# (st_dev, st_ino) of every model file this process has loaded. freezeview never
# modifies its input, so no output may land on one of these — whatever name (symlink,
# hard link, ``./x.pt`` vs ``x.pt``) the user gives it.
_PROTECTED: set[tuple[int, int]] = set()


def protect_input(path: str | os.PathLike[str]) -> None:
    """Record ``path`` as an input: :func:`atomic_path` will refuse to write onto it.

    ``load_model`` calls this for every model it loads.
    """
    with contextlib.suppress(OSError):
        st = os.stat(path)
        _PROTECTED.add((st.st_dev, st.st_ino))


def _refuse_input(target: Path) -> None:
    try:
        st = os.stat(target)
    except OSError:
        return
    if (st.st_dev, st.st_ino) in _PROTECTED:
        raise OutputError(
            f"{target} is the model freezeview is reading, and freezeview never overwrites "
            "its input: choose another output path."
        )


def _parent(p: Path) -> Path:
    return p.parent if str(p.parent) else Path(".")


def _probe_writable(directory: Path) -> None:
    """Create and remove a file in ``directory``; raise OSError if that is impossible.

    ``os.access`` is not enough: for root it says yes to read-only mounts of some
    filesystems (/sys, /proc) and to directories whose permission bits say no, and it
    knows nothing of quotas or full disks. Creating a file is the real question.
    """
    fd, name = tempfile.mkstemp(prefix=".freezeview-probe.", dir=directory)
    os.close(fd)
    os.unlink(name)


def _why(exc: OSError) -> str:
    if exc.errno in (errno.EACCES, errno.EPERM):
        return "permission denied"
    if exc.errno == errno.EROFS:
        return "read-only file system"
    if exc.errno == errno.ENOSPC:
        return "no space left on the device"
    if exc.errno == errno.EDQUOT:
        return "disk quota exceeded"
    return (exc.strerror or str(exc)).rstrip(".").lower()


def check_output_path(path: str | os.PathLike[str], *, force: bool = False) -> Path:
    """Check that ``path`` can be written, before any slow work starts; return it as a Path.

    Args:
        path: the file freezeview is about to write.
        force: allow replacing an existing file (``--force``).

    Returns:
        ``path`` as a :class:`~pathlib.Path`.

    Raises:
        OutputError: the directory is missing, is a file, or cannot be written to; the
            path is a directory or a model this process loaded; or the file exists and
            ``force`` is False. The message is one sentence naming the path and what to
            do.
    """
    p = Path(path)
    parent = _parent(p)
    if p.is_dir():
        raise OutputError(f"{p} is a directory: give a file name to write (e.g. {p / 'out'}).")
    existing = parent
    if not parent.is_dir():
        # Missing directories are made when the file is written (as mkdir -p): the
        # nearest one that exists must be a writable directory.
        while not existing.exists() and _parent(existing) != existing:
            existing = _parent(existing)
        if existing.exists() and not existing.is_dir():
            raise OutputError(
                f"cannot write {p}: {existing} is a file, not a directory; choose another "
                "output path."
            )
    _refuse_input(p)
    if p.exists() and not force:
        raise OutputError(f"{p} already exists: pass --force to overwrite it.")
    try:
        _probe_writable(existing)
    except OSError as exc:
        raise OutputError(
            f"cannot write {p}: directory {existing} is not writable ({_why(exc)}); choose "
            "another output path."
        ) from None
    return p


def _make_parents(directory: Path) -> list[Path]:
    """Make ``directory`` and its missing parents (as ``mkdir -p``); return the ones made,
    deepest first, for :func:`_remove_made` to take away again when nothing is written."""
    missing: list[Path] = []
    probe = directory
    while not probe.exists() and _parent(probe) != probe:
        missing.append(probe)
        probe = _parent(probe)
    made: list[Path] = []
    try:
        for folder in reversed(missing):
            folder.mkdir()
            made.append(folder)
    except OSError:
        _remove_made(made[::-1])
        raise
    return made[::-1]


def _remove_made(made: list[Path]) -> None:
    for folder in made:  # deepest first; a folder something else wrote into stays
        with contextlib.suppress(OSError):
            folder.rmdir()


def _fsync_dir(directory: Path) -> None:
    # Makes the rename itself durable; not every platform/filesystem allows it.
    with contextlib.suppress(OSError):
        fd = os.open(directory, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)


def _fsync_file(path: Path) -> None:
    with contextlib.suppress(OSError), path.open("rb") as fh:
        os.fsync(fh.fileno())


class Terminated(KeyboardInterrupt):
    """SIGTERM/SIGHUP arrived while a file was being written (handled like Ctrl-C)."""


def _raise_terminated(signum: int, frame: object) -> None:
    raise Terminated(signal.Signals(signum).name)


@contextlib.contextmanager
def _termination_as_interrupt() -> Iterator[None]:
    """While a temporary file exists, let SIGTERM/SIGHUP unwind like Ctrl-C.

    Their default action kills the process on the spot, which would leave the hidden
    temporary file behind. Python can only install handlers from the main thread, and
    a handler someone else installed is left alone.
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    saved = {}
    for name in ("SIGTERM", "SIGHUP"):
        signum = getattr(signal, name, None)
        if signum is not None and signal.getsignal(signum) == signal.SIG_DFL:
            saved[signum] = signal.signal(signum, _raise_terminated)
    try:
        yield
    finally:
        for signum, previous in saved.items():
            signal.signal(signum, previous)


@contextlib.contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, fsync: bool = True, same_name: bool = False
) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success rename it onto ``path``.

    Write the whole output to the yielded path (by name, so C++ writers such as
    ``torch.jit.save`` work). When the block ends normally the temporary file is flushed
    to disk and renamed onto ``path`` in one step. On any exception — a failing pass,
    Ctrl-C (KeyboardInterrupt), a full disk — the temporary file is removed and
    ``path`` is left exactly as it was. In the main thread, SIGTERM and SIGHUP raise
    :class:`Terminated` (a KeyboardInterrupt) during the block, for the same clean-up.

    Args:
        path: the final file.
        fsync: flush the file (and the directory entry) to disk before and after the
            rename, so a power cut cannot leave an empty file under the final name.
        same_name: the temporary file has ``path``'s own name, in a hidden temporary
            directory next to it, for writers that record the file's name in what they
            write (``torch.jit.save`` names the archive's records after the file: with
            this, the bytes are those of a plain save to ``path``, run after run).

    Yields:
        The temporary path to write.

    Raises:
        OutputError: ``path`` is a model this process loaded (see
            :func:`protect_input`); the temporary file cannot be created or the rename
            fails; an OSError raised while writing (disk full, permission) also becomes
            an OutputError naming ``path``.
    """
    target = Path(path)
    parent = _parent(target)
    _refuse_input(target)
    with _termination_as_interrupt():
        folder: Path | None = None
        made: list[Path] = []
        try:
            made = _make_parents(parent)
            if same_name:
                folder = Path(
                    tempfile.mkdtemp(prefix=f".{target.name}.", suffix=_TMP_SUFFIX, dir=parent)
                )
                tmp_name = str(folder / target.name)
                fd = os.open(tmp_name, os.O_RDWR | os.O_CREAT | os.O_EXCL, 0o600)
            else:
                fd, tmp_name = tempfile.mkstemp(
                    prefix=f".{target.name}.", suffix=_TMP_SUFFIX, dir=parent
                )
        except OSError as exc:
            _remove_folder(folder)
            _remove_made(made)
            raise OutputError(f"cannot write {target}: {_why(exc)}.") from exc
        tmp = Path(tmp_name)
        try:
            os.close(fd)
            _set_mode(tmp, target)
            yield tmp
            if fsync:
                _fsync_file(tmp)
            os.replace(tmp, target)
            _remove_folder(folder)
            if fsync:
                _fsync_dir(parent)
        except OSError as exc:
            _remove(tmp, folder)
            _remove_made(made)
            raise OutputError(
                f"cannot write {target}: {_why(exc)}; nothing was written (any previous "
                "file is unchanged)."
            ) from exc
        except BaseException:
            _remove(tmp, folder)
            _remove_made(made)
            raise


@contextlib.contextmanager
def atomic_directory(path: str | os.PathLike[str]) -> Iterator[Path]:
    """Yield a hidden temporary directory next to ``path``; on success, put it in place.

    Write every file of a set of outputs (an export's pictures, diffs and page) into the
    yielded directory. When the block ends normally, a ``path`` that did not exist is
    the temporary directory renamed, in one step; into an existing ``path`` (``--force``,
    or a directory holding other files) each file is renamed over its namesake, files of
    other names staying as they were. On any exception (Graphviz failing, Ctrl-C, a full
    disk) the temporary directory is removed and ``path`` is left exactly as it was: no
    half set of outputs. In the main thread SIGTERM and SIGHUP unwind like Ctrl-C.

    Args:
        path: the final directory (missing parents are made, and taken away again
            when nothing is written).

    Yields:
        The temporary directory to write into (flat: files only).

    Raises:
        OutputError: the temporary directory cannot be created, or the files cannot be
            moved into place.
    """
    target = Path(path)
    parent = _parent(target)
    with _termination_as_interrupt():
        made: list[Path] = []
        try:
            made = _make_parents(parent)
            work = Path(tempfile.mkdtemp(prefix=f".{target.name}.", suffix=_TMP_SUFFIX, dir=parent))
        except OSError as exc:
            _remove_made(made)
            raise OutputError(f"cannot create {target}: {_why(exc)}.") from exc
        try:
            yield work
            umask = os.umask(0)
            os.umask(umask)
            os.chmod(work, 0o777 & ~umask)
            try:
                os.rename(work, target)  # refused when target exists (a directory)
            except OSError:
                if not target.is_dir():
                    raise
                for entry in sorted(work.iterdir()):
                    os.replace(entry, target / entry.name)
                work.rmdir()
            _fsync_dir(parent)
        except OSError as exc:
            shutil.rmtree(work, ignore_errors=True)
            _remove_made(made)
            raise OutputError(
                f"cannot write {target}: {_why(exc)}; nothing was written (any previous "
                "files are unchanged)."
            ) from exc
        except BaseException:
            shutil.rmtree(work, ignore_errors=True)
            _remove_made(made)
            raise


def _remove(tmp: Path, folder: Path | None = None) -> None:
    with contextlib.suppress(OSError):
        tmp.unlink()
    _remove_folder(folder)


def _remove_folder(folder: Path | None) -> None:
    if folder is not None:
        with contextlib.suppress(OSError):
            folder.rmdir()


def _set_mode(tmp: Path, target: Path) -> None:
    """Give the new file the mode of the file it replaces, or what a plain open() would.

    mkstemp creates 0600 files; a frozen model or an SVG is meant to be shared.
    """
    try:
        mode = target.stat().st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    os.chmod(tmp, mode)


def _write(path: str | os.PathLike[str], writer: Callable[[Path], object]) -> Path:
    target = Path(path)
    with atomic_path(target) as tmp:
        writer(tmp)
    return target


def write_bytes(path: str | os.PathLike[str], data: bytes) -> Path:
    """Atomically write ``data`` to ``path``.

    Args:
        path: the final file (missing directories are made, as mkdir -p).
        data: the whole content.

    Returns:
        ``path`` as a Path.

    Raises:
        OutputError: the file cannot be written; nothing is left behind.
    """
    return _write(path, lambda tmp: tmp.write_bytes(data))


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Atomically write UTF-8 ``text`` to ``path``.

    Args:
        path: the final file (missing directories are made, as mkdir -p).
        text: the whole content.

    Returns:
        ``path`` as a Path.

    Raises:
        OutputError: the file cannot be written; nothing is left behind.
    """
    return _write(path, lambda tmp: tmp.write_text(text, encoding="utf-8"))


def save_module(module: object, path: str | os.PathLike[str]) -> Path:
    """Atomically ``torch.jit.save`` a ScriptModule to ``path``.

    The archive's records are named after ``path`` (not after a temporary file), so the
    bytes are those a plain ``torch.jit.save`` to ``path`` writes. torch reports write
    failures (full disk, vanished directory) as RuntimeError from its C++ writer; here
    they become an :class:`OutputError` naming ``path``.

    Args:
        module: a ``torch.jit.ScriptModule``.
        path: the final ``.pt`` file (its directory must exist).

    Returns:
        ``path`` as a Path.

    Raises:
        OutputError: the file cannot be written; nothing is left behind.
    """
    import torch  # imported here so that writing text outputs never needs torch

    target = Path(path)
    with atomic_path(target, same_name=True) as tmp:
        try:
            torch.jit.save(module, str(tmp))
        except RuntimeError as exc:
            line = next((s.strip() for s in str(exc).splitlines() if s.strip()), "")
            raise OutputError(
                f"cannot write {target}: torch.jit.save failed ({line[:200]}); nothing was written."
            ) from exc
    return target
