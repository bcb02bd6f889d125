"""Options shared by several subcommands, and helpers to turn them into engine calls."""

from __future__ import annotations

import argparse
import contextlib
import sys
import warnings
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ..engine.freeze import Plan
    from ..engine.load import LoadedModel

__all__ = [
    "add_extension_options",
    "add_input_options",
    "add_measure_options",
    "add_model_options",
    "add_pass_options",
    "add_plan_options",
    "autograd_from_args",
    "inputs_from_args",
    "load_from_args",
    "measure_from_args",
    "plan_from_args",
    "preserved_from_args",
    "quiet_torch_warnings",
    "split_names",
]


def split_names(values: list[str] | None) -> list[str]:
    """Flatten repeatable, comma-separated options: ``["a,b", "c"]`` -> ``["a", "b", "c"]``."""
    names: list[str] = []
    for value in values or []:
        names.extend(part.strip() for part in value.split(",") if part.strip())
    return list(dict.fromkeys(names))


def add_model_options(parser: argparse.ArgumentParser) -> None:
    """MODEL positional plus the loading flags every subcommand takes."""
    parser.add_argument("model", metavar="MODEL.pt", help="a TorchScript file (torch.jit.save)")
    parser.add_argument(
        "--eval",
        action="store_true",
        help="switch a module saved in training mode to eval mode before freezing",
    )
    parser.add_argument(
        "--map-location", default="cpu", help="device for the loaded tensors (default: cpu)"
    )
    add_extension_options(parser)
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")


def add_extension_options(parser: argparse.ArgumentParser) -> None:
    """``--import`` and ``--load-library``: what defines the model's custom operators."""
    parser.add_argument(
        "--import",
        dest="imports",
        action="append",
        metavar="MODULE",
        help="import this Python package first: it registers custom operators the model "
        "calls, e.g. torchvision (repeatable, comma-separated)",
    )
    parser.add_argument(
        "--load-library",
        dest="libraries",
        action="append",
        metavar="PATH",
        help="load this shared library of custom operators first, as "
        "torch.ops.load_library does (repeatable)",
    )


def add_plan_options(parser: argparse.ArgumentParser) -> None:
    """What to preserve (``--preserve``), as for ``torch.jit.freeze(preserved_attrs=...)``."""
    parser.add_argument(
        "--preserve",
        action="append",
        metavar="NAME",
        help=(
            "attribute, submodule or method to keep (repeatable, comma-separated; dotted "
            "names reach into submodules: layer1.0.bn)"
        ),
    )
    parser.add_argument(
        "--method",
        action="append",
        metavar="NAME",
        help="also preserve this method (repeatable, comma-separated); same as --preserve NAME",
    )


def preserved_from_args(args: argparse.Namespace) -> list[str]:
    """The ``preserved_attrs`` list from ``--preserve`` and ``--method``."""
    return split_names(
        (getattr(args, "preserve", None) or []) + (getattr(args, "method", None) or [])
    )


def load_from_args(args: argparse.Namespace) -> LoadedModel:
    """Load ``args.model`` with the loading flags."""
    # Imported here: loading imports torch, which `freezeview MODEL.pt` must not wait for.
    from ..engine.load import load_model

    loaded = load_model(
        args.model,
        map_location=args.map_location,
        eval_mode=args.eval,
        imports=split_names(getattr(args, "imports", None)),
        libraries=list(getattr(args, "libraries", None) or ()),
    )
    for note in loaded.notes:
        print(f"note: {note}", file=sys.stderr)
    return loaded


@contextlib.contextmanager
def quiet_torch_warnings() -> Iterator[None]:
    """Keep torch's deprecation chatter (freeze, jit.save/load) off the user's terminal.

    The engine records the warnings it cares about and reports them as information.
    """
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", category=DeprecationWarning)
        warnings.filterwarnings("ignore", message=".*NumPy.*")
        warnings.filterwarnings("ignore", category=FutureWarning, module="torch")
        yield


