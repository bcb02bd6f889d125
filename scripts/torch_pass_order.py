"""Read the installed torch's frozen-graph pass order and hold freezeview's default order to it.

Run it with the Python of the torch release to read (``make test-torch`` builds one)::

    /tmp/fv-torch/2.6.0/bin/python scripts/torch_pass_order.py

``torch.jit.freeze`` is Python (``torch/jit/_freeze.py``) calling C++: ``_freeze_module``,
then ``_jit_pass_optimize_frozen_graph`` (``OptimizeFrozenGraph``,
``torch/csrc/jit/passes/frozen_graph_optimizations.cpp``) on forward and on each preserved
method; ``torch.jit.optimize_for_inference`` adds ``_jit_pass_optimize_for_inference``
(``optimize_for_inference``, ``torch/csrc/jit/api/module.cpp``). Both are read as
installed: the Python calls from ``_freeze.py``'s syntax tree, the C++ calls in order from
the machine code of ``libtorch_cpu.so`` (``nm`` and ``objdump`` from Debian's binutils),
with the backward jump that makes the fold loop. It prints what it read and exits 0 if
freezeview's default order is torch's, 1 if not, 2 if it could not read this torch.
``tests/engine/freeze/test_passes.py`` runs the same reading on the torch the suite runs on.
"""

from __future__ import annotations

import ast
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import torch

# The C++ function behind each of freezeview's pass ids.
CPP = {
    "remove_dropout": "removeDropout",
    "concat_frozen_linear": "FrozenConcatLinear",
    "fold_conv_bn": "FoldFrozenConvBatchnorm",
    "fold_conv_add_or_sub": "FoldFrozenConvAddOrSub",
    "fold_conv_mul_or_div": "FoldFrozenConvMulOrDiv",
    "fold_linear_bn": "FoldFrozenLinearBatchnorm",
    "fuse_conv_add_relu": "FuseFrozenConvAddRelu",
    "convert_to_mkldnn": "ConvertFrozenOpsToMKLDNN",
    "transpose_frozen_linear": "FrozenLinearTranspose",
}
_CALL = re.compile(r"^\s*([0-9a-f]+):\s+(?:call|jmp)\s+[0-9a-f]+ <torch::jit::(\w+)\(")
_JUMP = re.compile(r"^\s*([0-9a-f]+):\s+j\w+\s+([0-9a-f]+) <")
_PY_CALLS = ("_freeze_module", "run_frozen_optimizations", "freeze")


class Unreadable(Exception):
    """This torch (or this machine) does not let its pass order be read."""


@dataclass
class TorchOrder:
    """What the installed torch runs, as read from its files."""

    version: str
    git: str
    python: dict[str, list[str]] = field(default_factory=dict)
    frozen: list[str] = field(default_factory=list)
    fold_loop: bool = False
    inference: list[str] = field(default_factory=list)


def python_calls(source: str) -> dict[str, list[str]]:
    """Per function of ``_freeze.py``: its ``torch._C`` passes and freezing calls, in order."""
    calls: dict[str, list[str]] = {}
    for node in ast.walk(ast.parse(source)):
        if not isinstance(node, ast.FunctionDef):
            continue
        names: list[str] = []
        subs = sorted(
            (n for n in ast.walk(node) if isinstance(n, ast.Call)),
            key=lambda n: (n.lineno, n.col_offset),
        )
        for sub in subs:
            func = sub.func
            name = (
                func.attr
                if isinstance(func, ast.Attribute)
                else func.id
                if isinstance(func, ast.Name)
                else ""
            )
            if (name.startswith("_jit_pass") or name in _PY_CALLS) and name not in names:
                names.append(name)
        calls[node.name] = names
    return calls


def _run(argv: list[str]) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=True).stdout


