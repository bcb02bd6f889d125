"""Load a ``.pt`` file as a TorchScript module, with one clear sentence per bad input.

freezeview is opened on files from other people, other machines and other torch
versions, often when something is already wrong. Before handing a file to
``torch.jit.load`` it checks what the file is, cheaply and without running anything:

* the path: missing (with close names from the same directory), a directory, a named
  pipe or device (opening one would hang), unreadable, empty;
* the format: a zip archive (TorchScript, a ``torch.save`` zip, a ``torch.export``
  archive), a bare pickle (legacy ``torch.save``), safetensors, or something else;
* the archive: truncated, damaged bookkeeping, a member whose checksum fails (torch's
  reader does not check them, so flipped bytes in the weights would load silently),
  no ``code/`` (not TorchScript), and pickles that name anything outside torch.

Pickles are only ever *read as opcodes* with :mod:`pickletools`; nothing is unpickled
here, so a hostile pickle runs no code. TorchScript archives are then unpickled by
torch's own C++ unpickler, which resolves only TorchScript types — the pre-scan refuses
archives naming anything else, so the user gets a plain sentence instead of a torch
error about an unknown type.
"""

from __future__ import annotations

import difflib
import functools
import io
import os
import pickletools
import re
import stat
import time
import warnings
import zipfile
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import torch

from .atomic import protect_input
from .errors import BadInputError, PlanError
from .extensions import auto_import_for, load_extensions, unknown_operator
from .interrupts import interrupts_deferred
from .torch_outcome import capture_stderr_fd

