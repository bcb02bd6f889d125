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
    """Base class: a failure with a one-sentence message for the user."""

    #: Process exit code the CLI uses (DESIGN.md: 1 bad plan, 2 bad usage or input).
    exit_code: int = 1

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
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