def _disassemble(lib: Path, symbol: str, symbols: str) -> tuple[list[tuple[int, str]], list]:
    """The ``torch::jit`` functions ``symbol`` calls (address, name) and its backward jumps."""
    for line in symbols.splitlines():
        parts = line.split(None, 3)
        if len(parts) == 4 and parts[3].startswith(f"torch::jit::{symbol}("):
            start, size = int(parts[0], 16), int(parts[1], 16)
            break
    else:
        raise Unreadable(f"{lib.name} does not export torch::jit::{symbol}")
    text = _run(
        [
            "objdump",
            "-d",
            "-C",
            "--no-show-raw-insn",
            f"--start-address={start:#x}",
            f"--stop-address={start + size:#x}",
            str(lib),
        ]
    )
    calls: list[tuple[int, str]] = []
    back: list[tuple[int, int]] = []
    for line in text.splitlines():
        if call := _CALL.match(line):
            calls.append((int(call.group(1), 16), call.group(2)))
        elif jump := _JUMP.match(line):
            here, target = int(jump.group(1), 16), int(jump.group(2), 16)
            if start <= target < here:
                back.append((here, target))
    return calls, back


def read_torch(folds: list[str]) -> TorchOrder:
    """Read the installed torch's order; ``folds`` are the C++ names of the loop passes."""
    if shutil.which("objdump") is None or shutil.which("nm") is None:
        raise Unreadable("needs nm and objdump (Debian's binutils)")
    lib = Path(torch.__file__).parent / "lib" / "libtorch_cpu.so"
    if not lib.is_file():
        raise Unreadable(f"no {lib}")
    order = TorchOrder(torch.__version__, torch.version.git_version or "?")
    order.python = python_calls(Path(torch.jit.__file__).with_name("_freeze.py").read_text())
    symbols = _run(["nm", "-D", "-C", "-S", "--defined-only", str(lib)])
    known = set(CPP.values())
    calls, back = _disassemble(lib, "OptimizeFrozenGraph", symbols)
    order.frozen = [name for _, name in calls if name in known]
    where = {name: at for at, name in calls}
    if all(f in where for f in folds):
        first, last = where[folds[0]], where[folds[-1]]
        order.fold_loop = any(here > last and target <= first for here, target in back)
    calls, _ = _disassemble(lib, "optimize_for_inference", symbols)
    order.inference = [name for _, name in calls if name in known]
    return order


def differences(order: TorchOrder, default: list[str], inference: list[str]) -> list[str]:
    """How torch's order differs from freezeview's (pass ids of ``default``/``inference``)."""
    found = []
    py = order.python
    if py.get("freeze", [])[:2] != ["_freeze_module", "run_frozen_optimizations"]:
        found.append(f"freeze calls {py.get('freeze')}")
    if py.get("run_frozen_optimizations") != ["_jit_pass_optimize_frozen_graph"]:
        found.append(f"run_frozen_optimizations calls {py.get('run_frozen_optimizations')}")
    if "_jit_pass_optimize_for_inference" not in py.get("optimize_for_inference", []):
        found.append(f"optimize_for_inference calls {py.get('optimize_for_inference')}")
    if order.frozen != [CPP[p] for p in default]:
        found.append(f"OptimizeFrozenGraph calls {order.frozen}")
    if not order.fold_loop:
        found.append("OptimizeFrozenGraph has no fold loop")
    ours = [CPP[p] for p in inference]
    # forward's graph, then each other method's: freezeview's order once per graph
    if not ours or order.inference != ours * max(1, len(order.inference) // len(ours)):
        found.append(f"optimize_for_inference calls {order.inference}")
    return found


def main() -> int:
    from freezeview.engine.freeze import passes

    default = list(passes.default_passes())
    inference = [p for p in passes.default_passes(True, True) if p not in default]
    folds = [CPP[p] for p in default if passes.REGISTRY[p].group == "loop"]
    try:
        order = read_torch(folds)
    except (Unreadable, OSError, subprocess.CalledProcessError) as exc:
        print(f"could not read torch {torch.__version__}'s pass order: {exc}")
        return 2
    print(f"torch {order.version} (git {order.git})")
    for name in ("freeze", "run_frozen_optimizations", "optimize_for_inference"):
        print(f"  _freeze.py {name}: {' -> '.join(order.python.get(name, [])) or '?'}")
    print(f"  OptimizeFrozenGraph: {' -> '.join(order.frozen)}; fold loop: {order.fold_loop}")
    print(f"  optimize_for_inference: {' -> '.join(order.inference)}")
    found = differences(order, default, inference)
    verdict = "same" if not found else "DIFFERENT: " + "; ".join(found)
    print(f"  freezeview's order ({', '.join(default)}; {', '.join(inference)}): {verdict}")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
