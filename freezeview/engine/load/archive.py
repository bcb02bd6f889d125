"""What a ``.pt`` file is, checked before torch reads it: one sentence per bad file.

The path (missing, with close names; a directory; a pipe or device, whose opening would
hang; unreadable; empty), the format (a TorchScript zip, a ``torch.save`` zip or bare
pickle, a ``torch.export`` archive, safetensors, something else) and the archive itself
(truncated, damaged bookkeeping, a member whose checksum fails, no ``code/``, pickles
that name anything outside torch, tensor records that do not fit their data). Nothing
is unpickled: pickles are read as opcodes (:mod:`.pickle_scan`).
"""

from __future__ import annotations

import difflib
import functools
import io
import mmap
import os
import pickletools
import re
import stat
import struct
import warnings
import zipfile
import zlib
from pathlib import Path

from ..plumbing import BadInputError
from .pickle_scan import (
    PICKLE_PROTO,
    STATE_PICKLES,
    TORCHSCRIPT_GLOBALS,
    dangerous_globals,
    describe_pickle,
    is_pickle,
    pickle_globals,
    scan_archive_pickle,
    storage_refs,
)

__all__ = ["check_model_file", "check_model_kind"]

_ZIP_MAGIC = b"PK\x03\x04"
_EMPTY_ZIP_MAGIC = b"PK\x05\x06"
# Members are read back fully to check their checksums. Beyond this many stored bytes
# the check is skipped: torch reads the data anyway, and reading a multi-GB model twice
# costs more than it is worth. CRC-32 runs at several GB/s, so below it the check costs
# a fraction of torch.jit.load itself.
_CRC_CHECK_LIMIT = 2 * 1024**3
# Pickle members of a TorchScript archive are small (tensor bytes live in data/); a
# larger one is scanned only this far.
_PICKLE_SCAN_LIMIT = 64 * 1024**2

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
        raise BadInputError(f"{p} cannot be opened ({first_line(exc)}): check the path.") from None
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
    if head[:1] == bytes([PICKLE_PROTO]) or is_pickle(_read_head(p, 1024**2)):
        return describe_pickle(p, _read_head(p, _PICKLE_SCAN_LIMIT))
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


#: Flags of a zip member freezeview's quick check leaves to zipfile: encrypted, patched
#: data, strong encryption (torch sets none of them).
_UNUSUAL_FLAGS = 0x1 | 0x20 | 0x40
#: A zip member's local header (signature, versions, flags, method, time, date, CRC-32,
#: sizes, name and extra lengths), as zipfile reads it.
_LOCAL_HEADER = struct.Struct("<4s2B4HL2L2H")


def _member_intact(data: memoryview, info: zipfile.ZipInfo) -> bool:
    """True if ``info``'s member reads back whole with its CRC-32, as zipfile would find.

    The bytes are checked where they lie in the mapped file: no member is opened through
    zipfile (a deep model has thousands of members, and zipfile's per-member open costs
    far more than the CRC itself). False means only "not sure": the caller then reads
    the member through zipfile, which says what is wrong with it.
    """
    start = info.header_offset
    header = data[start : start + _LOCAL_HEADER.size]
    if len(header) < _LOCAL_HEADER.size:
        return False
    magic, _v, _s, local_flags, *_rest, name_len, extra_len = _LOCAL_HEADER.unpack(header)
    if magic != b"PK\x03\x04" or (local_flags | info.flag_bits) & _UNUSUAL_FLAGS:
        return False
    name_at = start + _LOCAL_HEADER.size
    raw_name = bytes(data[name_at : name_at + name_len])
    try:
        name = raw_name.decode("utf-8" if local_flags & 0x800 else "cp437")
    except UnicodeDecodeError:
        return False
    if name != info.orig_filename:
        return False
    begin = name_at + name_len + extra_len
    end = begin + info.compress_size
    if end > len(data):
        return False
    stored = data[begin:end]
    if info.compress_type == zipfile.ZIP_STORED:
        if info.compress_size != info.file_size:
            return False
        return zlib.crc32(stored) == info.CRC
    if info.compress_type == zipfile.ZIP_DEFLATED:
        inflate = zlib.decompressobj(-15)
        try:
            out = inflate.decompress(stored)
        except zlib.error:
            return False
        return inflate.eof and len(out) == info.file_size and zlib.crc32(out) == info.CRC
    return False


def _check_members_readable(p: Path, archive: zipfile.ZipFile) -> None:
    """Read every member back, checking sizes, decompression and CRC-32."""
    infos = archive.infolist()
    try:
        with p.open("rb") as source, mmap.mmap(source.fileno(), 0, access=mmap.ACCESS_READ) as mm:
            data = memoryview(mm)
            try:
                doubtful = [info for info in infos if not _member_intact(data, info)]
            finally:
                data.release()
    except (OSError, ValueError):  # a file that cannot be mapped: zipfile reads each member
        doubtful = infos
    for info in doubtful:
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
                why = f"cannot be read ({first_line(exc)})"
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
                f"read ({first_line(exc)}); copy or save the model again."
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
            f"{p} is damaged and cannot be read as a zip archive ({first_line(exc)}): copy "
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
        raise BadInputError(describe_pickle(p, raw))
    raise BadInputError(
        f"{p} is a zip archive but not a TorchScript model (it has no code/): save the "
        "model with torch.jit.save."
    )


