"""The child process of ``migrate``: torch's converter, and both sides run on the inputs.

``python -m freezeview.engine.migrate.convert_child REQUEST RESULT`` reads a request
(pickled dict: the model file, loading flags, the sample inputs' file, how many calls,
where to save the program), and writes its findings as a pickled dict of plain values to
RESULT, whole (renamed into place), or nothing when it dies. torch's converter is a
private API that can assert, abort or loop; in a child process none of that reaches
freezeview, which gives the child a time limit and reads only what it wrote.

In order: every node kind of the inlined forward the converter has no handler for
(derived from the converter class itself), the conversion (recording the node being
converted when it fails), the program saved (before anything runs it, so no run's
state reaches the file), then the TorchScript module (a private copy) and the program
run on the same inputs for several successive calls, comparing outputs and state, and
last the program's forward timed against the frozen TorchScript (:mod:`.child_tools`).
"""

from __future__ import annotations

import contextlib
import sys
import time
from collections.abc import Iterator
from typing import Any

from .child_tools import (
    answer_request,
    cloned,
    frozen_forward,
    same_outputs,
    time_against_frozen,
    torch_line,
)

__all__ = ["main", "unhandled_kinds"]


def _walk(block: Any) -> Iterator[Any]:
    """Every node of a graph or block: nested blocks and forked subgraphs included."""
    for node in block.nodes():
        yield node
        for inner in node.blocks():
            yield from _walk(inner)
        if node.hasAttribute("Subgraph"):
            yield from _walk(node.g("Subgraph"))


def unhandled_kinds(graph: Any) -> list[str]:
    """Node kinds of ``graph`` torch's converter cannot convert, asked of the converter.

    The converter dispatches a node to its ``convert_<namespace>_<op>`` method, to its
    table of standard operators, or else converts it as a call of the operator its
    schema names: a kind with none of the three has no handler.
    """
    from torch._export import converter

    cls = converter.TS2FXGraphConverter
    standard = getattr(converter, "kind_to_standard_operators", {})
    found: dict[str, None] = {}
    seen: set[str] = set()
    for node in _walk(graph):
        kind = node.kind()
        if kind in seen:
            continue
        seen.add(kind)
        if hasattr(cls, converter.ir_name_to_func_name(kind)) or kind in standard:
            continue
        try:
            converter.get_op_overload(node)
        except Exception:
            found[kind] = None
    return list(found)


def _scope(name: str) -> str:
    """The module path of a scope name: ``__module.a/__module.a.b`` -> ``a.b``; the root
    (``Model::``) -> empty."""
    last = name.rsplit("/", 1)[-1]
    if last.endswith("::") or not last:
        return ""
    return last.removeprefix("__module.")


def _node_facts(node: Any) -> dict[str, str]:
    from ..graph import parse_source_range

    where = parse_source_range(node.sourceRange())
    return {
        "kind": node.kind(),
        "scope": _scope(node.scopeName()),
        "source": where.short() if where else "",
        "source_text": where.text if where else "",
        "node": str(node).split("\n", 1)[0].strip(),
    }


@contextlib.contextmanager
def _watching_nodes(failed: dict[str, Any]) -> Iterator[None]:
    """Record the innermost node whose conversion raised.

    The converter converts nodes one by one through ``convert_node`` (blocks by nested
    converters calling it again); wrapping that method is the only way to learn the
    node, and it happens in this child process only, which ends after the conversion.
    """
    from torch._export import converter

    cls = converter.TS2FXGraphConverter
    original = cls.convert_node

    def watched(self: Any, node: Any) -> Any:
        try:
            return original(self, node)
        except Exception:
            if not failed:
                failed.update(_node_facts(node))
            raise

    cls.convert_node = watched  # type: ignore[method-assign]
    try:
        yield
    finally:
        cls.convert_node = original  # type: ignore[method-assign]


def _same_value(a: Any, b: Any) -> bool:
    import torch

    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.shape == b.shape and a.dtype == b.dtype and bool(torch.equal(a, b))
    return (
        bool(a == b)
        if not isinstance(a, torch.Tensor) and not isinstance(b, torch.Tensor)
        else False
    )


def _script_attribute(module: Any, path: str) -> Any:
    target = module
    for part in path.split("."):
        target = target.getattr(part)
    return target


_MISSING = object()


def _program_attribute(module: Any, path: str) -> Any:
    for getter in (module.get_buffer, module.get_parameter):
        try:
            return getter(path)
        except AttributeError:
            continue
    return _MISSING


def _dims(ep: Any, names: list[str]) -> tuple[list[str], list[str]]:
    """(specialised, dynamic) user input dimensions, as ``x[0] = 1`` / ``x[2]``."""
    user = list(ep.graph_signature.user_inputs)
    placeholders = {n.name: n for n in ep.graph.nodes if n.op == "placeholder"}
    fixed: list[str] = []
    free: list[str] = []
    for i, name in enumerate(user):
        node = placeholders.get(name)
        value = node.meta.get("val") if node is not None else None
        shape = getattr(value, "shape", None)
        if shape is None:
            continue
        shown = names[i] if i < len(names) else name
        for d, size in enumerate(shape):
            if isinstance(size, int):
                fixed.append(f"{shown}[{d}] = {size}")
            else:
                free.append(f"{shown}[{d}]")
    return fixed, free


