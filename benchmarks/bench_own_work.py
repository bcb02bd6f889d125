"""freezeview's own work in one command, apart from torch's: CPU seconds, in one process.

Runs ``freezeview ARGS...`` in this interpreter with torch's own calls timed
(``torch.jit.load``, ``torch._C._freeze_module``, the frozen-graph passes, inlining,
``torch.jit.save``) and prints the command's CPU time, torch's share and the rest: what
freezeview adds on top of torch. CPU time (``time.process_time``) is steadier than wall
time on a shared machine, and torch's share moves with the load as much as the rest, so
compare the rest of two trees run one after the other.

    .venv/bin/python benchmarks/bench_own_work.py freeze /tmp/fv-ladder/L12.pt -o /tmp/o.pt --force
    .venv/bin/python benchmarks/bench_own_work.py explain /tmp/fv-ladder/N2048.pt

(The command runs as a library call: the console script's ``gc.freeze()`` after its
imports does not happen here.)
"""

from __future__ import annotations

import contextlib
import functools
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

_TORCH_CALLS = (
    "_freeze_module",
    "_jit_pass_inline",
    "_jit_pass_remove_dropout",
    "_jit_pass_concat_frozen_linear",
    "_jit_pass_fold_frozen_conv_bn",
    "_jit_pass_fold_frozen_conv_add_or_sub",
    "_jit_pass_fold_frozen_conv_mul_or_div",
    "_jit_pass_fold_frozen_linear_bn",
)


def main() -> int:
    start = time.process_time()
    import torch
    import torch.jit._serialization as serialization

    imported = time.process_time()
    spent: dict[str, list[float]] = {}

    def timed(name: str, fn: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(fn)
        def run(*args: Any, **kwargs: Any) -> Any:
            begin = time.process_time()
            try:
                return fn(*args, **kwargs)
            finally:
                spent.setdefault(name, []).append(time.process_time() - begin)

        return run

    for name in _TORCH_CALLS:
        if hasattr(torch._C, name):
            setattr(torch._C, name, timed(name, getattr(torch._C, name)))
    torch.jit.save = timed("torch.jit.save", torch.jit.save)
    torch.jit.load = serialization.load = timed("torch.jit.load", torch.jit.load)

    from freezeview.cli import main as freezeview

    began = time.process_time()
    with contextlib.suppress(SystemExit):
        freezeview(sys.argv[1:])
    command = time.process_time() - began
    theirs = sum(sum(v) for v in spent.values())
    print(
        f"import torch {imported - start:.2f} s; the command {command:.2f} s CPU: "
        f"torch's calls {theirs:.2f} s, freezeview's own work {command - theirs:.2f} s",
        file=sys.stderr,
    )
    for name, times in sorted(spent.items(), key=lambda item: -sum(item[1])):
        print(f"  {name:42s} x{len(times):<3d} {sum(times):7.3f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
