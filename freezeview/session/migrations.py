"""The app's ``m``: will the model survive ``torch.export``?

:class:`Migrations` runs :func:`~freezeview.engine.migrate.migrate` on a session's model
file with its sample inputs and options, once: torch's converter takes from under a
second to tens of seconds, so the result is kept, and with it the program the converter
made (saved in a folder of its own), which is written where the user asks without
converting again, and only when it behaves the same (or when forced). Runs where torch
runs (the engine process, or the Python API's process).
"""

from __future__ import annotations

import atexit
import shutil
import tempfile
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engine.plumbing import BadInputError
from .summaries import MigrationSummary, migration_summary

__all__ = ["NO_INPUTS", "Migrations"]

#: What ``m`` says when the app was started without sample inputs.
NO_INPUTS = (
    "migrate needs sample inputs for torch's converter: start freezeview with --inputs "
    "FILE.pt or --input-shape (e.g. --input-shape 1,3,224,224)."
)


@dataclass(frozen=True)
class _Found:
    """The last migration, and where it saved its program (missing when nothing
    converted)."""

    migration: Any
    program: Path


class Migrations:
    """One session's migrations: the last one found, and its program kept for writing.

    Args:
        threads, budget: how the program's forward is timed against the frozen
            TorchScript (the session's ``--threads`` and ``--time-budget``).
        eval_mode, imports, libraries: how the model file is loaded (as the session).
    """

    def __init__(
        self,
        *,
        threads: int,
        budget: float,
        eval_mode: bool = False,
        imports: Sequence[str] = (),
        libraries: Sequence[str] = (),
    ) -> None:
        self.threads = threads
        self.budget = budget
        self.eval_mode = eval_mode
        self.imports = tuple(imports)
        self.libraries = tuple(libraries)
        self._found: _Found | None = None
        self._folder: Path | None = None
        # One migration at a time: a second asker waits and is given the first's result.
        self._lock = threading.Lock()

    def migrate(
        self,
        model: Path | None,
        inputs: Sequence[Any] | None,
        output: Path | None = None,
        force: bool = False,
        again: bool = False,
    ) -> MigrationSummary:
        """The migration of ``model`` on ``inputs`` (run now the first time, or with
        ``again``); with ``output``, its program written there when it behaves the same
        or with ``force``.

        Raises:
            BadInputError: no model file, no sample inputs, or inputs the model rejects.
            OutputError: ``output`` cannot be written.
        """
        from ..engine.migrate import write_program

        with self._lock:
            if self._found is None or again:
                self._found = self._run(model, inputs)
            found = self._found
            migration = found.migration
            if output is not None:
                migration = write_program(migration, found.program, output, force=force)
            return migration_summary(migration)

    def _run(self, model: Path | None, inputs: Sequence[Any] | None) -> _Found:
        import dataclasses

        from ..engine.migrate import migrate

        if model is None:
            raise BadInputError(
                "migrate needs the model's file: this model was given to freezeview "
                "already loaded (save it with torch.jit.save and open the file)."
            )
        if not inputs:
            raise BadInputError(NO_INPUTS)
        folder = self._fresh_folder()
        kept = folder / "program.pt2"
        # Saved whatever the verdict (forced into the session's own folder): written
        # where the user asks only if it behaves the same, or when they force it.
        migration = migrate(
            model,
            tuple(inputs),
            threads=self.threads,
            budget=self.budget,
            eval_mode=self.eval_mode,
            imports=self.imports,
            libraries=self.libraries,
            output=kept,
            force=True,
        )
        return _Found(dataclasses.replace(migration, written="", not_written=""), kept)

    def _fresh_folder(self) -> Path:
        """An empty folder for the next program; the last one's goes."""
        self.forget()
        self._folder = Path(tempfile.mkdtemp(prefix="freezeview-migrate-"))
        # Gone when the process ends normally (the Python API); an engine process that
        # is ended leaves it in the temporary directory.
        atexit.register(shutil.rmtree, self._folder, True)
        return self._folder

    def forget(self) -> None:
        """Let go of the last migration and remove its program."""
        folder, self._folder, self._found = self._folder, None, None
        if folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
