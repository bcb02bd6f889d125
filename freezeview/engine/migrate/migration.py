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

import dataclasses
import os
import pickle
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..measure import DEFAULT_BUDGET, DEFAULT_THREADS, Latency

if TYPE_CHECKING:
    from ..measure import Finished
from ..plumbing import BadInputError, atomic_path, inputs_rejected
from .migrate_values import (
    BEHAVES_THE_SAME,
    Aoti,
    Conversion,
    FailedNode,
    Migration,
    Speed,
    SpeedPair,
    StateWrite,
)

__all__ = [
    "DEFAULT_CALLS",
    "DEFAULT_TIMEOUT",
    "NO_AOTI",
    "NO_CONVERTER",
    "aoti_unavailable",
    "compiler_names",
    "migrate",
    "write_program",
]

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
#: What ``--aoti`` says on a torch without AOTInductor's packaging API.
NO_AOTI = "AOTInductor not compiled: this torch has no torch._inductor.aoti_compile_and_package."
# The writes explain finds: a prim::SetAttr, or an in-place op on the attribute's value.
_WRITE_CODES = ("set-attr", "in-place-write")


def child_command(request: str, result: str) -> list[str]:
    """The command line of the child process (tests replace it to simulate a crash)."""
    return [sys.executable, "-m", "freezeview.engine.migrate.convert_child", request, result]


# The converter's own command line, unreplaced (tests replace child_command to make a
# child crash or hang: theirs runs as that command line).
_CONVERTER_COMMAND = child_command
# What a forked fresh process runs for the converter: the child module as ``python -m``
# would, its exit code passed on (the fresh process's code must end in os._exit).
_RUN_MODULE = """
import os, runpy, sys
module, sys.argv = sys.argv[1], [sys.argv[1], *sys.argv[2:]]
code = 0
try:
    runpy.run_module(module, run_name="__main__", alter_sys=True)
except SystemExit as end:
    code = end.code if isinstance(end.code, int) else (0 if end.code is None else 1)
sys.stdout.flush()
sys.stderr.flush()
os._exit(code)
"""


def aoti_command(request: str, result: str) -> list[str]:
    """The command line of ``--aoti``'s child process."""
    return [sys.executable, "-m", "freezeview.engine.migrate.aoti_child", request, result]


def compiler_names() -> tuple[str, ...]:
    """The C++ compilers torch's inductor looks for: ``torch._inductor.config.cpp.cxx``
    once inductor is imported; before that, its default (``$CXX``, else ``g++``;
    ``clang++`` on macOS), so that asking costs no second of inductor imports."""
    config = sys.modules.get("torch._inductor.config")
    cxx = getattr(getattr(config, "cpp", None), "cxx", None)
    if cxx is None:
        cxx = (os.environ.get("CXX", "clang++" if sys.platform == "darwin" else "g++"),)
    elif isinstance(cxx, str):
        cxx = (cxx,)
    return tuple(name for name in cxx if name)


def aoti_unavailable() -> str:
    """Why ``--aoti`` cannot compile here (no C++ compiler on the PATH), or ``""``."""
    names = compiler_names()
    if any(shutil.which(name) for name in names):
        return ""
    looked = " or ".join(names) or "g++"
    return (
        f"AOTInductor not compiled: no C++ compiler found (torch's inductor looks for "
        f"{looked}; install one or set CXX)."
    )


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


def _child(
    request: dict[str, Any],
    folder: Path,
    timeout: float,
    command: Callable[[str, str], list[str]] | None = None,
    name: str = "conversion",
) -> dict[str, Any]:
    """Run a child (the converter's, or ``command``) on ``request``; its result, or what
    happened to it (``name`` is what the time-limit sentence calls its work)."""
    request_path = folder / f"{name}-request.pkl"
    result_path = folder / f"{name}-result.pkl"
    with open(request_path, "wb") as f:
        # The child ends by itself once this process has gone (child_tools.py).
        pickle.dump({**request, "parent": os.getpid()}, f)
    started = time.perf_counter()
    ended: Finished | None = None
    if command is None and child_command is _CONVERTER_COMMAND:
        # The converter in a fork of the fresh-process server (a process that imported
        # torch and nothing else): as fresh as a new interpreter, without importing
        # torch again for each conversion of a session (the app's m, export --migrate).
        from ..measure import run_fresh

        module = "freezeview.engine.migrate.convert_child"
        ended = run_fresh(
            _RUN_MODULE, [module, str(request_path), str(result_path)], timeout=timeout
        )
        if not ended.started:
            ended = None  # no fresh process could start: a new interpreter, below
    if ended is None:
        argv = (command or child_command)(str(request_path), str(result_path))
        ended = _run_command(argv, timeout)
    if not ended.in_time:
        return {
            "available": True,
            "converted": False,
            "stage": "the child process",
            "cause": f"the {name} did not finish within the time limit ({timeout:g} s)",
            "seconds": time.perf_counter() - started,
        }
    if result_path.exists():
        with open(result_path, "rb") as f:
            result: dict[str, Any] = pickle.load(f)
        return result
    returncode = ended.returncode if ended.returncode is not None else 1
    if returncode < 0:
        cause = f"the {name}'s process was ended by {_signal_name(returncode)}"
    else:
        cause = f"the {name}'s process failed (exit code {returncode})"
    last = _last_line(ended.output)
    return {
        "available": True,
        "converted": False,
        "stage": "the child process",
        "cause": cause + (f": {last}" if last else ""),
        "seconds": time.perf_counter() - started,
    }


