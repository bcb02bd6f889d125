"""The attribute paths a TorchScript archive holds, read from its ``data.pkl`` without
torch and without unpickling: the app checks ``--preserve`` names with them before its
screen shows.

``torch.jit.save`` pickles the module tree as objects whose state is a dict of
attribute name to value, a submodule being one more such object (with its
``training`` flag). The pickle's opcodes are run on a small simulated stack that builds
only dicts, lists, tuples, strings and numbers, and a placeholder object for anything a
global would build: nothing is imported or called. Methods are not in ``data.pkl``
(they are in ``code/``): a name this does not find is no proof it is unknown, and the
caller asks torch then.
"""

from __future__ import annotations

import os
import pickletools
import zipfile
from collections.abc import Iterator
from pathlib import PurePosixPath

__all__ = ["archive_attribute_paths"]

#: A ``data.pkl`` larger than this is not read here (torch's own check answers).
_MAX_BYTES = 64 * 1024**2


class _Object:
    """What a global would build: its dict state, if the pickle gives one."""

    __slots__ = ("state",)

    def __init__(self) -> None:
        self.state: dict[object, object] | None = None


class _Mark:
    """The pickle MARK on the stack."""


_MARK = _Mark()


def _pop_mark(stack: list[object]) -> list[object]:
    at = len(stack) - 1 - stack[::-1].index(_MARK)
    items = stack[at + 1 :]
    del stack[at:]
    return items


def _root(data: bytes) -> object:
    """The pickle's value, as far as the module tree goes (raises on anything else)."""
    stack: list[object] = []
    memo: dict[object, object] = {}
    for op, arg, _ in pickletools.genops(data):
        name = op.name
        if name in ("PROTO", "FRAME"):
            continue
        if name in ("BINPUT", "LONG_BINPUT", "PUT"):
            memo[arg] = stack[-1]
        elif name == "MEMOIZE":
            memo[len(memo)] = stack[-1]
        elif name in ("BINGET", "LONG_BINGET", "GET"):
            stack.append(memo[arg])
        elif name == "MARK":
            stack.append(_MARK)
        elif name in ("GLOBAL", "STACK_GLOBAL"):
            if name == "STACK_GLOBAL":
                del stack[-2:]
            stack.append(_Object())
        elif name in ("NEWOBJ", "REDUCE"):
            del stack[-2:]
            stack.append(_Object())
        elif name == "BINPERSID":
            stack[-1] = None
        elif name == "EMPTY_DICT":
            stack.append({})
        elif name == "EMPTY_LIST":
            stack.append([])
        elif name == "EMPTY_TUPLE":
            stack.append(())
        elif name in ("TUPLE1", "TUPLE2", "TUPLE3"):
            n = int(name[-1])
            last = tuple(stack[-n:])
            del stack[-n:]
            stack.append(last)
        elif name == "TUPLE":
            stack.append(tuple(_pop_mark(stack)))
        elif name == "SETITEM":
            value, key = stack.pop(), stack.pop()
            target = stack[-1]
            assert isinstance(target, dict)
            target[key] = value
        elif name == "SETITEMS":
            pairs = _pop_mark(stack)
            target = stack[-1]
            assert isinstance(target, dict)
            target.update(zip(pairs[::2], pairs[1::2], strict=True))
        elif name in ("APPEND", "APPENDS"):
            added = [stack.pop()] if name == "APPEND" else _pop_mark(stack)
            target = stack[-1]
            if isinstance(target, list):
                target.extend(added)
        elif name == "BUILD":
            state = stack.pop()
            target = stack[-1]
            if isinstance(target, _Object) and isinstance(state, dict):
                target.state = state
        elif name == "STOP":
            return stack.pop()
        elif op.stack_before == [] and len(op.stack_after) == 1:
            stack.append(arg)  # a string, a number, None, True or False
        else:
            raise ValueError(f"opcode {name} not read here")
    raise ValueError("no STOP")


def _paths(obj: object, prefix: str) -> Iterator[str]:
    if not isinstance(obj, _Object) or obj.state is None:
        return
    for key, value in obj.state.items():
        if not isinstance(key, str):
            continue
        path = prefix + key
        yield path
        if isinstance(value, _Object) and value.state is not None and "training" in value.state:
            yield from _paths(value, path + ".")  # a submodule


def archive_attribute_paths(path: str | os.PathLike[str]) -> frozenset[str] | None:
    """Every attribute and submodule path of the TorchScript archive at ``path``
    (``conv``, ``conv.weight``, ``layer1.0.bn.running_mean``; methods are not listed),
    or None when the archive cannot be read this way (torch's check answers then)."""
    try:
        with zipfile.ZipFile(path) as archive:
            info = next(
                (i for i in archive.infolist() if PurePosixPath(i.filename).name == "data.pkl"),
                None,
            )
            if info is None or info.file_size > _MAX_BYTES:
                return None
            data = archive.read(info)
        root = _root(data)
    except Exception:
        return None
    if not isinstance(root, _Object) or root.state is None:
        return None
    return frozenset(_paths(root, ""))
