"""Options shared by several subcommands, and helpers to turn them into engine calls."""

from __future__ import annotations

import argparse
import contextlib
import warnings
from collections.abc import Iterator

from ..engine.loading import LoadedModel, load_model

__all__ = [
    "add_model_options",
    "add_plan_options",
    "load_from_args",
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
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")


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
    return load_model(args.model, map_location=args.map_location, eval_mode=args.eval)


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
