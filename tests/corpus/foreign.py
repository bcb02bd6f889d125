"""Models whose TorchScript classes cannot be imported where they are inspected.

Someone else's model holds instances of ``@torch.jit.script`` classes whose Python source
is not on this machine: torch then cannot turn them into Python objects (``classType
INTERNAL ASSERT FAILED ... __torch__.X is not found``). These models are built by another
interpreter from a source file that is deleted afterwards, and loaded here from bytes.
"""

from __future__ import annotations

import functools
import io
import os
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import Callable
from pathlib import Path

import torch
from made_once import made_once

from ._case import Case

_SOURCE = """
import io
import sys
from typing import List

import torch
from torch import nn


@torch.jit.script
class Scale:
    def __init__(self, factor: float):
        self.factor = factor

    def apply(self, x: torch.Tensor) -> torch.Tensor:
        return x * self.factor


@torch.jit.script
class Tally:
    def __init__(self):
        self.seen = 0

    def bump(self) -> int:
        self.seen += 1
        return self.seen


class ReadsObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale(2.0)
        self.spare = Scale(3.0)
        self.weight = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return self.scale.apply(x) + self.weight


class MutatesObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.tally = Tally()
        self.bias = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x + self.bias + self.tally.bump()


class AssignsObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.scale = Scale(1.0)
        self.bias = nn.Parameter(torch.zeros(4))

    def forward(self, x):
        out = self.scale.apply(x)
        self.scale = Scale(float(x.shape[0]))
        return out + self.bias


class ReadsAndWrites(nn.Module):
    # Objects read, unused and mutated, next to a buffer written in place.

    def __init__(self):
        super().__init__()
        self.scale = Scale(2.0)
        self.spare = Scale(3.0)
        self.tally = Tally()
        self.bias = nn.Parameter(torch.ones(4))
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1)
        n = self.tally.bump()
        return self.scale.apply(x) + self.bias + n


class Tool(nn.Module):
    def __init__(self):
        super().__init__()
        self.k = nn.Parameter(torch.ones(4))

    def forward(self, x):
        return x + self.k

    @torch.jit.export
    def square(self, x):
        return x * x


class HoldsTool(nn.Module):
    def __init__(self):
        super().__init__()
        self.tool = Tool()
        self.w = nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x):
        return self.tool(x) * self.w


class ListOfObjects(nn.Module):
    def __init__(self):
        super().__init__()
        self.steps: List[Scale] = [Scale(1.0), Scale(0.5)]

    def forward(self, x):
        for step in self.steps:
            x = step.apply(x)
        return x


def saved(module):
    buffer = io.BytesIO()
    torch.jit.save(torch.jit.script(module.eval()), buffer)
    return buffer.getvalue()


out = {
    name: saved(cls())
    for name, cls in [
        ("reads", ReadsObject),
        ("mutates", MutatesObject),
        ("assigns", AssignsObject),
        ("list", ListOfObjects),
        ("objects", ReadsAndWrites),
        ("tool", HoldsTool),
    ]
}
folder = sys.argv[1]
for name, data in out.items():
    with open(f"{folder}/{name}.pt", "wb") as f:
        f.write(data)
"""


@functools.cache
def _archives() -> dict[str, bytes]:
    """Each model's archive bytes, built once per test run (``made_once``)."""

    def make() -> dict[str, bytes]:
        with tempfile.TemporaryDirectory(prefix="freezeview-foreign-") as folder:
            source = Path(folder) / "their_models.py"
            source.write_text(textwrap.dedent(_SOURCE))
            env = {**os.environ, "PYTHONWARNINGS": "ignore"}
            subprocess.run([sys.executable, str(source), folder], check=True, env=env)
            return {path.stem: path.read_bytes() for path in Path(folder).glob("*.pt")}

    return made_once("foreign", [_SOURCE], make)


def _loaded(name: str) -> Callable[[], torch.jit.ScriptModule]:
    def build() -> torch.jit.ScriptModule:
        return torch.jit.load(io.BytesIO(_archives()[name]))

    return build


def source_line(snippet: str) -> int:
    """The line of the builders' (deleted) source file holding ``snippet``."""
    lines = textwrap.dedent(_SOURCE).splitlines()
    return next(i for i, line in enumerate(lines, 1) if snippet in line)


def archive(name: str) -> bytes:
    """The saved bytes of the model ``name`` (``objects``, ``tool``, ``reads``, ...)."""
    return _archives()[name]


CASES = [
    Case("foreign_class_read", _loaded("reads"), tags=frozenset({"script-class", "saved"})),
    Case(
        "foreign_class_read_and_written",
        _loaded("objects"),
        tags=frozenset({"script-class", "saved", "in-place"}),
    ),
    Case(
        "foreign_class_method_mutates",
        _loaded("mutates"),
        tags=frozenset({"script-class", "saved"}),
    ),
    Case(
        "foreign_class_assigned",
        _loaded("assigns"),
        tags=frozenset({"script-class", "saved", "set-attr"}),
    ),
    Case("foreign_class_list", _loaded("list"), tags=frozenset({"script-class", "saved"})),
]
