"""``migrate``: a TorchScript file and sample inputs in, a :class:`Migration` out.

This process loads the model (to check the file and the inputs, and to ask
:func:`~freezeview.engine.reasons.explain` for every state write of its forward with the
writing node and source line), then hands the conversion and the runs to a child
process (:mod:`.convert_child`) with a time limit: torch's converter is a private API,
and an assert, an abort or a loop in it ends the child, never freezeview. The
program's graph signature says which writes it carries; the ``.pt2`` the child saved
is put in place, whole, only when the program behaves the same (or when forced).
"""

from __future__ import annotations

import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from ..measure import DEFAULT_BUDGET, DEFAULT_THREADS, Latency
from ..plumbing import BadInputError, atomic_path, inputs_rejected
from .migrate_values import (
    BEHAVES_THE_SAME,
    Conversion,
    FailedNode,
    Migration,
    Speed,
    SpeedPair,
    StateWrite,
)

__all__ = ["DEFAULT_CALLS", "DEFAULT_TIMEOUT", "NO_CONVERTER", "migrate"]

#: Successive calls both sides are run for (models that count calls or keep a history).
DEFAULT_CALLS = 3
#: Seconds the child process may take to convert and run (scripted ResNet-50 converts
#: well within it).
DEFAULT_TIMEOUT = 300.0
#: What is said on a torch without the converter.
NO_CONVERTER = (
    "this torch has no TorchScript-to-ExportedProgram converter "
    "(torch._export.converter.TS2EPConverter, present from torch 2.4 to 2.14)."
)
# The writes explain finds: a prim::SetAttr, or an in-place op on the attribute's value.
_WRITE_CODES = ("set-attr", "in-place-write")


def child_command(request: str, result: str) -> list[str]:
    """The command line of the child process (tests replace it to simulate a crash)."""
    return [sys.executable, "-m", "freezeview.engine.migrate.convert_child", request, result]


def _state_writes(model: Any) -> list[StateWrite]:
    """Every attribute the forward writes, with the first writing node explain names."""
    from ..reasons import explain

    explanation = explain(model, release=True)
    writes: list[StateWrite] = []
    for verdict in explanation.attributes:
        for reason in verdict.reasons:
            if reason.code in _WRITE_CODES and reason.method in (None, "forward"):
                writes.append(
                    StateWrite(
                        path=verdict.path,
                        how=reason.code,
                        node=reason.node or "",
                        source=reason.source or "",
                        source_text=reason.source_text or "",
                    )
                )
                break
    return writes


def _check_inputs(module: Any, inputs: tuple[Any, ...]) -> None:
    """Raise BadInputError when the forward rejects the inputs (run on a private copy)."""
    import torch

    from ..freeze import Sandbox, SandboxError

    try:
        box = Sandbox(module)
    except SandboxError:
        return  # the child finds out
    call = box.function(module._c._get_method("forward").graph)
    try:
        with torch.no_grad():
            call(*inputs)
    except Exception as exc:
        raise inputs_rejected(exc, inputs) from None


def _signal_name(code: int) -> str:
    try:
        return signal.Signals(-code).name
    except ValueError:
        return f"signal {-code}"


def _last_line(text: str) -> str:
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    return lines[-1][:300] if lines else ""


def _child(request: dict[str, Any], folder: Path, timeout: float) -> dict[str, Any]:
    """Run the child on ``request``; its result, or what happened to it."""
    request_path = folder / "request.pkl"
    result_path = folder / "result.pkl"
    with open(request_path, "wb") as f:
        pickle.dump(request, f)
    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    started = time.perf_counter()
    try:
        done = subprocess.run(
            child_command(str(request_path), str(result_path)),
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
            env=env,
        )
    except subprocess.TimeoutExpired:
        return {
            "available": True,
            "converted": False,
            "stage": "the child process",
            "cause": f"the conversion did not finish within the time limit ({timeout:g} s)",
            "seconds": time.perf_counter() - started,
        }
    if result_path.exists():
        with open(result_path, "rb") as f:
            result: dict[str, Any] = pickle.load(f)
        return result
    if done.returncode < 0:
        cause = f"the converter's process was ended by {_signal_name(done.returncode)}"
    else:
        cause = f"the converter's process failed (exit code {done.returncode})"
    last = _last_line(done.stderr)
    return {
        "available": True,
        "converted": False,
        "stage": "the child process",
        "cause": cause + (f": {last}" if last else ""),
        "seconds": time.perf_counter() - started,
    }


def _conversion(result: dict[str, Any]) -> Conversion:
    failed = result.get("failed_node")
    if not result.get("available", True):
        return Conversion(converted=False, available=False, cause=NO_CONVERTER)
    return Conversion(
        converted=bool(result.get("converted")),
        seconds=float(result.get("seconds", 0.0)),
        stage=str(result.get("stage", "")),
        cause=str(result.get("cause", "")),
        failed_node=FailedNode(**failed) if failed else None,
        hint=str(result.get("hint", "")),
        unhandled_kinds=tuple(result.get("unhandled_kinds", ())),
    )


def _speed(result: dict[str, Any], threads: int, budget: float) -> Speed | None:
    """What the child found about "is it as fast?" (None when nothing converted)."""
    found = result.get("speed")
    if not result.get("converted") or found is None:
        return None
    pair = None
    if "frozen" in found and "other" in found:
        pair = SpeedPair("ExportedProgram", Latency(**found["frozen"]), Latency(**found["other"]))
    return Speed(threads=threads, budget=budget, program=pair, note=str(found.get("note", "")))