def _run_command(argv: list[str], timeout: float) -> Finished:
    """``argv`` as a new process, within ``timeout`` seconds (its error output kept)."""
    from ..measure import Finished

    env = dict(os.environ)
    env.setdefault("PYTHONWARNINGS", "ignore")
    try:
        done = subprocess.run(
            argv, capture_output=True, text=True, timeout=timeout, check=False, env=env
        )
    except subprocess.TimeoutExpired:
        return Finished(False, "")
    return Finished(True, done.stderr, returncode=done.returncode)


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


def _aoti(
    result: dict[str, Any], request: dict[str, Any], folder: Path, timeout: float
) -> tuple[Aoti, SpeedPair | None]:
    """``--aoti``: the saved program compiled in its own child process, or why not."""
    if not result.get("converted") or not request.get("pt2") or not Path(request["pt2"]).exists():
        return Aoti(note="AOTInductor not compiled: the model does not convert."), None
    package = str(folder / "model-aoti.pt2")
    found = _child({**request, "package": package}, folder, timeout, aoti_command, "compile")
    if not found.get("available", True):
        return Aoti(note=NO_AOTI), None
    seconds = found.get("compile_seconds")
    if not found.get("compiled"):
        cause = found.get("cause") or found.get("error") or "no result"
        return Aoti(compile_seconds=seconds, note=f"AOTInductor did not compile: {cause}"), None
    pair = None
    timed = found.get("speed")
    if timed:
        pair = SpeedPair("AOTInductor", Latency(**timed["frozen"]), Latency(**timed["other"]))
    why = found.get("speed_note") or found.get("error") or ""
    aoti = Aoti(
        compiled=True,
        compile_seconds=seconds,
        outputs_same=found.get("outputs_same"),
        output_note=str(found.get("output_note", "")),
        note=f"AOTInductor's forward not timed: {why}" if why else "",
    )
    return aoti, pair


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
    aoti: bool = False,
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
        aoti: also compile the program with AOTInductor (in a child process of its own,
            with the same time limit), compare its outputs and time its forward; without
            a C++ compiler, or on a torch without it, one sentence says so.
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
    unavailable = aoti_unavailable() if aoti else ""
    compile_it = aoti and not unavailable
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
            "pt2": str(folder / "model.pt2") if output is not None or compile_it else None,
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
        if aoti:
            compiled, pair = (
                _aoti(result, request, folder, timeout)
                if compile_it
                else (Aoti(note=unavailable), None)
            )
            speed = migration.speed
            if speed is not None and pair is not None:
                speed = dataclasses.replace(speed, aoti=pair)
            migration = dataclasses.replace(migration, aoti=compiled, speed=speed)
        if output is not None:
            migration = write_program(migration, folder / "model.pt2", output, force=force)
    return dataclasses.replace(migration, seconds=time.perf_counter() - started)


def write_program(
    migration: Migration,
    saved: str | os.PathLike[str],
    output: str | os.PathLike[str],
    *,
    force: bool = False,
    how_to_force: str = "--force",
) -> Migration:
    """Put the ``.pt2`` a migration saved (``saved``) in place at ``output``, whole, when
    the program behaves the same, or with ``force``; otherwise say why not.

    :func:`migrate` does it with its ``output``; the app keeps the program of its last
    migration and writes it when the user asks (``how_to_force`` names the app's key
    in the sentence that says how to write it anyway).

    Returns:
        ``migration`` with ``written`` (the path) or ``not_written`` (one sentence).

    Raises:
        OutputError: ``output`` cannot be written.
    """
    if not migration.conversion.converted or not Path(saved).exists():
        said = "nothing to write: the model does not convert."
        return dataclasses.replace(migration, written="", not_written=said)
    if migration.verdict != BEHAVES_THE_SAME and not force:
        said = (
            f"not written: the program does not behave the same ({how_to_force} writes it "
            "with the differences listed)."
        )
        return dataclasses.replace(migration, written="", not_written=said)
    with atomic_path(output) as target:
        shutil.copyfile(saved, target)
    return dataclasses.replace(migration, written=str(output), not_written="")
