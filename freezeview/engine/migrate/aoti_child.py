"""The child process of ``migrate --aoti``: the ExportedProgram compiled with AOTInductor.

``python -m freezeview.engine.migrate.aoti_child REQUEST RESULT`` reads a request
(pickled dict: the model file and its loading flags, the sample inputs' file, the
``.pt2`` the converter's child saved, where to put the package, threads and budget) and
writes a pickled dict of plain values to RESULT, whole, or nothing when it dies.
AOTInductor generates C++ and runs the C++ compiler, which can take minutes on a large
model or fail inside torch: in a child process with a time limit none of that reaches
freezeview.

In order: ``torch._inductor.aoti_compile_and_package`` on the loaded program (timed),
the package loaded with ``torch._inductor.aoti_load_package``, its outputs on the sample
inputs compared with the TorchScript module's first call (a private copy), and its
forward timed against the frozen TorchScript (:mod:`.child_tools`).
"""

from __future__ import annotations

import sys
import time
from typing import Any

from .child_tools import (
    answer_request,
    cloned,
    frozen_forward,
    same_outputs,
    time_against_frozen,
    torch_line,
)

__all__ = ["main"]


def _run(request: dict[str, Any]) -> dict[str, Any]:
    import torch

    try:
        import torch._inductor as inductor
    except ImportError:
        return {"available": False}
    # Feature-guarded, never by version: the packaging API is newer than the converter.
    if not (
        hasattr(inductor, "aoti_compile_and_package") and hasattr(inductor, "aoti_load_package")
    ):
        return {"available": False}

    from ..freeze import Sandbox
    from ..load import load_model

    result: dict[str, Any] = {"available": True, "compiled": False}
    program = torch.export.load(request["pt2"])
    started = time.perf_counter()
    try:
        path = inductor.aoti_compile_and_package(program, package_path=request["package"])
    except Exception as exc:
        result["compile_seconds"] = time.perf_counter() - started
        result["cause"] = torch_line(exc)
        return result
    result["compile_seconds"] = time.perf_counter() - started
    result["compiled"] = True
    compiled = inductor.aoti_load_package(path)

    loaded = load_model(
        request["model"],
        map_location=request.get("map_location", "cpu"),
        eval_mode=bool(request.get("eval_mode")),
        imports=request.get("imports", ()),
        libraries=request.get("libraries", ()),
    )
    module = loaded.module
    inputs = tuple(torch.load(request["inputs"], weights_only=False))
    script = Sandbox(module).function(module._c._get_method("forward").graph)
    with torch.no_grad():
        ours = script(*cloned(inputs))
        try:
            theirs = compiled(*cloned(inputs))
        except Exception as exc:
            result["outputs_same"] = False
            result["output_note"] = f"the compiled forward failed: {torch_line(exc)}"
            return result
    result["outputs_same"], result["output_note"] = same_outputs(ours, theirs)

    budget = float(request.get("budget", 0.0))
    if budget > 0:
        frozen, why = frozen_forward(module, inputs)
        if frozen is None:
            result["speed_note"] = why
        else:
            timed = time_against_frozen(
                frozen,
                lambda: compiled(*inputs),
                threads=int(request.get("threads", 1)),
                budget=budget,
            )
            if "error" in timed:
                result["speed_note"] = timed["error"]
            else:
                result["speed"] = timed
    return result


def main(argv: list[str]) -> int:
    """Run one request; returns the process's exit code (0 once a result is written)."""
    return answer_request(argv, _run, "compiled")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