def add_pass_options(parser: argparse.ArgumentParser, *, inference_help: str = "") -> None:
    """Which passes run: ``--passes``, ``--no-optimize``, ``--optimize-for-inference``."""
    passes = parser.add_mutually_exclusive_group()
    passes.add_argument(
        "--passes",
        action="append",
        metavar="A,B",
        help="run only these passes, in this order (see `freezeview passes`)",
    )
    passes.add_argument(
        "--no-optimize",
        action="store_true",
        help="as torch.jit.freeze(optimize_numerics=False): no folds that recompute weights",
    )
    parser.add_argument(
        "--optimize-for-inference",
        action="store_true",
        help=inference_help or "also run torch.jit.optimize_for_inference's passes",
    )


def add_input_options(parser: argparse.ArgumentParser) -> None:
    """Sample inputs for the per-step numerics: ``--inputs`` or ``--input-shape``."""
    inputs = parser.add_mutually_exclusive_group()
    inputs.add_argument(
        "--inputs",
        metavar="FILE.pt",
        help="sample inputs (torch.save of a tensor or tuple of tensors)",
    )
    inputs.add_argument(
        "--input-shape",
        action="append",
        metavar="1,3,224,224",
        help="random float32 input of this shape (repeatable, one per forward argument; "
        "append :int64, :float16 etc. for another dtype)",
    )


def add_measure_options(parser: argparse.ArgumentParser, *, autograd: bool = False) -> None:
    """How forwards are timed when sample inputs are given: ``--threads``, ``--time-budget``
    (and ``--autograd`` where the command honours it)."""
    parser.add_argument(
        "--threads",
        metavar="N",
        default="1",
        help="torch threads while timing each step's forward (default 1; stated in the output)",
    )
    parser.add_argument(
        "--time-budget",
        metavar="SECONDS",
        default="0.25",
        help="seconds of timing per step at most, after warm-up (default 0.25; 0 times "
        "nothing, the fresh-process round trip still runs)",
    )
    if autograd:
        parser.add_argument(
            "--autograd",
            action="store_true",
            help="time forwards with autograd on, as a plain call in a training script; "
            "default: under torch.inference_mode(), as deployments run them (no_grad where "
            "a forward fails under inference_mode)",
        )


def measure_from_args(args: argparse.Namespace) -> tuple[int, float]:
    """``(threads, budget)`` from ``--threads`` and ``--time-budget``, checked."""
    from ..engine.plumbing import BadInputError

    text = str(getattr(args, "threads", "1"))
    try:
        threads = int(text)
    except ValueError:
        threads = 0
    if threads < 1:
        raise BadInputError(f"--threads {text!r} is not a whole number of threads (1 or more).")
    text = str(getattr(args, "time_budget", "0.25"))
    try:
        budget = float(text)
    except ValueError:
        budget = -1.0
    if not budget >= 0 or budget == float("inf"):
        raise BadInputError(f"--time-budget {text!r} is not a number of seconds (0 or more).")
    return threads, budget


def autograd_from_args(args: argparse.Namespace) -> bool:
    """True when ``--autograd`` asks to time forwards with autograd on."""
    return bool(getattr(args, "autograd", False))


def plan_from_args(args: argparse.Namespace) -> Plan:
    """The freeze plan from the preserve and pass options."""
    from ..engine.freeze import Plan, default_passes

    preserved = tuple(preserved_from_args(args))
    inference = bool(getattr(args, "optimize_for_inference", False))
    if getattr(args, "passes", None):
        chosen = split_names(args.passes)
        extras = [p for p in default_passes(True, True) if p not in default_passes(True, False)]
        if inference and not any(p in chosen for p in extras):
            chosen += extras
        return Plan(
            preserved_attrs=preserved,
            passes=tuple(chosen),
            optimize_numerics=True,
            optimize_for_inference=inference,
        ).validate()
    return Plan.default(
        preserved,
        optimize_numerics=not getattr(args, "no_optimize", False),
        optimize_for_inference=inference,
    )


def inputs_from_args(args: argparse.Namespace) -> tuple[Any, ...] | None:
    """Sample inputs from ``--inputs`` or ``--input-shape`` (None when neither is given)."""
    from ..engine.freeze import load_inputs, random_inputs

    if getattr(args, "inputs", None):
        return load_inputs(args.inputs)
    if getattr(args, "input_shape", None):
        return random_inputs(args.input_shape)
    return None