def _check_tensor_records(
    p: Path,
    pickle_name: str,
    raw: bytes,
    sizes: dict[str, int],
    refs: list[tuple[str, str, str, int]] | None = None,
) -> None:
    """Refuse archives whose tensor records are smaller than their pickle says.

    torch trusts the element count in the pickle: ``torch.jit.load`` accepts a record
    cut short (an empty ``data/3`` for a 4-element tensor), and freezing the module then
    reads past the buffer and kills the whole process with a segmentation fault —
    freezeview's fuzzing found this (tests/fuzz_regressions/). Checked here, the damage
    gets a sentence instead.
    """
    stem = pickle_name[: -len(".pkl")]
    for key, storage_type, device, numel in storage_refs(raw) if refs is None else refs:
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
        # One pass over a pickle as torch writes them answers all three questions below
        # (what it names, its tensor records, whether it is whole): the opcode walk is
        # most of the check's time. Anything else gets the careful passes.
        whole = scan_archive_pickle(raw) if info.file_size <= _PICKLE_SCAN_LIMIT else None
        names = whole[0] if whole is not None else pickle_globals(raw)
        if short in STATE_PICKLES:
            _check_tensor_records(p, short, raw, sizes, whole[1] if whole is not None else None)
        foreign = [n for n in names if not n.startswith(TORCHSCRIPT_GLOBALS)]
        if foreign:
            danger = dangerous_globals(foreign)
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
        if whole is None and info.file_size <= _PICKLE_SCAN_LIMIT:
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
    if raw[:1] != bytes([PICKLE_PROTO]):
        return "it does not start with a pickle protocol header"
    stream = io.BytesIO(raw)
    try:
        last = None
        for opcode, _arg, _pos in pickletools.genops(stream):
            last = opcode.name
    except Exception as exc:
        return first_line(exc)
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
        raise BadInputError(f"{p} cannot be read ({first_line(exc)}): check the file.") from None
    try:
        _check_archive(p, head, size)
    except BadInputError:
        raise
    except OSError as exc:
        raise BadInputError(f"{p} cannot be read ({first_line(exc)}): check the file.") from None
    except Exception as exc:
        # The checks read damaged bytes by design; whatever else a damaged file makes
        # them raise is still "damaged", never a traceback.
        raise BadInputError(
            f"{p} is damaged ({type(exc).__name__}: {first_line(exc)}); copy or save the "
            "model again."
        ) from exc
    return p


def check_model_kind(path: str | os.PathLike[str]) -> Path:
    """The cheap part of :func:`check_model_file`: the path, and whether the file is a
    TorchScript archive at all, with the same sentences (a ``torch.save`` state_dict, a
    plain pickle, safetensors, a ``torch.export`` archive... are refused).

    It reads the file's first bytes and the zip directory, never the members' data, and
    imports no torch: the app runs it before its screen shows, and leaves the rest of
    the checks (damage, checksums, tensor records) to the engine process's load.

    Raises:
        BadInputError: with one sentence saying what the file is and what to do.
    """
    p = Path(path)
    size = _check_path(p)
    try:
        head = _read_head(p, 16)
        if head[:4] != _ZIP_MAGIC:
            _check_archive(p, head, size)  # raises: what the file is
            return p  # (never reached)
        try:
            archive = zipfile.ZipFile(p)
        except Exception:
            return p  # damage: the full check says what (check_model_file)
        with archive:
            members = {_member_short(i.filename) for i in archive.infolist()}
            if members and not any(m.startswith("code/") for m in members):
                _refuse_non_torchscript_zip(p, archive, members)
    except BadInputError:
        raise
    except Exception:
        return p  # whatever the cheap look cannot tell, the full check says
    return p


def first_line(exc: BaseException) -> str:
    """The first non-empty line of an exception's text (torch often starts with a newline)."""
    for line in str(exc).splitlines():
        line = line.strip()
        if line:
            return line[:200]
    return type(exc).__name__


@functools.lru_cache(maxsize=64)
def _element_size(storage_type: str) -> int | None:
    """Bytes per element of ``torch.FloatStorage`` & co., or None if unknown."""
    short = storage_type.rsplit(".", 1)[-1]
    if not re.fullmatch(r"\w+Storage", short):
        return None
    # torch only here: the rest of the checks run before torch is imported (the app's
    # start-up check, check_model_kind).
    import torch

    # The typed storage classes are deprecated (and warn when touched), but they are
    # still the one table from the names TorchScript writes to dtypes.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        cls = getattr(torch, short, None)
        dtype = getattr(cls, "dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype.itemsize
    return None