__all__ = [
    "LoadedModel",
    "check_eval",
    "check_model_file",
    "load_model",
    "pickle_globals",
    "sniff_pickle",
    "storage_refs",
]

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
_PICKLE_PROTO = 0x80
# Members are read back fully to check their checksums. Beyond this many stored bytes
# the check is skipped: torch reads the data anyway, and reading a multi-GB model twice
# costs more than it is worth. CRC-32 runs at several GB/s, so below it the check costs
# a fraction of torch.jit.load itself.
_CRC_CHECK_LIMIT = 2 * 1024**3
# Pickle members of a TorchScript archive are small (tensor bytes live in data/); a
# larger one is scanned only this far.
_PICKLE_SCAN_LIMIT = 64 * 1024**2
# Globals a TorchScript archive's pickles legitimately name: TorchScript classes
# (``__torch__.``), torch's tensor/storage rebuild helpers, OrderedDict.
_TORCHSCRIPT_GLOBALS = ("__torch__.", "torch.", "collections.OrderedDict")
# Modules whose callables turn unpickling into running code (shell, files, imports).
_DANGEROUS_MODULES = frozenset(
    {
        "os",
        "posix",
        "nt",
        "subprocess",
        "sys",
        "shutil",
        "socket",
        "importlib",
        "runpy",
        "pty",
        "code",
        "ctypes",
        "pickle",
        "marshal",
        "webbrowser",
        "commands",
        "platform",
        "multiprocessing",
        "asyncio",
        "io",
        "pathlib",
        "tempfile",
        "urllib",
        "requests",
    }
)
# builtins that only build plain values; any other builtin (eval, exec, getattr,
# __import__, open, ...) makes a pickle an instruction to run code.
_HARMLESS_BUILTINS = frozenset(
    {
        "set",
        "frozenset",
        "slice",
        "complex",
        "bytearray",
        "bytes",
        "list",
        "dict",
        "tuple",
        "int",
        "float",
        "bool",
        "str",
        "range",
        "object",
    }
)


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
    """

    module: torch.jit.ScriptModule
    path: Path | None = None
    name: str = ""
    load_seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    was_training: bool = False
    notes: list[str] = field(default_factory=list)

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
            was_training=bool(module.training),
        )


# --------------------------------------------------------------------------- pickles


def _iter_pickles(data: bytes, max_pickles: int) -> Iterator[tuple[str, object]]:
    """(opcode name, argument) of up to ``max_pickles`` consecutive pickles in ``data``.

    Legacy ``torch.save`` files are several pickles back to back (magic number,
    protocol, system info, the object, storage keys) followed by raw storage bytes;
    reading stops quietly at the first thing that is not a pickle.
    """
    stream = io.BytesIO(data)
    for _ in range(max_pickles):
        start = stream.tell()
        if start >= len(data):
            return
        try:
            for opcode, arg, _pos in pickletools.genops(stream):
                yield opcode.name, arg
        except Exception:
            return
        if stream.tell() == start:
            return


class _Mark:
    """The pickle MARK on the simulated stack."""


class _Global(str):
    """A global reference (``module.name``) on the simulated stack."""


_MARK = _Mark()
# The pickles whose tensors become the module's state. (traced_inputs.pkl is written
# by torch.jit.trace with deliberately empty records, and is not module state.)
_STATE_PICKLES = frozenset({"data.pkl", "constants.pkl"})
_STRING_OPS = frozenset(
    {
        "SHORT_BINUNICODE",
        "BINUNICODE",
        "UNICODE",
        "BINUNICODE8",
        "SHORT_BINSTRING",
        "BINSTRING",
        "STRING",
    }
)
_INT_OPS = frozenset({"BININT", "BININT1", "BININT2", "INT", "LONG", "LONG1", "LONG4"})


def _pop_to_mark(stack: list[object]) -> list[object]:
    items: list[object] = []
    while True:
        item = stack.pop()  # IndexError on a malformed pickle: the scan stops
        if item is _MARK:
            return items[::-1]
        items.append(item)


def _scan(data: bytes, max_pickles: int) -> tuple[list[str], list[tuple[str, str, str, int]]]:
    """Run a pickle's opcodes on a simulated stack; nothing is ever called or imported.

    The stack holds only what freezeview needs to know — strings, ints, globals, tuples
    and the memo — and a placeholder for everything else, using each opcode's declared
    stack effect (``pickletools``' opcode table). That is enough to resolve every
    global the pickle would import (even when built from memoised strings with
    ``STACK_GLOBAL``) and to read TorchScript's tensor storage ids.

    Returns:
        (globals as ``module.name``, storages as ``(key, storage type, device, numel)``).
    """
    names: list[str] = []
    refs: list[tuple[str, str, str, int]] = []
    stream = io.BytesIO(data)
    for _ in range(max_pickles):
        if stream.tell() >= len(data):
            break
        stack: list[object] = []
        memo: dict[object, object] = {}
        finished = False
        try:
            for opcode, arg, _pos in pickletools.genops(stream):
                name = opcode.name
                if name in _STRING_OPS:
                    stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else str(arg))
                elif name in _INT_OPS:
                    stack.append(arg)
                elif name in ("GLOBAL", "INST"):
                    glob = _Global(str(arg).replace(" ", "."))
                    names.append(glob)
                    stack.append(glob if name == "GLOBAL" else None)
                    if name == "INST":
                        _pop_to_mark(stack)
                elif name == "STACK_GLOBAL":
                    attr, module = stack.pop(), stack.pop()
                    ok = isinstance(attr, str) and isinstance(module, str)
                    glob = _Global(f"{module}.{attr}" if ok else "?.?")
                    names.append(glob)
                    stack.append(glob)
                elif name in ("EXT1", "EXT2", "EXT4"):
                    # copyreg's extension registry can name any callable: unknowable here.
                    names.append(_Global("?.?"))
                    stack.append(None)
                elif name == "MARK":
                    stack.append(_MARK)
                elif name == "TUPLE":
                    stack.append(tuple(_pop_to_mark(stack)))
                elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
                    n = int(name[-1])
                    if len(stack) < n:
                        raise IndexError
                    items = stack[-n:]
                    del stack[-n:]
                    stack.append(tuple(items))
                elif name == "EMPTY_TUPLE":
                    stack.append(())
                elif name in ("PUT", "BINPUT", "LONG_BINPUT"):
                    memo[arg] = stack[-1]
                elif name == "MEMOIZE":
                    memo[len(memo)] = stack[-1]
                elif name in ("GET", "BINGET", "LONG_BINGET"):
                    stack.append(memo.get(arg))
                elif name == "BINPERSID":
                    pid = stack.pop()
                    if (
                        isinstance(pid, tuple)
                        and len(pid) >= 5
                        and pid[0] == "storage"
                        and isinstance(pid[1], _Global)
                        and isinstance(pid[2], str)
                        and isinstance(pid[3], str)
                        and isinstance(pid[4], int)
                    ):
                        refs.append((pid[2], str(pid[1]), pid[3], pid[4]))
                    stack.append(None)
                elif name == "STOP":
                    finished = True
                    break
                else:
                    # Everything else matters only for its effect on the stack's shape.
                    op = opcode
                    before = op.stack_before
                    if pickletools.markobject in before:
                        _pop_to_mark(stack)
                        extra = before.index(pickletools.markobject)
                    else:
                        extra = len(before)
                    for _ in range(extra):
                        stack.pop()
                    stack.extend([None] * len(op.stack_after))
        except Exception:  # damaged, or not a pickle: keep what was read before it
            return names, refs
        if not finished:
            return names, refs
    return names, refs


def pickle_globals(data: bytes, *, max_pickles: int = 8) -> list[str]:
    """The dotted names a pickle would import when unpickled, read without unpickling.

    The opcodes run on a simulated stack (see :func:`_scan`), so names built from
    memoised strings are resolved too; a name the scan cannot resolve is reported as
    ``"?.?"``, which counts as dangerous.

    Args:
        data: the pickle bytes (or several pickles back to back, as legacy
            ``torch.save`` writes them).
        max_pickles: how many consecutive pickles to read.

    Returns:
        Names such as ``"collections.OrderedDict"`` or ``"posix.system"``, in order,
        duplicates removed.
    """
    return list(dict.fromkeys(_scan(data, max_pickles)[0]))


def _dangerous(names: list[str]) -> list[str]:
    out = []
    for name in names:
        root, _, rest = name.partition(".")
        if (
            root in _DANGEROUS_MODULES
            # protocol 2 pickles spell Python 3's builtins as __builtin__
            or (root in ("builtins", "__builtin__") and rest not in _HARMLESS_BUILTINS)
        ):
            out.append(name)
    return out


def sniff_pickle(data: bytes) -> str:
    """Say what a pickle holds without unpickling it.

    Args:
        data: pickle bytes (a bare pickle, or a zip's ``data.pkl``).

    Returns:
        ``"code"`` when unpickling would call something that runs code (``os.system``,
        ``builtins.eval``, ...), ``"module"`` when it names an ``nn.Module`` or another
        Python class to rebuild, ``"state_dict"`` for a mapping of tensors,
        ``"tensors"`` for bare tensors or containers of them, and ``"pickle"`` when it
        cannot tell.
    """
    names = pickle_globals(data)
    if _dangerous(names):
        return "code"
    plain = (
        "torch._utils.",
        "torch.storage",
        "collections.",
        "builtins.",
        "__builtin__.",
        "_codecs.encode",
    )
    others = [
        n for n in names if not n.startswith(plain) and not re.fullmatch(r"torch\.\w*Storage", n)
    ]
    if others:
        return "module"
    if names:
        return "state_dict" if _object_is_mapping(data) else "tensors"
    return "pickle"


def _object_is_mapping(data: bytes) -> bool:
    """True if the pickled object (the first pickle that names a global) is a dict.

    Legacy ``torch.save`` files start with small pickles (magic number, protocol, a
    dict of system info) before the object itself, hence "the first that names a
    global". A dict starts with EMPTY_DICT, an OrderedDict with its class.
    """
    stream = io.BytesIO(data)
    for _ in range(8):
        first: tuple[str, object] | None = None
        has_global = False
        try:
            for opcode, arg, _pos in pickletools.genops(stream):
                if opcode.name in ("PROTO", "FRAME"):
                    continue
                if first is None:
                    first = (opcode.name, arg)
                has_global = has_global or opcode.name in ("GLOBAL", "STACK_GLOBAL")
        except Exception:  # damaged or not a pickle
            return False
        if has_global and first is not None:
            name, arg = first
            return name == "EMPTY_DICT" or (
                name in ("GLOBAL", *_STRING_OPS)
                and str(arg) in ("collections OrderedDict", "collections")
            )
        if stream.tell() >= len(data):
            return False
    return False


def _describe_pickle(path: Path, data: bytes) -> str:
    kind = sniff_pickle(data)
    names = pickle_globals(data)
    if kind == "code":
        calls = ", ".join(_dangerous(names)[:3])
        return (
            f"{path} is a pickle that would run code when unpickled (it calls {calls}); "
            "freezeview did not unpickle it: do not load it with torch.load, and ask for a "
            "model saved with torch.jit.save."
        )
    if kind == "state_dict":
        return (
            f"{path} is a torch.save'd state_dict (weights only), not TorchScript: load it "
            "into its nn.Module, then torch.jit.script (or trace) the module and save it "
            "with torch.jit.save."
        )
    if kind == "module":
        classes = [
            n
            for n in names
            if not n.startswith(("torch._utils.", "collections.", "builtins.", "__builtin__."))
        ]
        first = classes[0] if classes else "a Python object"
        return (
            f"{path} is a torch.save'd pickle of a Python object ({first}), not TorchScript: "
            "torch.jit.script (or trace) the module and save it with torch.jit.save."
        )
    if kind == "tensors":
        return (
            f"{path} holds torch.save'd tensors, not a TorchScript model: give the model "
            "file saved with torch.jit.save."
        )
    return (
        f"{path} is a Python pickle, not a TorchScript model: save the model with torch.jit.save."
    )


def _is_pickle(data: bytes) -> bool:
    """True if ``data`` starts with a complete, well-formed pickle (any protocol)."""
    if data[:1] == bytes([_PICKLE_PROTO]) and len(data) > 1 and 2 <= data[1] <= 5:
        return True
    try:
        ops = [name for name, _arg in _iter_pickles(data[: 1024**2], 1)]
    except Exception:
        return False
    return bool(ops) and ops[-1] == "STOP" and len(ops) > 1


# --------------------------------------------------------------------------- the path


def _close_names(p: Path) -> list[str]:
    """Names in ``p``'s directory that look like what the user meant."""
    parent = p.parent if str(p.parent) else Path(".")
    try:
        if not parent.is_dir():
            return []
        names = [e.name for e in os.scandir(parent) if not e.name.startswith(".")][:5000]
    except OSError:
        return []
    return difflib.get_close_matches(p.name, names, n=3, cutoff=0.6)


def _check_path(p: Path) -> int:
    """Raise BadInputError unless ``p`` is a readable, non-empty regular file; return size."""
    try:
        st = p.stat()
    except FileNotFoundError:
        if p.is_symlink():
            raise BadInputError(
                f"{p} is a broken symbolic link (to {os.readlink(p)}): fix the link or give "
                "the model file itself."
            ) from None
        close = _close_names(p)
        hint = f" (did you mean {', '.join(str(p.with_name(n)) for n in close)}?)" if close else ""
        raise BadInputError(f"{p} does not exist: check the path{hint}.") from None
    except NotADirectoryError:
        raise BadInputError(
            f"{p} does not exist: a part of the path before the file name is a file, not a "
            "directory; check the path."
        ) from None
    except PermissionError:
        raise BadInputError(
            f"{p} cannot be reached (permission denied on its directory): check the "
            "permissions or copy the model somewhere readable."
        ) from None
    except OSError as exc:
        raise BadInputError(f"{p} cannot be opened ({_first_line(exc)}): check the path.") from None
    if stat.S_ISDIR(st.st_mode):
        raise BadInputError(_describe_directory(p))
    if not stat.S_ISREG(st.st_mode):
        # Opening a FIFO blocks until a writer appears and a device never ends: both
        # would hang freezeview, so they are refused before any read.
        what = "a named pipe" if stat.S_ISFIFO(st.st_mode) else "a device or socket"
        raise BadInputError(
            f"{p} is {what}, not a regular file: save the model to a file with "
            "torch.jit.save and give that file."
        )
    if not os.access(p, os.R_OK):
        raise BadInputError(f"{p} cannot be read (permission denied): check its permissions.")
    if st.st_size == 0:
        raise BadInputError(
            f"{p} is empty (0 bytes), probably an interrupted save or copy: save or copy "
            "the model again."
        )
    return st.st_size


def _describe_directory(p: Path) -> str:
    try:
        entries = sorted(e.name for e in os.scandir(p))
    except OSError:
        entries = []
    if "data.pkl" in entries and "code" in entries:
        return (
            f"{p} is an unpacked TorchScript archive (a directory), not a .pt file: give "
            "the original .pt file, or zip the directory itself back into one."
        )
    models = [n for n in entries if n.endswith((".pt", ".pth", ".ptl", ".torchscript"))]
    hint = f" such as {p / models[0]}" if models else ""
    return f"{p} is a directory, not a TorchScript file: give a .pt file{hint}."


# --------------------------------------------------------------------------- the format


def _describe_non_zip(p: Path, head: bytes, size: int) -> str:
    """One sentence for a file that is not a zip archive."""
    if head[:1] == bytes([_PICKLE_PROTO]) or _is_pickle(_read_head(p, 1024**2)):
        return _describe_pickle(p, _read_head(p, _PICKLE_SCAN_LIMIT))
    if len(head) >= 9 and head[8:9] == b"{":
        header_len = int.from_bytes(head[:8], "little")
        if 0 < header_len < size:
            return (
                f"{p} holds safetensors weights, not a TorchScript model: load them into "
                "the nn.Module, torch.jit.script (or trace) it and save it with "
                "torch.jit.save."
            )
    if head.startswith(b"\x89HDF"):
        what = "an HDF5 file"
    elif head.startswith(b"\x1f\x8b"):
        what = "a gzip file"
    elif head.startswith(b"\x08") and b"pytorch" in _read_head(p, 256):
        what = "an ONNX model"
    else:
        what = None
    if what:
        return f"{p} is {what}, not a TorchScript model: save the model with torch.jit.save."
    if _looks_like_text(head):
        return (
            f"{p} is a text file, not a TorchScript model: give the .pt file written by "
            "torch.jit.save."
        )
    return (
        f"{p} is not a TorchScript model (it is not a zip archive): give the file written "
        "by torch.jit.save, or save the model again."
    )


def _looks_like_text(head: bytes) -> bool:
    try:
        text = head.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return all(ch.isprintable() or ch in "\r\n\t" for ch in text)


def _read_head(p: Path, n: int) -> bytes:
    with p.open("rb") as fh:
        return fh.read(n)


def _member_short(name: str) -> str:
    """``archive/code/x.py`` -> ``code/x.py`` (the record name torch uses)."""
    return name.split("/", 1)[1] if "/" in name else name


def _check_members_readable(p: Path, archive: zipfile.ZipFile) -> None:
    """Read every member back, checking sizes, decompression and CRC-32."""
    for info in archive.infolist():
        try:
            with archive.open(info, "r") as fh:
                while fh.read(1 << 20):
                    pass
        except zipfile.BadZipFile as exc:
            text = str(exc)
            if "CRC" in text:
                why = "fails its checksum"
            elif "magic number" in text or "differ" in text:
                why = "has a damaged header"
            else:
                why = f"cannot be read ({_first_line(exc)})"
            raise BadInputError(
                f"{p} is damaged: archive member {_member_short(info.filename)!r} {why}; "
                "copy or save the model again."
            ) from None
        except RuntimeError as exc:
            # zipfile's way of saying the member's flags claim encryption: torch never
            # encrypts, so a set flag is damage.
            why = "is marked encrypted" if "encrypted" in str(exc) else "cannot be read"
            raise BadInputError(
                f"{p} is damaged: archive member {_member_short(info.filename)!r} {why}; "
                "copy or save the model again."
            ) from None
        except Exception as exc:  # zlib.error, EOFError, NotImplementedError, OSError...
            raise BadInputError(
                f"{p} is damaged: archive member {_member_short(info.filename)!r} cannot be "
                f"read ({_first_line(exc)}); copy or save the model again."
            ) from None


def _check_archive(p: Path, head: bytes, size: int) -> None:
    """Raise BadInputError unless ``p`` looks like an intact TorchScript zip archive."""
    if head[:4] == _EMPTY_ZIP_MAGIC:
        raise BadInputError(
            f"{p} is an empty zip archive, not a TorchScript model: save the model again "
            "with torch.jit.save."
        )
    if head[:4] != _ZIP_MAGIC:
        raise BadInputError(_describe_non_zip(p, head, size))
    try:
        archive = zipfile.ZipFile(p)
    except zipfile.BadZipFile:
        # zipfile finds no end-of-archive record: the classic sign of a cut-off copy.
        raise BadInputError(
            f"{p} is truncated or damaged ({size} bytes, and its zip directory at the end "
            "is missing): copy or save the model again."
        ) from None
    except Exception as exc:  # any failure to parse the central directory is damage
        raise BadInputError(
            f"{p} is damaged and cannot be read as a zip archive ({_first_line(exc)}): copy "
            "or save the model again."
        ) from None
    with archive:
        infos = archive.infolist()
        if not infos:
            raise BadInputError(
                f"{p} is an empty zip archive, not a TorchScript model: save the model "
                "again with torch.jit.save."
            )
        for info in infos:
            end = info.header_offset + info.compress_size
            if info.header_offset >= size or end > size:
                raise BadInputError(
                    f"{p} is truncated or damaged: archive member "
                    f"{_member_short(info.filename)!r} lies past the end of the file; copy "
                    "or save the model again."
                )
        members = {_member_short(i.filename) for i in infos}
        has_code = any(m.startswith("code/") for m in members)
        if not has_code:
            _refuse_non_torchscript_zip(p, archive, members)
        stored = sum(i.compress_size for i in infos)
        if stored <= _CRC_CHECK_LIMIT:
            _check_members_readable(p, archive)
        if "data.pkl" not in members:
            raise BadInputError(
                f"{p} is damaged: the archive has code/ but no data.pkl (the module's "
                "state); copy or save the model again."
            )
        _check_archive_pickles(p, archive, infos)


def _refuse_non_torchscript_zip(p: Path, archive: zipfile.ZipFile, members: set[str]) -> None:
    """Always raises: the zip has no ``code/`` so it is not TorchScript; say what it is."""
    if any(m.endswith("serialized_exported_program.json") for m in members) or any(
        m in ("archive_format", ".data/version") and "models/" in "".join(members) for m in members
    ):
        raise BadInputError(
            f"{p} is a torch.export archive (an ExportedProgram), not TorchScript: "
            "freezeview reads torch.jit.save files; script or trace the model instead."
        )
    if "data.pkl" in members:
        info = next(i for i in archive.infolist() if _member_short(i.filename) == "data.pkl")
        try:
            with archive.open(info) as fh:
                raw = fh.read(_PICKLE_SCAN_LIMIT)
        except Exception:  # damage here is reported by the checksum pass
            raw = b""
        raise BadInputError(_describe_pickle(p, raw))
    raise BadInputError(
        f"{p} is a zip archive but not a TorchScript model (it has no code/): save the "
        "model with torch.jit.save."
    )


def storage_refs(data: bytes) -> list[tuple[str, str, str, int]]:
    """The tensor storages a TorchScript pickle refers to, read without unpickling.

    TorchScript pickles a tensor's storage as a persistent id
    ``("storage", torch.FloatStorage, key, device, numel)``; its bytes live in the
    archive record ``<pickle name>/<key>`` (``data.pkl`` -> ``data/0``).

    Args:
        data: a pickle from a TorchScript archive (``data.pkl``, ``constants.pkl``).

    Returns:
        ``(key, storage type name, device, element count)`` for each storage, in
        order.
        A damaged pickle yields the storages read before the damage.
    """
    return _scan(data, 1)[1]


@functools.lru_cache(maxsize=64)
def _element_size(storage_type: str) -> int | None:
    """Bytes per element of ``torch.FloatStorage`` & co., or None if unknown."""
    short = storage_type.rsplit(".", 1)[-1]
    if not re.fullmatch(r"\w+Storage", short):
        return None
    # The typed storage classes are deprecated (and warn when touched), but they are
    # still the one table from the names TorchScript writes to dtypes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = getattr(torch, short, None)
        dtype = getattr(cls, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return None


def _check_tensor_records(p: Path, pickle_name: str, raw: bytes, sizes: dict[str, int]) -> None:
    """Refuse archives whose tensor records are smaller than their pickle says.

    torch trusts the element count in the pickle: ``torch.jit.load`` accepts a record
    cut short (an empty ``data/3`` for a 4-element tensor), and freezing the module then
    reads past the buffer and kills the whole process with a segmentation fault —
    freezeview's fuzzing found this (tests/fuzz_regressions/). Checked here, the damage
    gets a sentence instead.
    """
    stem = pickle_name[: -len(".pkl")]
    for key, storage_type, device, numel in storage_refs(raw):
        record = f"{stem}/{key}"
        itemsize = _element_size(storage_type)
        if record not in sizes or itemsize is None or numel < 0 or device == "meta":
            continue  # a missing record gets torch's own (clean) error; meta has no bytes
        expected = numel * itemsize
        if sizes[record] < expected:
            raise BadInputError(
                f"{p} is damaged: tensor record {record!r} holds {sizes[record]} bytes but "
                f"{pickle_name} expects {expected}; copy or save the model again."
            )


def _check_archive_pickles(p: Path, archive: zipfile.ZipFile, infos: list[zipfile.ZipInfo]) -> None:
    """Refuse TorchScript archives whose pickles name anything but TorchScript types, or
    whose tensor records are shorter than the pickles say."""
    sizes = {_member_short(i.filename): i.file_size for i in infos}
    for info in infos:
        short = _member_short(info.filename)
        # Top-level pickles hold the module state (data.pkl), constants and mobile
        # bytecode; code/*.debug_pkl hold source ranges. data/ holds raw tensor bytes.
        if not short.endswith("pkl") or short.startswith("data/"):
            continue
        try:
            with archive.open(info) as fh:
                raw = fh.read(_PICKLE_SCAN_LIMIT)
        except Exception:  # damage here is reported by the checksum pass
            continue  # already reported by the checksum pass when it ran
        if short in _STATE_PICKLES:
            _check_tensor_records(p, short, raw, sizes)
        foreign = [n for n in pickle_globals(raw) if not n.startswith(_TORCHSCRIPT_GLOBALS)]
        if foreign:
            danger = _dangerous(foreign)
            if danger:
                raise BadInputError(
                    f"{p} is not a plain TorchScript archive: its {short} would call "
                    f"{', '.join(danger[:3])} when loaded; freezeview refused to load it "
                    "(treat the file as hostile)."
                )
            raise BadInputError(
                f"{p} is damaged or not plain TorchScript: its {short} names "
                f"{', '.join(foreign[:3])}, which is not a TorchScript type; save the "
                "model again with torch.jit.save."
            )
        if info.file_size <= _PICKLE_SCAN_LIMIT:
            problem = _pickle_damage(raw)
            if problem:
                # torch reads code/*.debug_pkl lazily, when freezing first asks for a
                # source line: unchecked, the damage surfaced as "cannot be frozen".
                raise BadInputError(
                    f"{p} is damaged: archive member {short!r} is not a valid pickle "
                    f"({problem}); copy or save the model again."
                )


def _pickle_damage(raw: bytes) -> str | None:
    """Why ``raw`` is not one complete pickle as torch writes them, or None if it is."""
    if raw[:1] != bytes([_PICKLE_PROTO]):
        return "it does not start with a pickle protocol header"
    stream = io.BytesIO(raw)
    try:
        last = None
        for opcode, _arg, _pos in pickletools.genops(stream):
            last = opcode.name
    except Exception as exc:
        return _first_line(exc)
    if last != "STOP":
        return "it ends before its STOP opcode"
    if stream.tell() != len(raw):
        return f"{len(raw) - stream.tell()} stray bytes follow its end"
    return None


def check_model_file(path: str | os.PathLike[str]) -> Path:
    """Check, without loading anything, that ``path`` looks like an intact TorchScript file.

    This is the part of :func:`load_model` that runs before torch sees the file. The app
    can call it on the UI thread to reject a bad path at once; it reads the file (the
    checksums) but never unpickles or executes anything.

    Args:
        path: the file to check.

    Returns:
        The path as a :class:`~pathlib.Path`.

    Raises:
        BadInputError: with one sentence saying what the file is and what to do.
    """
    p = Path(path)
    size = _check_path(p)
    try:
        head = _read_head(p, 16)
    except PermissionError:
        raise BadInputError(
            f"{p} cannot be read (permission denied): check its permissions."
        ) from None
    except OSError as exc:
        raise BadInputError(f"{p} cannot be read ({_first_line(exc)}): check the file.") from None
    try:
        _check_archive(p, head, size)
    except BadInputError:
        raise
    except OSError as exc:
        raise BadInputError(f"{p} cannot be read ({_first_line(exc)}): check the file.") from None
    except Exception as exc:
        # The checks read damaged bytes by design; whatever else a damaged file makes
        # them raise is still "damaged", never a traceback.
        raise BadInputError(
            f"{p} is damaged ({type(exc).__name__}: {_first_line(exc)}); copy or save the "
            "model again."
        ) from exc
    return p


# --------------------------------------------------------------------------- torch errors


def _first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's text (torch often starts with a newline)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line:
            return line[:200]
    return type(exc).__name__


def _torch_error_sentence(p: Path, exc: BaseException) -> str:
    """Turn an exception from ``torch.jit.load`` into one sentence for the user."""
    text = str(exc)
    first = _first_line(exc)
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
    loaded = LoadedModel(
        module=module,
        path=p,
        name=p.name,
        load_seconds=elapsed,
        warnings=[f"{w.category.__name__}: {w.message}" for w in caught] + printed,
        was_training=bool(module.training),
        notes=notes,
    )
    if eval_mode and module.training:
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
    if loaded.module.training:
        raise PlanError(
            f"{loaded.path or loaded.name} holds a module in training mode, and freezing "
            "needs eval mode: pass --eval (or call .eval() on the module before saving it)."
        )
