"""``freezeview freeze``: freeze a model step by step, show every step, write the result.

torch and the engine are imported when the command runs (:func:`import_engine`):
``--help`` and usage errors need neither.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .options import (
    add_input_options,
    add_measure_options,
    add_model_options,
    add_pass_options,
    add_plan_options,
    autograd_from_args,
    inputs_from_args,
    load_from_args,
    measure_from_args,
    plan_from_args,
)

if TYPE_CHECKING:
    from ..engine.freeze import Pipeline, Plan, Step
    from ..engine.measure import Bisection, Measurement, NodeTimer, ValueBisector
    from ..engine.reasons import ConstantWrite

__all__ = ["import_engine", "register", "run"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add the ``freeze`` subcommand."""
    parser = sub.add_parser(
        "freeze",
        help="freeze a model step by step (as torch.jit.freeze) and write the frozen model",
        description=(
            "Run torch.jit.freeze as visible steps - inline, fold attributes, clean-up, then "
            "each optimization pass - print what each step did, and write the frozen model "
            "(the same as torch.jit.freeze gives)."
        ),
    )
    add_model_options(parser)
    add_plan_options(parser)
    parser.add_argument(
        "-o",
        "--output",
        metavar="OUT.pt",
        required=True,
        help="where to write the frozen model (torch.jit.save)",
    )
    parser.add_argument("--force", action="store_true", help="overwrite OUT.pt if it exists")
    add_pass_options(
        parser,
        inference_help="also run torch.jit.optimize_for_inference's passes "
        "(MKLDNN results cannot be saved)",
    )
    add_input_options(parser)
    add_measure_options(parser, autograd=True)
    parser.add_argument(
        "--json",
        action="store_true",
        help="one JSON object per step, then a result object, on stdout",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="with sample inputs: the time of each node and node kind, for the unfrozen "
        "module and every step that changed the graph (Static Runtime where it accepts "
        "the graph, torch.profiler elsewhere), and what each step changed",
    )
    parser.add_argument(
        "--trace",
        metavar="DIR",
        help="write a Chrome/Perfetto trace (torch.profiler) of each profiled forward "
        "into DIR (implies --profile)",
    )
    parser.add_argument(
        "--bisect",
        action="store_true",
        help="with sample inputs: for every step that changed the graph, the first node "
        "whose value differs from the graph before (without it, only the step that takes "
        "the outputs past tolerance is bisected)",
    )
    parser.set_defaults(func=run)


def import_engine() -> None:
    """Import the engine (and torch) :func:`run` uses; the CLI calls it with Ctrl-C held.

    The console script then calls ``gc.freeze()``, which takes those objects out of the
    collector's way for the rest of the run.
    """
    import torch  # noqa: F401

    from ..engine.freeze import Pipeline, release_graphs  # noqa: F401
    from ..engine.measure import MeasuredRun  # noqa: F401
    from ..engine.output import steps_table  # noqa: F401


