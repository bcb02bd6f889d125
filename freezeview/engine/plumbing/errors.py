"""The errors freezeview reports to its users.

Every failure the engine expects is a :class:`FreezeviewError` whose message is one
sentence that names the file or thing involved and says what to do. The CLI prints that
sentence and exits with :attr:`FreezeviewError.exit_code`; the app shows it and goes on.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from typing import Any

__all__ = [
    "BadInputError",
    "FreezeviewError",
    "OutputError",
    "PlanError",
    "inputs_rejected",
    "torch_cause",
]


class FreezeviewError(Exception):
    """Base class: a failure with a one-sentence message for the user.

    Args:
        message: the sentence (newlines and runs of spaces are folded to one line).
        hint: an optional second line the CLI prints after the sentence.
    """

    #: Process exit code the CLI uses (DESIGN.md: 1 bad plan, 2 bad usage or input).
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        # One line, always: the CLI prints the message as its whole answer and the app
        # shows it in a one-line status bar. Text quoted from torch can carry newlines
        # (and a TorchScript traceback); the full text stays in ``detail`` for --debug.
        self.detail = message
        flat = " ".join(message.split())
        super().__init__(flat)
        self.message = flat
        self.hint = hint

    def __str__(self) -> str:
        return self.message


class BadInputError(FreezeviewError):
    """The model file (or another input) cannot be read as asked."""

    exit_code = 2


class PlanError(FreezeviewError):
    """The model cannot be frozen or explained with the requested plan."""

    exit_code = 1


class OutputError(FreezeviewError):
    """An output cannot be written (missing directory, read-only, exists without --force)."""

    exit_code = 2


# First lines torch puts before the cause: the TorchScript interpreter's header, whose
# cause is the last line of the message (after the TorchScript traceback).
_GENERIC_FIRST = (
    "The following operation failed in the TorchScript interpreter",
    "Traceback of TorchScript",
)
# Lines that are never the cause: a traceback's frames, source lines' markers.
_NOT_A_CAUSE = re.compile(r"^(\s*File \"|Traceback |\s*[~^]+\s*(<--- HERE)?$)")
# A message about a tensor's dtype (what random float32 sample inputs run into).
_DTYPE_WORDS = re.compile(
    r"scalar type|dtype|Input type|Long|Int\b|Float\b|Double\b|Half\b|Bool\b"
    r"|integer|floating point",
)


def torch_cause(exc: BaseException, limit: int = 400) -> str:
    """torch's own line that says why ``exc`` was raised, as torch wrote it.

    A TorchScript interpreter error starts with a generic line ("The following operation
    failed in the TorchScript interpreter.") and a TorchScript traceback, and ends with
    the exception torch raised inside (``RuntimeError: Expected tensor for argument #1
    'indices' to have one of the following scalar types: Long, Int; ...``): that last
    meaningful line is the cause. Any other message's first line is.

    Args:
        exc: the exception torch raised.
        limit: characters at most (the rest is cut, ``...`` marks it).

    Returns:
        One line; the exception's type name when it has no message.
    """
    lines = [line.rstrip() for line in str(exc).strip().splitlines() if line.strip()]
    if not lines:
        return type(exc).__name__
    line = lines[0].strip()
    if line.startswith(_GENERIC_FIRST) and len(lines) > 1:
        meaningful = [item for item in lines[1:] if not _NOT_A_CAUSE.match(item)]
        if meaningful:
            line = meaningful[-1].strip()
    return line if len(line) <= limit else line[: limit - 3] + "..."


def _dtype_hint(cause: str, inputs: Sequence[Any] | None) -> str:
    """``; the sample inputs are float32: give a dtype, e.g. --input-shape 1,64:int64``."""
    if not _DTYPE_WORDS.search(cause):
        return ""
    shape = "1,64"
    if inputs:
        sizes = getattr(inputs[0], "shape", None)
        if sizes is not None and len(sizes):
            shape = ",".join(str(int(n)) for n in sizes)
    return (
        f"; if the model wants integer (or other non-float32) inputs, give each "
        f"--input-shape its dtype, e.g. --input-shape {shape}:int64"
    )


def inputs_rejected(
    exc: BaseException, inputs: Sequence[Any] | None = None, *, what: str = "forward"
) -> BadInputError:
    """The one sentence for sample inputs the model's forward rejects, with torch's cause.

    explain, freeze, check, export and the app all word it so: what failed, torch's own
    line that says why (:func:`torch_cause`), and, when that line is about dtypes, how
    to give ``--input-shape`` a dtype.

    Args:
        exc: what the forward raised.
        inputs: the sample inputs (their first shape makes the hint's example).
        what: the function that failed (``forward``).
    """
    cause = torch_cause(exc)
    return BadInputError(
        f"the sample inputs do not fit the model: its {what} failed on them "
        f"(torch: {cause}){_dtype_hint(cause, inputs)}."
    )
