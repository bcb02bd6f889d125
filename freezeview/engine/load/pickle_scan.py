"""Pickles read as opcodes only: what a pickle names, without running any of it.

A pickle can run any code when it is unpickled, so freezeview never unpickles one to
find out what a file is: :mod:`pickletools` walks the opcodes, which is enough to list
the globals a pickle names (``torch._utils._rebuild_tensor_v2``, ``os.system``), tell a
state_dict from a whole pickled module, and read the tensor records a TorchScript
archive's ``data.pkl`` refers to.
"""

from __future__ import annotations

import io
import pickletools
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

__all__ = ["pickle_globals", "sniff_pickle", "storage_refs"]

PICKLE_PROTO = 0x80
# Globals a TorchScript archive's pickles legitimately name: TorchScript classes
# (``__torch__.``), torch's tensor/storage rebuild helpers, OrderedDict.
TORCHSCRIPT_GLOBALS = ("__torch__.", "torch.", "collections.OrderedDict")
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
STATE_PICKLES = frozenset({"data.pkl", "constants.pkl"})
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


# Each opcode by its byte: (name, argument width, signed, pickletools' reader). Width 1,
# 2, 4 and 8 are little-endian ints; -1 and -4 a UTF-8 string after a 1- or 4-byte
# length; 0 no argument; None anything else, read by pickletools itself.
_FAST_ARGS = {
    "uint1": (1, False),
    "uint2": (2, False),
    "int4": (4, True),
    "uint4": (4, False),
    "unicodestring1": (-1, False),
    "unicodestring4": (-4, False),
}
_BY_BYTE: list[tuple[str, int | None, bool, Any] | None] = [None] * 256
for _op in pickletools.opcodes:
    _width, _signed = (0, False) if _op.arg is None else _FAST_ARGS.get(_op.arg.name, (None, False))
    _BY_BYTE[ord(_op.code)] = (
        _op.name,
        _width,
        _signed,
        None if _op.arg is None else _op.arg.reader,
    )


def _opcodes(data: bytes, end: list[int]) -> Iterator[tuple[str, Any]]:
    """(opcode name, argument) of the pickle starting at ``end[0]``, as
    :func:`pickletools.genops` reads them, up to its STOP (``end[0]`` is then just
    after it).

    The arguments of the opcodes TorchScript writes most (memo reads and writes, small
    ints, strings) are decoded here: through ``genops`` they were half the scan's time.
    Anything else is read by pickletools' own reader. Raises ValueError (or the
    reader's error) where ``genops`` would: an unknown opcode, a pickle cut short.
    """
    pos = end[0]
    size = len(data)
    stream: io.BytesIO | None = None
    table = _BY_BYTE
    while True:
        if pos >= size:
            raise ValueError("pickle exhausted before seeing STOP")
        entry = table[data[pos]]
        if entry is None:
            raise ValueError(f"at position {pos}, opcode {data[pos : pos + 1]!r} unknown")
        name, width, signed, reader = entry
        pos += 1
        arg: Any
        if width == 0:
            arg = None
        elif width == 1:
            if pos >= size:
                raise ValueError("not enough data in stream to read uint1")
            arg = data[pos]
            pos += 1
        elif width is not None and width > 0:
            stop = pos + width
            if stop > size:
                raise ValueError(f"not enough data in stream to read {width} bytes")
            arg = int.from_bytes(data[pos:stop], "little", signed=signed)
            pos = stop
        elif width is not None:
            stop = pos - width
            if stop > size:
                raise ValueError("not enough data in stream to read a string length")
            stop += int.from_bytes(data[pos:stop], "little")
            if stop > size:
                raise ValueError("not enough data in stream to read a string")
            arg = str(data[pos - width : stop], "utf-8", "surrogatepass")
            pos = stop
        else:
            if stream is None:
                stream = io.BytesIO(data)
            stream.seek(pos)
            arg = reader(stream)
            pos = stream.tell()
        end[0] = pos
        yield name, arg
        if name == "STOP":
            return


