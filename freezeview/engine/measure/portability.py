"""Does the frozen result run elsewhere? Devices, backend-only nodes, save and load back.

A frozen graph carries its weights as constants on the device they were on when it was
frozen, and ``optimize_for_inference`` may rewrite it into MKLDNN tensors and ops that
exist only on a CPU build with oneDNN (``prim::ConstantMKLDNNTensor`` cannot even be
loaded back once saved). :func:`portability` reads those facts off the final graphs, and
:func:`roundtrip` saves the result with ``torch.jit.save``, loads it with
``torch.jit.load`` in a fresh Python process (nothing of this process's state helps it:
:mod:`.fresh_process`) and compares the outputs on the sample inputs.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import torch

from ..freeze import compare_outputs
from .constants import backend_only_nodes, constant_tensors, devices_and_dtypes
from .fresh_process import run_fresh
from .measure_values import Portability

__all__ = [
    "MKLDNN_UNSAVEABLE",
    "ROUNDTRIP_TIMEOUT",
    "portability",
    "roundtrip",
    "unsaveable_reason",
]

#: Why a graph with MKLDNN constants has no saved form worth writing.
MKLDNN_UNSAVEABLE = (
    "its graph holds MKLDNN constants (prim::ConstantMKLDNNTensor, made by "
    "optimize_for_inference's MKLDNN conversion), which torch.jit.load cannot read back"
)

#: Seconds the fresh process may take to import torch, load the file and run it.
ROUNDTRIP_TIMEOUT = 300.0

# The fresh process: torch only, nothing of freezeview, so a missing import shows.
# The fresh process writes its outputs whole (a rename), then ends at once: torch's
# threads left by torch.jit.fork can abort the interpreter's exit ("terminate called
# without an active exception", status 134) after the work is done, at random.
_CHILD = """
import os, sys, warnings
warnings.simplefilter("ignore")
import torch
model_path, inputs_path, outputs_path = sys.argv[1:4]
module = torch.jit.load(model_path, map_location="cpu")
inputs = torch.load(inputs_path, weights_only=True)
with torch.no_grad():
    out = module(*inputs)
torch.save(out, outputs_path + ".part")
os.replace(outputs_path + ".part", outputs_path)
sys.stdout.flush()
sys.stderr.flush()
os._exit(0)
"""


def unsaveable_reason(graphs: Mapping[str, torch._C.Graph]) -> str:
    """One sentence on why these graphs cannot be saved and loaded back ("" if they can)."""
    for graph in graphs.values():
        if graph.findAllNodes("prim::ConstantMKLDNNTensor", True):  # type: ignore[attr-defined]
            return MKLDNN_UNSAVEABLE
    return ""


def portability(
    module: Any,
    graphs: Mapping[str, torch._C.Graph],
    *,
    roundtrip_result: tuple[str | None, str] = (None, ""),
    backend_step: str | None = None,
) -> Portability:
    """What ties the frozen ``module`` (with these final graphs) to one place.

    Args:
        module: the frozen module.
        graphs: its method graphs after the last step.
        roundtrip_result: what :func:`roundtrip` said (``(None, "")``: not checked).
        backend_step: the step that brought in backend-only nodes.

    Returns:
        A :class:`Portability`.
    """
    tensors = constant_tensors(graphs.values())
    devices, dtypes = devices_and_dtypes(tensors)
    backend = backend_only_nodes(graphs.values())
    reason = unsaveable_reason(graphs)
    outcome, note = roundtrip_result
    if reason:
        outcome, note = "unsaveable", f"not saveable: {reason}."
    return Portability(
        devices=tuple(devices),
        dtypes=tuple(dtypes),
        backend_only_nodes=backend,
        saveable=not reason and outcome != "unsaveable",
        roundtrip=outcome,
        note=note,
        step=backend_step if (backend or reason) else None,
    )


def _first_line(text: str) -> str:
    return (text.strip().splitlines() or ["no message"])[-1][:200]


def roundtrip(
    module: Any,
    inputs: Sequence[Any],
    expected: Any,
    *,
    saved: str | os.PathLike[str] | None = None,
    timeout: float = ROUNDTRIP_TIMEOUT,
    second: Any = None,
) -> tuple[str | None, str]:
    """Save ``module``, load it in a fresh process and compare its outputs with ``expected``.

    Args:
        module: the frozen module (saved with ``torch.jit.save`` unless ``saved`` is given).
        inputs: the sample inputs.
        expected: what an untouched copy of the frozen module returned on its first call
            in this process (the fresh process makes the file's first call too).
        saved: a file the module was already saved to (``freeze -o``): loaded as is.
        timeout: seconds the fresh process may take.
        second: what the same copy returned on its second call, when known: where the
            outputs differ, it tells which side moved (the frozen model changing its
            own outputs from call to call, or the save and load).

    Returns:
        ``("same" | "differs" | "unsaveable", sentence)``; the sentence says why when the
        outputs differ or the file cannot be saved or loaded. ``(None, sentence)`` when
        no fresh process could be started: the file's fate is not known.
    """
    graphs = {m: module._c._get_method(m).graph for m in ("forward",) if module._c._has_method(m)}
    reason = unsaveable_reason(graphs)
    if reason:
        return "unsaveable", f"not saveable: {reason}."
    with tempfile.TemporaryDirectory(prefix="freezeview-roundtrip-") as tmp:
        folder = Path(tmp)
        model_path = Path(saved) if saved is not None else folder / "model.pt"
        if saved is None:
            try:
                torch.jit.save(module, str(model_path))
            except Exception as exc:
                return "unsaveable", f"torch.jit.save failed: {_first_line(str(exc))}."
        torch.save(tuple(inputs), str(folder / "inputs.pt"))
        out_path = folder / "outputs.pt"
        finished = run_fresh(
            _CHILD,
            [str(model_path), str(folder / "inputs.pt"), str(out_path)],
            timeout=timeout,
        )
        # The outputs file appears whole only once the forward ran: what the process
        # did after it (its exit) is no failed round trip.
        if not out_path.exists():
            if not finished.started:
                return None, "round trip not checked: no fresh Python process could be started."
            if not finished.in_time:
                return "differs", (
                    f"the fresh process did not load and run it within {timeout:.0f} s."
                )
            return "unsaveable", (
                "torch.jit.load or the forward failed in a fresh process: "
                f"{_first_line(finished.output)}."
            )
        got = torch.load(str(out_path), weights_only=False)
    numerics = compare_outputs(expected, got)
    if numerics.exact or (numerics.allclose and not numerics.note):
        return "same", ""
    detail = numerics.note or f"max abs difference {numerics.max_abs:.3g}"
    said = f"outputs after a save and a load in a fresh process differ ({detail})"
    return "differs", said + _which_side(expected, second, got)


def _same(a: Any, b: Any) -> bool:
    numerics = compare_outputs(a, b)
    return numerics.exact or (numerics.allclose and not numerics.note)


def _which_side(first: Any, second: Any, got: Any) -> str:
    """Why the fresh process's first call differs from an untouched freeze's first call."""
    if second is None:
        return "."
    if _same(first, second):
        return (
            ": the frozen model gives the same outputs call after call, so the save and "
            "the load changed them."
        )
    if _same(second, got):
        return (
            ": the file's first call gives what an untouched freeze gives on its second "
            "call, so the file holds the state left by a run."
        )
    return (
        ": the frozen model changes its own outputs from call to call (it writes its "
        "own constants or state), so the outputs depend on how often it ran."
    )