def _second_text(label: str, second: tuple[bool | None, str] | None) -> str:
    """``2,3,16,16: the program rejects it (...)``; empty when no second shape ran."""
    if second is None:
        return ""
    label = label or "the second inputs"
    return f"{label}: {second[1]}" if second[1] else label


def migrate(
    model: str | os.PathLike[str],
    inputs: Sequence[Any],
    *,
    second_inputs: Sequence[Any] | None = None,
    second_shape: str = "",
    calls: int = DEFAULT_CALLS,
    timeout: float = DEFAULT_TIMEOUT,
    threads: int = DEFAULT_THREADS,
    budget: float = DEFAULT_BUDGET,
    output: str | os.PathLike[str] | None = None,
    force: bool = False,
    map_location: str = "cpu",
    eval_mode: bool = False,
    imports: Sequence[str] = (),
    libraries: Sequence[str] = (),
) -> Migration:
    """Can this TorchScript model move to an ExportedProgram, and does it behave the same?

    Args:
        model: the TorchScript file (never modified).
        inputs: sample inputs for ``forward`` (the converter needs them).
        second_inputs: inputs of another shape both sides are run on, when given.
        second_shape: how to name the second inputs in the findings (``2,3,16,16``).
        calls: successive calls compared (outputs and state after each).
        timeout: seconds the child process may take.
        threads: torch's intra-op threads while timing (stated in the findings).
        budget: seconds of timing per forward after warm-up; 0 times nothing. The
            program's forward and the frozen TorchScript's (``torch.jit.freeze``) are
            timed in alternating blocks, in the child process, on the sample inputs.
        output: where to write the ``.pt2`` (``torch.export.save``); written only when
            the program behaves the same, or with ``force``.
        force: write the ``.pt2`` even with differences (they are listed).
        map_location, eval_mode, imports, libraries: as for ``load_model``.

    Returns:
        A :class:`Migration`; its ``verdict`` and ``exit_code`` say the answer.

    Raises:
        BadInputError: an unreadable model, no inputs, or inputs its forward rejects.
        OutputError: ``output`` cannot be written.
    """
    import torch

    from ..load import load_model

    started = time.perf_counter()
    if not inputs:
        raise BadInputError(
            "migrate needs sample inputs for the converter: give --inputs FILE.pt or "
            "--input-shape (e.g. --input-shape 1,3,224,224)."
        )
    if calls < 1:
        raise BadInputError(f"--calls {calls} is not a number of calls (1 or more).")
    if threads < 1:
        raise BadInputError(f"--threads {threads} is not a number of threads (1 or more).")
    if not budget >= 0 or budget == float("inf"):
        raise BadInputError(f"--time-budget {budget} is not a number of seconds (0 or more).")
    loaded = load_model(
        model,
        map_location=map_location,
        eval_mode=eval_mode,
        imports=imports,
        libraries=libraries,
    )
    _check_inputs(loaded.module, tuple(inputs))
    writes = _state_writes(loaded)
    with tempfile.TemporaryDirectory(prefix="freezeview-migrate-") as tmp:
        folder = Path(tmp)
        torch.save(tuple(inputs), str(folder / "inputs.pt"))
        request: dict[str, Any] = {
            "model": str(model),
            "map_location": map_location,
            "eval_mode": eval_mode,
            "imports": list(imports),
            "libraries": list(libraries),
            "inputs": str(folder / "inputs.pt"),
            "calls": calls,
            "threads": threads,
            "budget": budget,
            "paths": [w.path for w in writes],
            "pt2": str(folder / "model.pt2") if output is not None else None,
        }
        if second_inputs is not None:
            torch.save(tuple(second_inputs), str(folder / "second.pt"))
            request["second_inputs"] = str(folder / "second.pt")
        result = _child(request, folder, timeout)
        conversion = _conversion(result)
        mutated = set(result.get("mutated", ()))
        differs = set(result.get("state_differs", ()))
        ran = bool(result.get("outputs_same"))
        writes = [
            StateWrite(
                **{
                    **w.__dict__,
                    "carried": ran and w.path not in differs,
                    "declared": w.path in mutated,
                }
            )
            for w in writes
        ]
        second = result.get("second")
        notes: list[str] = []
        if result.get("error"):
            notes.append(f"the child process failed before converting: {result['error']}")
        migration = Migration(
            model=str(model),
            torch_version=torch.__version__,
            conversion=conversion,
            calls=len(result.get("outputs_same", ())),
            outputs_same=tuple(result.get("outputs_same", ())),
            output_notes=tuple(result.get("output_notes", ())),
            state_differs=tuple(result.get("state_differs", ())),
            writes=tuple(writes),
            parameters_as_buffers=tuple(result.get("parameters_as_buffers", ())),
            specialised=tuple(result.get("specialised", ())),
            dynamic=tuple(result.get("dynamic", ())),
            second_shape=_second_text(second_shape, second),
            second_shape_same=second[0] if second else None,
            notes=tuple(notes),
            speed=_speed(result, threads, budget),
        )
        written = ""
        not_written = ""
        if output is not None:
            saved = folder / "model.pt2"
            if not conversion.converted or not saved.exists():
                not_written = "nothing to write: the model does not convert."
            elif migration.verdict != BEHAVES_THE_SAME and not force:
                not_written = (
                    "not written: the program does not behave the same (--force writes it "
                    "with the differences listed)."
                )
            else:
                with atomic_path(output) as target:
                    shutil.copyfile(saved, target)
                written = str(output)
    return Migration(
        **{
            **migration.__dict__,
            "written": written,
            "not_written": not_written,
            "seconds": time.perf_counter() - started,
        }
    )
