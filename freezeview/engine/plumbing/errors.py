"""The errors freezeview reports to its users.

Every failure the engine expects is a :class:`FreezeviewError` whose message is one
sentence that names the file or thing involved and says what to do. The CLI prints that
sentence and exits with :attr:`FreezeviewError.exit_code`; the app shows it and goes on.
"""

from __future__ import annotations

__all__ = [
    "BadInputError",
    "FreezeviewError",
    "OutputError",
    "PlanError",
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
