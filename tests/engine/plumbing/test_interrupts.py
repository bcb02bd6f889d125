"""Ctrl-C never lands inside torch's C++ callbacks (freezeview/engine/plumbing/interrupts.py).

A KeyboardInterrupt raised in a Python function libtorch calls from C++ (during ``import
torch``, ``torch.jit.load``, torch's clean-up at exit) aborted the process with
``terminate called after throwing an instance of 'pybind11::error_already_set'`` (found
by test_atomic's SIGINT test at 0.5 s into a run), or printed an "Exception ignored"
traceback.
"""

from __future__ import annotations

import os
import random
import signal
import time
from pathlib import Path

import pytest
from bad_inputs.catalogue import save_tiny
from bad_inputs.run import interrupt_after

from freezeview.engine.plumbing.interrupts import interrupts_deferred


def test_ctrl_c_inside_the_block_is_raised_after_it() -> None:
    reached_end = False
    with pytest.raises(KeyboardInterrupt), interrupts_deferred():
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(0.05)  # the handler has run by now; it must not have raised
        reached_end = True
    assert reached_end
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_no_ctrl_c_no_interrupt_and_the_handler_is_restored() -> None:
    with interrupts_deferred():
        pass
    assert signal.getsignal(signal.SIGINT) is signal.default_int_handler


def test_a_handler_someone_else_installed_is_left_alone() -> None:
    seen: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda signum, frame: seen.append(signum))
    try:
        with interrupts_deferred():
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)
        assert seen == [signal.SIGINT]
    finally:
        signal.signal(signal.SIGINT, previous)


@pytest.mark.slow
@pytest.mark.long_pole
def test_ctrl_c_at_any_moment_of_a_real_command_ends_cleanly(tmp_path: Path) -> None:
    """SIGINT at 12 moments from start-up (import torch) to exit: never an abort, never a
    traceback; exit 130 (interrupted) or 0 (finished first). Each moment is jittered, so
    every run of the suite probes slightly different points of the start-up."""
    model = save_tiny(tmp_path / "model.pt")
    out = tmp_path / "frozen.pt"
    rng = random.Random()
    bad = []
    for step in range(12):
        delay = 0.2 + step * 0.1 + rng.uniform(0.0, 0.1)
        code, err = interrupt_after(["freeze", str(model), "-o", str(out), "--force"], delay)
        if code not in (0, 130) or "Traceback" in err or "terminate" in err:
            bad.append((round(delay, 3), code, err[-300:]))
    assert bad == []