def run(args: argparse.Namespace) -> int:
    """Run ``freezeview freeze``; returns the exit code."""

    from ..engine.freeze import Pipeline, release_graphs
    from ..engine.load import check_eval
    from ..engine.measure import MeasuredRun
    from ..engine.output import result_json, step_json, step_row, steps_table
    from ..engine.plumbing import OutputError, PlanError, check_output_path, save_module

    model_path = Path(args.model)
    out = check_output_path(args.output, force=args.force)
    if model_path.exists() and out.exists() and out.resolve() == model_path.resolve():
        raise OutputError(f"{out} is the input model; freezeview never overwrites its input.")
    plan = plan_from_args(args)
    threads, budget = measure_from_args(args)
    inputs = inputs_from_args(args)
    profiling = _check_profile_args(args, inputs is not None, budget)
    _check_bisect_args(args, inputs is not None)
    loaded = load_from_args(args)
    check_eval(loaded)
    pipe = Pipeline(loaded, plan, inputs)
    # Each step's row is read before the next step runs, and its graphs go right after.
    pipe.read_in_order = True
    # Each step's constant bytes and (with inputs) its forward's latency, read while its
    # graphs are at hand; without inputs nothing runs. The bytes are counted where they
    # are shown (every JSON line; the table's constants column, which comes with sample
    # inputs), after the step before let go of what this step's counts can do without.
    measured = MeasuredRun(
        pipe,
        threads=threads,
        budget=budget,
        defer_constants=True,
        autograd=autograd_from_args(args),
    )
    shows_constants = args.json or inputs is not None
    timer = _node_timer(args, pipe, threads, budget) if profiling else None
    # With sample inputs, the step that takes the outputs past tolerance (every step that
    # changed the graph with --bisect) is bisected to the first node whose value moved.
    bisector = _bisector(args, pipe) if inputs is not None else None

    def shown() -> Measurement | None:
        # The table's constants and latency columns come with sample inputs (the JSON
        # lines always carry the constant bytes; the lines after the table, the sizes).
        return measured.measurement if inputs is not None else None

    steps: list[Step] = []
    rows: list[list[Any]] = []
    for step in measured.run():
        steps.append(step)
        # What the step's line or row shows is read now, while its graphs are at hand;
        # then the graphs of the step before can go (the table is printed at the end,
        # and a large inlined graph and its folded copy are the run's largest). Those this
        # step's counts can do without go first: the fold step's picture then takes the
        # inline step's graph over instead of copying it.
        if len(steps) > 1:
            release_graphs(steps[-2], step, settled=True)
        if shows_constants:
            measured.count_constants(step)
        # Both read the step's graphs while they are held (and before the step's JSON
        # line is written, so their lines follow it). The bisector first: it copies the
        # graph, while the timer takes the step's snapshot, which lets torch's graph go.
        bisection = bisector.observe(step) if bisector is not None else None
        profiles = timer.observe(step) if timer is not None else []
        if args.json:
            sys.stdout.write(json.dumps(step_json(step, measured.measurement)) + "\n")
            for profile in profiles:
                sys.stdout.write(json.dumps(_profile_json(timer, profile)) + "\n")
            if bisection is not None:
                sys.stdout.write(json.dumps(bisection.to_json()) + "\n")
            sys.stdout.flush()
        else:
            rows.append(step_row(step, show_numerics=inputs is not None, measurement=shown()))
        if len(steps) > 1:
            release_graphs(steps[-2], step)
    # The unfrozen and the final frozen forward timed again, in alternating blocks: the
    # table's final row and unfrozen line, the verdict and the result's JSON quote them.
    measured.time_verdict()
    if not args.json:
        from .console import fit_table, report_console

        console = report_console()
        table = steps_table(steps, show_numerics=inputs is not None, rows=rows, measurement=shown())
        console.print(fit_table(console, table))
        for warning in pipe.warnings:
            console.print(f"[yellow]note:[/] {warning}")
        if bisector is not None:
            _print_bisections(console, bisector.bisections)
        if timer is not None:
            _print_profiles(console, timer)
    failed = next((s for s in steps if s.error), None)
    if failed is not None:
        if args.json:
            sys.stdout.write(
                json.dumps(
                    result_json(
                        steps,
                        plan,
                        model=str(model_path),
                        output=None,
                        warnings=pipe.warnings,
                        measurement=measured.measurement,
                    )
                    | {"written_constants": None}  # no frozen module to ask
                )
                + "\n"
            )
        raise PlanError(
            f"step {failed.index} ({failed.title}) failed, nothing was written: {failed.error}"
        )
    module = pipe.frozen_module
    assert module is not None
    graphs = [module._c._get_method(m).graph for m in ("forward",) if module._c._has_method(m)]
    if any("prim::ConstantMKLDNNTensor" in str(g) for g in graphs):
        # torch.jit.save writes such a module, but torch.jit.load then fails on it. What
        # the plan did to speed and size is still worth showing: often why it is dropped.
        _report(args, measured.finish(input_file=model_path), steps, plan, model_path, pipe)
        raise PlanError(
            "the optimized model holds MKLDNN constants, which torch cannot load back once "
            "saved; drop --optimize-for-inference or the convert_to_mkldnn pass to write it."
        )
    # Whole or not at all, under the output's own name (the bytes a plain torch.jit.save
    # to OUT.pt writes); torch's own write failures become one sentence naming OUT.pt.
    save_module(module, out)
    measurement = measured.finish(input_file=model_path, output_file=out)
    if not args.json:
        changed = sum(1 for s in steps if s.changed)
        console.print(f"wrote [bold]{out}[/] ({len(steps)} steps, {changed} changed the graph)")
    _report(args, measurement, steps, plan, model_path, pipe, output=out)
    return 0


def _report(
    args: argparse.Namespace,
    measurement: Measurement,
    steps: list[Step],
    plan: Plan,
    model_path: Path,
    pipe: Pipeline,
    output: Path | None = None,
) -> None:
    """The result: a JSON line, or the measurement's lines (latency verdict last)."""
    from ..engine.output import measurement_lines, result_json

    writes = _written_constants(pipe)
    if args.json:
        result = result_json(
            steps,
            plan,
            model=str(model_path),
            output=str(output) if output is not None else None,
            warnings=pipe.warnings,
            measurement=measurement,
        )
        result["written_constants"] = [w.to_json() for w in writes]
        sys.stdout.write(json.dumps(result) + "\n")
        return
    from rich.markup import escape

    from .console import report_console
    from .written import print_written_warning

    console = report_console()
    lines = measurement_lines(measurement)
    # The verdict (second line when timed) is what the user asked: it goes last, bold.
    verdict = lines.pop(1) if measurement.unfrozen is not None else None
    for line in lines:
        console.print(escape(line))
    # Next to "run twice" (the last of the lines): what makes outputs change per call.
    print_written_warning(console, writes)
    if verdict is not None:
        console.print(f"[bold]{escape(verdict)}[/]")