# What the scan does with each opcode (see :func:`_scan_pickles`), by opcode name.
(
    _GET,
    _VALUE,
    _MARK_OP,
    _TUPLE,
    _PUT,
    _SHAPE,
    _STRING,
    _SMALL_TUPLE,
    _EMPTY_TUPLE,
    _MEMOIZE,
    _PERSID,
    _GLOBAL,
    _STACK_GLOBAL,
    _EXT,
    _STOP,
) = range(15)
_ACTIONS: dict[str, int] = {op.name: _SHAPE for op in pickletools.opcodes}
_ACTIONS.update(dict.fromkeys(_STRING_OPS, _STRING))
_ACTIONS.update(dict.fromkeys(_INT_OPS, _VALUE))
_ACTIONS.update(dict.fromkeys(("GLOBAL", "INST"), _GLOBAL))
_ACTIONS.update(dict.fromkeys(("EXT1", "EXT2", "EXT4"), _EXT))
_ACTIONS.update(dict.fromkeys(("TUPLE1", "TUPLE2", "TUPLE3"), _SMALL_TUPLE))
_ACTIONS.update(dict.fromkeys(("PUT", "BINPUT", "LONG_BINPUT"), _PUT))
_ACTIONS.update(dict.fromkeys(("GET", "BINGET", "LONG_BINGET"), _GET))
_ACTIONS.update(
    STACK_GLOBAL=_STACK_GLOBAL,
    MARK=_MARK_OP,
    TUPLE=_TUPLE,
    EMPTY_TUPLE=_EMPTY_TUPLE,
    MEMOIZE=_MEMOIZE,
    BINPERSID=_PERSID,
    STOP=_STOP,
)
# The other opcodes' stack effect: (pops to a MARK first, then pops, then pushes).
_SHAPES: dict[str, tuple[bool, int, int]] = {
    op.name: (
        pickletools.markobject in op.stack_before,
        op.stack_before.index(pickletools.markobject)
        if pickletools.markobject in op.stack_before
        else len(op.stack_before),
        len(op.stack_after),
    )
    for op in pickletools.opcodes
}


def _pop_to_mark(stack: list[object]) -> list[object]:
    items: list[object] = []
    while True:
        item = stack.pop()  # IndexError on a malformed pickle: the scan stops
        if item is _MARK:
            return items[::-1]
        items.append(item)


def _scan(data: bytes, max_pickles: int) -> tuple[list[str], list[tuple[str, str, str, int]]]:
    """What :func:`_scan_pickles` reads of ``data``, without whether it was whole.

    Returns:
        (globals as ``module.name``, storages as ``(key, storage type, device, numel)``);
        see :func:`_scan_pickles`.
    """
    names, refs, _whole = _scan_pickles(data, max_pickles)
    return names, refs


def scan_archive_pickle(data: bytes) -> tuple[list[str], list[tuple[str, str, str, int]]] | None:
    """Globals and storages of one pickle as TorchScript writes them, in one pass.

    Returns:
        ``(pickle_globals(data), storage_refs(data))`` when ``data`` is exactly one
        complete pickle (protocol header, STOP, nothing after it); None otherwise, and
        the caller asks the careful questions one by one (what is wrong with it).
    """
    if data[:1] != bytes([PICKLE_PROTO]):
        return None
    names, refs, whole = _scan_pickles(data, 1)
    return (list(dict.fromkeys(names)), refs) if whole else None


