"""What the child processes of ``migrate`` share (torch-facing): the request read and the
result written, inputs cloned per call, outputs compared, torch's own line of an
exception, and "is it as fast?".

The frozen TorchScript forward (``torch.jit.freeze`` of the loaded model, run on a
private copy) and another forward (the ExportedProgram's, AOTInductor's) are timed by
measure's :func:`~freezeview.engine.measure.time_pair` in alternating blocks, with the
rules ``freeze`` uses for "did it help": fixed threads, warm-up, medians and spread,
``--time-budget`` seconds per forward. The latencies go back to ``migrate`` as plain
dicts (:func:`dataclasses.asdict` of :class:`~freezeview.engine.measure.Latency`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import io
import os
import pickle
import threading
import time
import warnings
from collections.abc import Callable, Sequence
from typing import Any

__all__ = ["cloned", "frozen_forward", "same_outputs", "time_against_frozen", "torch_line"]


def answer_request(
    argv: Sequence[str], run: Callable[[dict[str, Any]], dict[str, Any]], did: str
) -> int:
    """A child's whole life: the pickled request at ``argv[0]`` run by ``run``, its result
    pickled at ``argv[1]`` (whole or not at all, so the parent never reads half a result);
    an exception of the model, the inputs or the program is a result too (``did``, e.g.
    ``converted``, False, with torch's line). What the child prints is kept from the
    parent's terminal. Returns the process's exit code (0 once a result is written)."""
    request_path, result_path = argv[0], argv[1]
    with open(request_path, "rb") as f:
        request = pickle.load(f)
    leave_with_parent(request.get("parent"))
    warnings.simplefilter("ignore")
    with contextlib.redirect_stdout(io.StringIO()):
        try:
            result = run(request)
        except Exception as exc:
            result = {"available": True, did: False, "error": torch_line(exc)}
    tmp = result_path + ".part"
    with open(tmp, "wb") as f:
        pickle.dump(result, f)
    os.replace(tmp, result_path)
    return 0


#: Seconds between two looks at whether the process that started a child is still there.
PARENT_CHECK = 0.5


def leave_with_parent(
    parent: int | None = None,
    period: float = PARENT_CHECK,
    leave: Callable[[int], object] = os._exit,
) -> threading.Thread:
    """End this child (``leave(1)``) once the process that started it, ``parent`` (its
    pid, which ``migrate`` puts in the request; by default this process's parent now),
    has gone.

    The app's engine process leaves at once when the user quits, without waiting for the
    converter it started (``m``); unwatched, that converter would run on to its time
    limit with nobody to read its result. Checked from a daemon thread every ``period``
    seconds (the converter is Python code calling torch: the thread has its turns).

    A child forked by the fresh-process server (measure/fresh_process.py) has that server
    for its parent, not ``parent``: it also leaves once ``parent`` itself is gone."""
    first = os.getppid()
    parent = first if parent is None else parent

    def gone() -> bool:
        if os.getppid() != first:
            return True  # given to another parent: the one that started it has gone
        if parent == first:
            return False
        try:
            os.kill(parent, 0)
        except ProcessLookupError:
            return True
        except PermissionError:
            pass  # there, under another user
        return False

    def watch() -> None:
        while not gone():
            time.sleep(period)
        leave(1)

    watcher = threading.Thread(target=watch, name="freezeview-parent-watch", daemon=True)
    watcher.start()
    return watcher


def torch_line(exc: BaseException) -> str:
    """torch's last meaningful line of ``exc`` or of the exception it chains from."""
    from ..plumbing import torch_cause

    inner: BaseException = exc
    while inner.__cause__ is not None:
        inner = inner.__cause__
    lines = [
        line.strip()
        for line in str(inner).splitlines()
        if line.strip() and not line.strip().startswith(("Exception raised from", "frame #"))
    ]
    if "INTERNAL ASSERT FAILED" in str(inner) and lines:
        return lines[0][:400]
    return torch_cause(inner) if lines else type(inner).__name__


def cloned(inputs: tuple[Any, ...]) -> tuple[Any, ...]:
    """``inputs`` with every tensor cloned (a forward may write its inputs in place)."""
    import torch

    return tuple(x.clone() if isinstance(x, torch.Tensor) else x for x in inputs)


def same_outputs(a: Any, b: Any) -> tuple[bool, str]:
    """``(True, "")`` when ``b`` equals ``a`` within torch's default tolerances, else
    ``(False, what differs)``."""
    from ..freeze import compare_outputs

    numerics = compare_outputs(a, b)
    if numerics.exact or (numerics.allclose and not numerics.note):
        return True, ""
    return False, numerics.note or f"max abs difference {numerics.max_abs:.3g}"


def frozen_forward(module: Any, inputs: Sequence[Any]) -> tuple[Callable[[], Any] | None, str]:
    """``(call, "")``: one forward of ``torch.jit.freeze(module)`` on ``inputs``, run on a
    private copy (a :class:`~freezeview.engine.freeze.Sandbox`), or ``(None, why)``."""
    import torch

    from ..freeze import Sandbox
    from ..plumbing import torch_cause

    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            frozen = torch.jit.freeze(module)
        run = Sandbox(frozen).function(frozen._c._get_method("forward").graph)
    except Exception as exc:
        return None, f"torch could not freeze the model ({torch_cause(exc)})"
    return (lambda: run(*inputs)), ""


def time_against_frozen(
    frozen: Callable[[], Any],
    other: Callable[[], Any],
    *,
    threads: int,
    budget: float,
) -> dict[str, Any]:
    """``{"frozen": {...}, "other": {...}}``: both forwards timed in alternating blocks
    (``budget`` seconds each), or ``{"error": why}`` when a forward fails."""
    from ..measure import time_pair
    from ..plumbing import torch_cause

    try:
        first, second = time_pair(frozen, other, threads=threads, budget=2 * budget)
    except Exception as exc:
        return {"error": f"a forward failed while timed ({torch_cause(exc)})"}
    return {
        "frozen": dataclasses.asdict(first.latency),
        "other": dataclasses.asdict(second.latency),
    }
