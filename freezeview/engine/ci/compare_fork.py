"""Both models of a ``compare`` frozen at once: the new one by a forked copy of the process.

``compare`` freezes two models, each with torch's optimization passes (ResNet-50's
conv -> batchnorm fold alone is a third of one ``explain``), and reads both module
trees. Python runs one thread at a time and torch holds the GIL through most of that
work, so threads gain little; a forked child does not share the GIL. It starts with the
parent's memory (the loaded model is already there, copy-on-write), freezes the new
model, sends back its facts with the torch objects left out (:func:`portable`), and
exits. Meanwhile the parent freezes the old model. On two CPUs, compare then takes
about as long as one model's facts.

The child runs torch, which :mod:`.forked`'s pure-Python helpers never do, so it first
sets torch's intra-op threads to one: OpenMP's thread pool does not survive a fork (a
parallel region in the child could wait forever for the parent's worker threads), and
with one thread ATen runs every loop inline. For the same reason the child gives up
(exits, and the parent does the work) if it ever takes far longer than it should.

A fork pays only when a CPU is idle. It costs CPU time of its own (copy-on-write
faults in both processes, the child's exit, pickling the facts: on ResNet-50 about
0.1 s, more than half of one model's facts), and the Linux scheduler shares the CPUs
between sessions before it shares them between a session's processes: on a machine
busy with other work, parent and child share one CPU's worth and compare is slower
than alone. So the child
is forked only when the machine looks idle (:func:`cpu_to_spare`);
``FREEZEVIEW_COMPARE_FORK=0`` never forks, ``=1`` forks whenever it can.

Nothing of the answer depends on the helper: if the child cannot start (not Linux, one
CPU, other Python threads running), fails (torch refuses the model: the parent then
raises torch's own error, as it would alone), dies or sends a torn result, the parent
gathers the new model's facts itself. With sample inputs the numerics are computed in
the parent only: the frozen and original outputs are compared under torch's thread
count, which the child would change. Ctrl-C reaches the parent (the child ignores it),
which stops and reaps the child; the child's only file, torch's freezing log, is an
unnamed temporary file that vanishes with it.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from functools import partial
from pathlib import Path
from typing import Any

import torch

from ..freeze import Plan
from ..load import LoadedModel
from ..plumbing import Forked
from . import model_facts
from .model_facts import FreezeFacts

__all__ = ["CHILD_SECONDS_LIMIT", "FORK_VARIABLE", "cpu_to_spare", "gather_pair", "portable"]

#: A child still working after this many seconds ends itself and the parent does the
#: work: a stuck child must cost a delay, never a hang.
CHILD_SECONDS_LIMIT = 120

#: The environment variable that says whether compare forks: 0 never, 1 whenever it can;
#: unset (or anything else), only when a CPU is idle.
FORK_VARIABLE = "FREEZEVIEW_COMPARE_FORK"


def cpu_to_spare(loadavg: str | None = None) -> bool:
    """True when another process would get a CPU of its own now (Linux: the load).

    ``/proc/loadavg`` gives the tasks runnable at this moment (this process among them)
    and the one-minute load average: both must leave a CPU free beyond this process.
    Elsewhere, False (:mod:`.forked` does not fork there anyway).

    Args:
        loadavg: the text of ``/proc/loadavg`` (read when None).
    """
    try:
        fields = (loadavg if loadavg is not None else Path("/proc/loadavg").read_text()).split()
        cpus = len(os.sched_getaffinity(0))
        runnable = int(fields[3].split("/")[0])
        average = float(fields[0])
    except (OSError, ValueError, IndexError, AttributeError):
        return False
    return runnable - 1 < cpus - 1 and average < cpus - 0.5


def _fork_wanted(inputs: Sequence[Any] | None) -> bool | None:
    """Forked's ``enabled`` for this compare: False, or None (fork if nothing else runs)."""
    setting = os.environ.get(FORK_VARIABLE, "").strip()
    if setting == "0":
        return False
    if inputs is not None:
        return False
    if setting == "1":
        return None
    return None if cpu_to_spare() else False


def portable(facts: FreezeFacts) -> FreezeFacts:
    """``facts`` without the torch objects they hold, to be pickled to the parent.

    The loaded model is the parent's own (put back by :func:`gather_pair`); the frozen
    C++ module of torch's outcome is only read by the stepwise pipeline, never by the
    facts' users.
    """
    outcome = facts.outcome
    if outcome is not None and outcome.frozen is not None:
        outcome = replace(outcome, frozen=None)
    return replace(facts, loaded=None, outcome=outcome)


def _in_child(parent: int) -> bool:
    return os.getpid() != parent


def gather_pair(
    old: LoadedModel,
    new: LoadedModel,
    plan: Plan,
    inputs: Sequence[Any] | None = None,
    *,
    fork: bool | None = None,
    gather: Callable[..., FreezeFacts] | None = None,
    measure: tuple[int, float] | tuple[int, float, bool] | None = None,
) -> tuple[FreezeFacts, FreezeFacts]:
    """Both models' facts (statuses only, no reasons), the new model's by a forked child.

    Args:
        old, new: the two models.
        plan: the plan for both.
        inputs: sample inputs for both models' numerics, or None.
        fork: False gathers both here, one after the other; True forks whenever
            :mod:`.forked` can (tests); None decides: never with sample inputs, as
            ``FREEZEVIEW_COMPARE_FORK`` says, or when a CPU is idle, and never while
            another Python thread runs.
        gather: what gathers one model's facts (default
            :func:`.model_facts.gather_facts`; tests put a failing one here).
        measure: ``(threads, budget)`` to time each model's steps (never forked: two
            timings at once would time each other).

    Returns:
        The old model's facts and the new model's, as :func:`.model_facts.gather_facts`
        with ``reasons=False`` makes them.

    Raises:
        PlanError: torch cannot freeze one of the models as asked.
    """
    parent = os.getpid()
    gather = gather or model_facts.gather_facts
    if measure is not None:
        gather = partial(gather, measure=measure)
        fork = False

    def work() -> Iterator[FreezeFacts]:
        if _in_child(parent):  # pragma: no cover - runs in the forked child only
            torch.set_num_threads(1)
            signal.alarm(CHILD_SECONDS_LIMIT)
            yield portable(gather(new, plan, inputs, reasons=False))
        else:
            yield gather(new, plan, inputs, reasons=False)

    enabled = fork if fork is not None else _fork_wanted(inputs)
    with Forked(work, enabled=enabled) as helper:
        first = gather(old, plan, inputs, reasons=False)
        second = next(helper)
    # Both without torch's frozen module, whichever process made them: nothing reads it,
    # and it holds the optimized graph's folded weights (the model's size) alive.
    return replace(portable(first), loaded=old), replace(portable(second), loaded=new)