def _run(request: dict[str, Any]) -> dict[str, Any]:
    result: dict[str, Any] = {"available": True, "converted": False}
    try:
        from torch._export.converter import TS2EPConverter
    except ImportError:
        result["available"] = False
        return result
    import torch

    from ..freeze import Sandbox
    from ..load import load_model

    loaded = load_model(
        request["model"],
        map_location=request.get("map_location", "cpu"),
        eval_mode=bool(request.get("eval_mode")),
        imports=request.get("imports", ()),
        libraries=request.get("libraries", ()),
    )
    module = loaded.module
    inputs = tuple(torch.load(request["inputs"], weights_only=False))
    graph = module._c._get_method("forward").graph.copy()
    torch._C._jit_pass_inline(graph)
    result["unhandled_kinds"] = unhandled_kinds(graph)
    result["ts_parameters"] = [name for name, _ in module.named_parameters()]
    arg_names = [a.name for a in module._c._get_method("forward").schema.arguments[1:]]

    failed: dict[str, Any] = {}
    started = time.perf_counter()
    stage = "preparing the graph"
    try:
        # The converter freezes a clone of the module and never runs it; the TorchScript
        # side below runs a private copy (Sandbox), so the program's state is untouched.
        converter = TS2EPConverter(module, cloned(inputs))
        stage = "converting"
        with _watching_nodes(failed):
            ep = converter.convert()
    except Exception as exc:
        result["seconds"] = time.perf_counter() - started
        result["stage"] = (
            "converting a node" if failed else ("retracing" if stage == "converting" else stage)
        )
        result["cause"] = torch_line(exc)
        result["failed_node"] = failed or None
        if result["stage"] == "preparing the graph" and len(arg_names) > len(inputs):
            # torch's converter pairs the graph's inputs with the sample arguments
            # one to one; an argument left to its default breaks that pairing.
            result["hint"] = (
                f"forward takes {len(arg_names)} arguments ({', '.join(arg_names)}) and "
                f"{len(inputs)} sample inputs were given: the converter needs a value for "
                "every argument, defaults included"
            )
        return result
    result["seconds"] = time.perf_counter() - started
    result["converted"] = True
    if request.get("pt2"):
        # Saved before either side runs: no call's state reaches the file.
        torch.export.save(ep, request["pt2"])
        result["saved"] = True

    signature = ep.graph_signature
    result["mutated"] = sorted(
        set(signature.buffers_to_mutate.values()) | set(signature.user_inputs_to_mutate.values())
    )
    result["parameters_as_buffers"] = [
        n for n in result["ts_parameters"] if n in set(signature.buffers)
    ]
    result["specialised"], result["dynamic"] = _dims(ep, arg_names)

    written = set(request.get("paths", ()))
    watched = list(request.get("paths", ())) + [n for n, _ in module.named_buffers()]
    watched = list(dict.fromkeys(watched))
    box = Sandbox(module)
    script = box.function(module._c._get_method("forward").graph)
    program = ep.module()
    same: list[bool] = []
    notes: list[str] = []
    differs: dict[str, None] = {}
    for _ in range(int(request.get("calls", 3))):
        with torch.no_grad():
            ours = script(*cloned(inputs))
            try:
                theirs = program(*cloned(inputs))
            except Exception as exc:
                theirs, failure = None, f"the program's forward failed: {torch_line(exc)}"
            else:
                failure = ""
        equal, note = (False, failure) if failure else same_outputs(ours, theirs)
        same.append(equal)
        notes.append(note)
        for path in watched:
            try:
                mine = _script_attribute(box.copy, path)
            except Exception:
                continue
            other = _program_attribute(program, path)
            if other is _MISSING and path not in written:
                continue  # never written, and the program does without it
            if other is _MISSING or not _same_value(mine, other):
                differs[path] = None
    result["outputs_same"] = same
    result["output_notes"] = notes
    result["state_differs"] = list(differs)

    if request.get("second_inputs"):
        second = tuple(torch.load(request["second_inputs"], weights_only=False))
        box.restore()
        program = ep.module()
        try:
            with torch.no_grad():
                ours = script(*cloned(second))
        except Exception as exc:
            result["second"] = (None, f"the TorchScript module rejects it too ({torch_line(exc)})")
        else:
            try:
                with torch.no_grad():
                    theirs = program(*cloned(second))
            except Exception as exc:
                result["second"] = (False, f"the program rejects it ({torch_line(exc)})")
            else:
                equal, note = same_outputs(ours, theirs)
                result["second"] = (equal, "" if equal else f"outputs differ ({note})")
    result["speed"] = _speed(
        module,
        inputs,
        ep,
        request,
        ran=not any(n.startswith("the program's forward failed") for n in notes),
    )
    return result


def _speed(
    module: Any, inputs: tuple[Any, ...], ep: Any, request: dict[str, Any], *, ran: bool
) -> dict[str, Any]:
    """Is it as fast? A fresh ``ep.module()`` against the frozen TorchScript, or why not."""
    budget = float(request.get("budget", 0.0))
    if budget <= 0:
        return {"note": "latency not measured: --time-budget 0 times nothing"}
    if not ran:
        return {"note": "latency not measured: the program's forward fails on the sample inputs"}
    frozen, why = frozen_forward(module, inputs)
    if frozen is None:
        return {"note": f"latency not measured: {why}"}
    program = ep.module()
    timed = time_against_frozen(
        frozen,
        lambda: program(*inputs),
        threads=int(request.get("threads", 1)),
        budget=budget,
    )
    if "error" in timed:
        return {"note": f"latency not measured: {timed['error']}"}
    return timed


def main(argv: list[str]) -> int:
    """Run one request; returns the process's exit code (0 once a result is written)."""
    return answer_request(argv, _run, "converted")


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