def _scan_pickles(
    data: bytes, max_pickles: int
) -> tuple[list[str], list[tuple[str, str, str, int]], bool]:
    """Run a pickle's opcodes on a simulated stack; nothing is ever called or imported.

    The stack holds only what freezeview needs to know — strings, ints, globals, tuples
    and the memo — and a placeholder for everything else, using each opcode's declared
    stack effect (``pickletools``' opcode table). That is enough to resolve every
    global the pickle would import (even when built from memoised strings with
    ``STACK_GLOBAL``) and to read TorchScript's tensor storage ids.

    Returns:
        (globals as ``module.name``, storages as ``(key, storage type, device, numel)``,
        whether ``data`` was read to its end as complete pickles).
    """
    names: list[str] = []
    refs: list[tuple[str, str, str, int]] = []
    actions = _ACTIONS
    end = [0]  # where the last pickle read ended
    for _ in range(max_pickles):
        if end[0] >= len(data):
            break
        stack: list[object] = []
        memo: dict[object, object] = {}
        finished = False
        try:
            for name, arg in _opcodes(data, end):
                # One table look-up per opcode, the commonest first (a 100k-node model's
                # data.pkl is half a million opcodes; most are memo reads and ints).
                act = actions[name]
                if act == _GET:
                    stack.append(memo.get(arg))
                elif act == _VALUE:
                    stack.append(arg)
                elif act == _MARK_OP:
                    stack.append(_MARK)
                elif act == _TUPLE:
                    stack.append(tuple(_pop_to_mark(stack)))
                elif act == _PUT:
                    memo[arg] = stack[-1]
                elif act == _SHAPE:
                    # Matters only for its effect on the stack's shape.
                    to_mark, pops, pushes = _SHAPES[name]
                    if to_mark:
                        _pop_to_mark(stack)
                    if pops:
                        if len(stack) < pops:
                            raise IndexError  # malformed: the scan stops
                        del stack[-pops:]
                    if pushes:
                        stack.extend([None] * pushes)
                elif act == _STRING:
                    stack.append(arg.decode("latin-1") if isinstance(arg, bytes) else str(arg))
                elif act == _SMALL_TUPLE:
                    n = int(name[-1])
                    if len(stack) < n:
                        raise IndexError
                    items = stack[-n:]
                    del stack[-n:]
                    stack.append(tuple(items))
                elif act == _EMPTY_TUPLE:
                    stack.append(())
                elif act == _MEMOIZE:
                    memo[len(memo)] = stack[-1]
                elif act == _PERSID:
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
                elif act == _GLOBAL:
                    glob = _Global(str(arg).replace(" ", "."))
                    names.append(glob)
                    stack.append(glob if name == "GLOBAL" else None)
                    if name == "INST":
                        _pop_to_mark(stack)
                elif act == _STACK_GLOBAL:
                    attr, module = stack.pop(), stack.pop()
                    ok = isinstance(attr, str) and isinstance(module, str)
                    glob = _Global(f"{module}.{attr}" if ok else "?.?")
                    names.append(glob)
                    stack.append(glob)
                elif act == _EXT:
                    # copyreg's extension registry can name any callable: unknowable here.
                    names.append(_Global("?.?"))
                    stack.append(None)
                else:  # STOP
                    finished = True
                    break
        except Exception:  # damaged, or not a pickle: keep what was read before it
            return names, refs, False
        if not finished:
            return names, refs, False
    return names, refs, end[0] >= len(data)


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


def dangerous_globals(names: list[str]) -> list[str]:
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
    if dangerous_globals(names):
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


def describe_pickle(path: Path, data: bytes) -> str:
    kind = sniff_pickle(data)
    names = pickle_globals(data)
    if kind == "code":
        calls = ", ".join(dangerous_globals(names)[:3])
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


def is_pickle(data: bytes) -> bool:
    """True if ``data`` starts with a complete, well-formed pickle (any protocol)."""
    if data[:1] == bytes([PICKLE_PROTO]) and len(data) > 1 and 2 <= data[1] <= 5:
        return True
    try:
        ops = [name for name, _arg in _iter_pickles(data[: 1024**2], 1)]
    except Exception:
        return False
    return bool(ops) and ops[-1] == "STOP" and len(ops) > 1


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
