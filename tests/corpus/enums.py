"""TorchScript ``Enum`` attributes: read, unused, written, shared by a class, preserved.

timm's ``PatchEmbed(output_fmt='NHWC')`` (inside every timm Swin) keeps its output format
as a ``Format(str, Enum)`` member and compares it in ``forward``. torch treats enum
members as immutable values: it folds a read one like a number. The same models are
also built by another interpreter and loaded here from bytes, where the enum's Python
class is not importable (as on a machine without the package that defined it).
"""

# No `from __future__ import annotations`: TorchScript resolves the class annotation
# `output_fmt: Format` from the live class body, not from a string.
import functools
import io
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from enum import Enum
from pathlib import Path

import torch
from made_once import made_once
from torch import nn

from ._case import Case, image_inputs, scripted

_SOURCE = '''
import enum
import io
import sys

import torch
from torch import nn


class Format(str, enum.Enum):
    NCHW = "NCHW"
    NHWC = "NHWC"
    NLC = "NLC"


class Color(enum.Enum):
    RED = 1
    GREEN = 2


def nchw_to(x: torch.Tensor, fmt: Format) -> torch.Tensor:
    if fmt == Format.NHWC:
        x = x.permute(0, 2, 3, 1)
    elif fmt == Format.NLC:
        x = x.flatten(2).transpose(1, 2)
    return x


class PatchEmbed(nn.Module):
    """timm's PatchEmbed, cut down: the format is compared, then handed to a function."""

    output_fmt: Format

    def __init__(self, output_fmt: str = "NHWC"):
        super().__init__()
        self.proj = nn.Conv2d(3, 4, 2, 2)
        self.flatten = False
        self.output_fmt = Format(output_fmt)
        self.spare = Color.GREEN  # never read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x)
        if self.flatten:
            x = x.flatten(2).transpose(1, 2)
        elif self.output_fmt != Format.NCHW:
            x = nchw_to(x, self.output_fmt)
        return x


class Block(nn.Module):
    def __init__(self, color: Color):
        super().__init__()
        self.color = color
        self.w = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.color == Color.RED:
            return x * self.w
        return x + self.w


class Blocks(nn.Module):
    """Three modules of one class; one's enum is assigned in forward."""

    def __init__(self):
        super().__init__()
        self.a = Block(Color.RED)
        self.b = Block(Color.RED)
        self.c = Block(Color.GREEN)
        self.mode = Color.GREEN  # never read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.b.color = Color.GREEN
        return self.c(self.b(self.a(x)))


def saved(module):
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(module.eval()), buffer)
    return buffer.getvalue()


if __name__ == "__main__":
    folder = sys.argv[1]
    for name, make in [("patch_embed", PatchEmbed), ("blocks", Blocks)]:
        with open(f"{folder}/{name}.pt", "wb") as f:
            f.write(saved(make()))
'''


# The same classes, importable here (TorchScript reads their source from this file).
class Format(str, Enum):  # noqa: UP042 - timm's own shape (a str mixin, not StrEnum)
    NCHW = "NCHW"
    NHWC = "NHWC"
    NLC = "NLC"


class Color(Enum):
    RED = 1
    GREEN = 2


def nchw_to(x: torch.Tensor, fmt: Format) -> torch.Tensor:
    if fmt == Format.NHWC:
        x = x.permute(0, 2, 3, 1)
    elif fmt == Format.NLC:
        x = x.flatten(2).transpose(1, 2)
    return x


class PatchEmbed(nn.Module):
    output_fmt: Format

    def __init__(self, output_fmt: str = "NHWC") -> None:
        super().__init__()
        self.proj = nn.Conv2d(3, 4, 2, 2)
        self.flatten = False
        self.output_fmt = Format(output_fmt)
        self.spare = Color.GREEN  # never read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.proj(x)
        if self.flatten:
            x = x.flatten(2).transpose(1, 2)
        elif self.output_fmt != Format.NCHW:
            x = nchw_to(x, self.output_fmt)
        return x


class Block(nn.Module):
    def __init__(self, color: Color) -> None:
        super().__init__()
        self.color = color
        self.w = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.color == Color.RED:
            return x * self.w
        return x + self.w


class Blocks(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.a = Block(Color.RED)
        self.b = Block(Color.RED)
        self.c = Block(Color.GREEN)
        self.mode = Color.GREEN  # never read

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.b.color = Color.GREEN
        return self.c(self.b(self.a(x)))


@functools.cache
def _archives() -> dict[str, bytes]:
    """Each foreign model's archive bytes, built once per test run (``made_once``)."""

    def make() -> dict[str, bytes]:
        with tempfile.TemporaryDirectory(prefix="freezeview-enums-") as folder:
            source = Path(folder) / "their_enums.py"
            source.write_text(textwrap.dedent(_SOURCE))
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            subprocess.run([sys.executable, str(source), folder], check=True, env=env)
            return {path.stem: path.read_bytes() for path in Path(folder).glob("*.pt")}

    return made_once("enums", [_SOURCE], make)


def _loaded(name: str) -> Callable[[], torch.jit.ScriptModule]:
    def build() -> torch.jit.ScriptModule:
        return torch.jit.load(io.BytesIO(_archives()[name]))

    return build


def archive(name: str) -> bytes:
    """The saved bytes of the foreign model ``name`` (``patch_embed``, ``blocks``)."""
    return _archives()[name]


_TAGS = frozenset({"enum"})

CASES = [
    Case("enum_patch_embed", scripted(PatchEmbed), inputs=image_inputs, tags=_TAGS),
    Case("enum_shared_class_set_attr", scripted(Blocks), tags=_TAGS | {"set-attr"}),
    Case(
        "enum_preserved_in_shared_class",
        scripted(Blocks),
        preserved_attrs=("a.color",),
        tags=_TAGS | {"preserve"},
    ),
    Case(
        "enum_foreign_patch_embed",
        _loaded("patch_embed"),
        inputs=image_inputs,
        tags=_TAGS | {"saved"},
    ),
    Case(
        "enum_foreign_shared_class_set_attr",
        _loaded("blocks"),
        tags=_TAGS | {"saved", "set-attr"},
    ),
    Case(
        "enum_foreign_preserved_in_shared_class",
        _loaded("blocks"),
        preserved_attrs=("a.color",),
        tags=_TAGS | {"saved", "preserve"},
    ),
]