def _written_constants(pipe: Pipeline) -> list[ConstantWrite]:
    """The folded attributes the frozen module's graphs write (``written-constant``).

    A walk of the frozen graphs says whether any constant is written at all; only then
    is explain asked which attributes they are (on a large model it costs about as much
    as freezing).
    """
    from ..engine.reasons import frozen_writes_a_constant

    module = pipe.frozen_module
    if module is None or not frozen_writes_a_constant(module):
        return []
    explanation = pipe.explanation()
    return explanation.written_constants() if explanation is not None else []


def _check_profile_args(args: argparse.Namespace, has_inputs: bool, budget: float) -> bool:
    """Whether ``--profile`` / ``--trace`` ask for per-node times; refused without
    inputs or time to spend (nothing runs then)."""
    from ..engine.plumbing import BadInputError

    trace = getattr(args, "trace", None)
    if not (getattr(args, "profile", False) or trace):
        return False
    flag = "--trace" if trace and not args.profile else "--profile"
    if not has_inputs:
        raise BadInputError(
            f"{flag} needs sample inputs to run the forwards it times: add --inputs FILE.pt "
            "or --input-shape 1,3,224,224."
        )
    if budget <= 0:
        raise BadInputError(f"{flag} times forwards: give a --time-budget above 0.")
    if trace and Path(trace).exists() and not Path(trace).is_dir():
        raise BadInputError(f"--trace {trace}: a file of that name exists; give a directory.")
    return True


def _check_bisect_args(args: argparse.Namespace, has_inputs: bool) -> None:
    """``--bisect`` runs the graphs on sample inputs: refused without them."""
    from ..engine.plumbing import BadInputError

    if getattr(args, "bisect", False) and not has_inputs:
        raise BadInputError(
            "--bisect needs sample inputs to run each step's graph and the graph before it: "
            "add --inputs FILE.pt or --input-shape 1,3,224,224."
        )


def _bisector(args: argparse.Namespace, pipe: Pipeline) -> ValueBisector:
    from ..engine.measure import ValueBisector

    return ValueBisector(pipe, every=bool(getattr(args, "bisect", False)))


def _print_bisections(console: Any, bisections: list[Bisection]) -> None:
    """One short block per bisected step: where its numbers move."""
    from rich.markup import escape

    if not bisections:
        return
    console.print("[bold]where the numbers move[/]")
    for bisection in bisections:
        for line in bisection.lines():
            console.print(escape(line))


def _node_timer(args: argparse.Namespace, pipe: Pipeline, threads: int, budget: float) -> NodeTimer:
    from ..engine.measure import NodeTimer

    return NodeTimer(
        pipe,
        threads=threads,
        budget=budget,
        autograd=autograd_from_args(args),
        trace_dir=getattr(args, "trace", None),
    )


def _profile_json(timer: NodeTimer | None, profile: Any) -> dict[str, Any]:
    """A ``node_time`` line: the profile and what its step changed (docs/json.md)."""
    assert timer is not None
    change = timer.changes.get(profile.step) if profile.step is not None else None
    return profile.to_json() | {"change": change.to_json() if change is not None else None}


def _print_profiles(console: Any, timer: NodeTimer, most: int = 5) -> None:
    """The top kinds and nodes before and after freezing, and what each step changed."""
    from rich.markup import escape

    from ..engine.measure import format_ms

    for _, note in sorted(timer.notes.items()):
        console.print(f"[yellow]note:[/] {escape(note)}")
    if not timer.profiles:
        return
    first, last = timer.profiles[0], timer.profiles[-1]
    shown = [first] if first is last else [first, last]
    console.print("[bold]time per node[/]")
    for profile in shown:
        label = (
            "unfrozen module" if profile.step is None else f"step {profile.step} ({profile.title})"
        )
        console.print(
            f"{escape(label)}: {format_ms(profile.total_ms)} in {len(profile.nodes)} nodes; "
            f"{escape(profile.measured_by())}"
        )
        kinds = ", ".join(
            f"{k.kind} {100 * k.share:.1f}% ({format_ms(k.ms)})" for k in profile.kinds[:most]
        )
        console.print(f"  kinds: {escape(kinds)}")
        for node in profile.top_nodes(most):
            console.print(
                f"  {100 * node.share:5.1f}%  {format_ms(node.ms):>10}  {escape(node.kind)} "
                f"{escape(node.where())}"
            )
    for step, change in sorted(timer.changes.items()):
        console.print(f"step {step} ({escape(change.title)}): {escape(change.summary())}")
