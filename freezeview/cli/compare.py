"""``freezeview compare OLD.pt NEW.pt``: what freezing does differently to two versions.

Exit codes: 0 done (differences or not); 1 with ``--fail-on-regression`` when something
went from inlined to kept, kept bytes grew or a pass stopped firing (or torch cannot
freeze a model as asked); 2 a bad model or bad options.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from typing import Any

from .options import (
    add_extension_options,
    add_input_options,
    add_measure_options,
    add_pass_options,
    add_plan_options,
    autograd_from_args,
    inputs_from_args,
    measure_from_args,
    plan_from_args,
    split_names,
)

__all__ = ["import_engine", "load_notes", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``compare`` subcommand."""
    parser = sub.add_parser(
        "compare",
        help="compare what freezing does to two versions of a model (for pull requests)",
        description=(
            "Freeze OLD.pt and NEW.pt with the same plan and report what differs: "
            "attributes whose status changed (with the new reasons), attributes added or "
            "removed, bytes of tensors kept as attributes, frozen-graph node kinds, passes "
            "that fire in one and not the other, and numerics given sample inputs."
        ),
    )
    parser.add_argument("old", metavar="OLD.pt", help="the model as it was")
    parser.add_argument("new", metavar="NEW.pt", help="the model as it is now")
    parser.add_argument(
        "--eval", action="store_true", help="switch training-mode modules to eval mode"
    )
    parser.add_argument(
        "--map-location", default="cpu", help="device for the loaded tensors (default: cpu)"
    )
    add_extension_options(parser)
    add_plan_options(parser)
    add_pass_options(parser)
    add_input_options(parser)
    add_measure_options(parser, autograd=True)
    out = parser.add_mutually_exclusive_group()
    out.add_argument("--json", action="store_true", help="the JSON document on stdout")
    out.add_argument(
        "--format",
        choices=("text", "json", "markdown"),
        default="text",
        help="text (default), json, or markdown (a pull-request comment)",
    )
    parser.add_argument(
        "--fail-on-regression",
        action="store_true",
        help="exit 1 when an attribute went from inlined to kept, kept bytes grew or a "
        "pass stopped firing",
    )
    parser.add_argument(
        "--all",
        action="store_true",
        help="also list the `training` flags and hook placeholders every module carries",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.set_defaults(func=run)


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held."""
    from ..engine.ci import compare_models as compare  # noqa: F401


def load_notes(models: Sequence[Any], paths: Sequence[str]) -> list[str]:
    """What loading each model said, each note once.

    A note names its model by file name (``fork_wait.pt is already frozen``); when both
    files share that name (a model and its frozen copy in another folder), each note
    names its side and path instead: ``the old model (models/fork_wait.pt) is already
    frozen``.
    """
    if len({m.name for m in models}) == len(models):
        return list(dict.fromkeys(n for m in models for n in m.notes))
    notes: list[str] = []
    for side, model, path in zip(("old", "new"), models, paths, strict=False):
        label = f"the {side} model ({path})"
        for note in model.notes:
            if note.startswith(f"{model.name} "):
                notes.append(label + note[len(model.name) :])
            else:
                notes.append(f"{label}: {note}")
    return list(dict.fromkeys(notes))


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview compare``; returns the exit code."""
    from ..engine.ci import compare_models as compare
    from ..engine.ci import render_comparison_text as render_text
    from ..engine.ci import render_markdown
    from ..engine.load import load_model

    plan = plan_from_args(args)
    threads, budget = measure_from_args(args)
    inputs = inputs_from_args(args)
    models = [
        load_model(
            path,
            map_location=args.map_location,
            eval_mode=args.eval,
            imports=split_names(args.imports),
            libraries=list(args.libraries or ()),
        )
        for path in (args.old, args.new)
    ]
    for note in load_notes(models, (args.old, args.new)):
        print(f"note: {note}", file=sys.stderr)
    measure = (threads, budget, autograd_from_args(args)) if budget > 0 else None
    result = compare(
        models[0], models[1], plan, inputs=inputs, eval_mode=args.eval, measure=measure
    )
    style = "json" if args.json else args.format
    if style == "json":
        sys.stdout.write(json.dumps(result.to_json(), indent=2) + "\n")
    elif style == "markdown":
        sys.stdout.write(render_markdown(result, show_all=args.all))
    else:
        sys.stdout.write(render_text(result, show_all=args.all))
    return 1 if args.fail_on_regression and result.regressions else 0
