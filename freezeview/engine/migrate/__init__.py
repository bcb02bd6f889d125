"""Migrate: a TorchScript file and sample inputs in, can it move to ``torch.export`` out.

:func:`migrate` (:mod:`.migration`) asks explain for every state write of the forward,
then runs torch's private converter (``TS2EPConverter``) in a child process with a time
limit (:mod:`.convert_child`): the node kinds it has no handler for, the node it failed
on, and the TorchScript module and the ExportedProgram run side by side over several
calls (outputs, state, the writes the program's graph signature carries, parameters
turned buffers, input dimensions fixed), and the program's forward timed against the
frozen TorchScript (:mod:`.child_tools`, with measure's rules); with ``aoti`` the program
compiled with AOTInductor in a child process of its own (:mod:`.aoti_child`);
:func:`write_program` puts the program in place when it behaves the same (or when forced).
The values (:mod:`.migrate_values`) are torch-free; ``Migration.report_lines`` is what the
command line prints and the app shows. Uses load, reasons, freeze, measure and plumbing.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..plumbing.lazy import lazy_exports

if TYPE_CHECKING:
    from .migrate_values import (
        BEHAVES_THE_SAME,
        DIFFERS,
        DOES_NOT_CONVERT,
        LINE_KINDS,
        VERDICTS,
        Aoti,
        Conversion,
        FailedNode,
        Migration,
        ReportLine,
        Speed,
        SpeedPair,
        StateWrite,
    )
    from .migration import (
        DEFAULT_CALLS,
        DEFAULT_TIMEOUT,
        NO_AOTI,
        NO_CONVERTER,
        migrate,
        write_program,
    )

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "BEHAVES_THE_SAME": "migrate_values",
        "DIFFERS": "migrate_values",
        "DOES_NOT_CONVERT": "migrate_values",
        "LINE_KINDS": "migrate_values",
        "VERDICTS": "migrate_values",
        "Aoti": "migrate_values",
        "Conversion": "migrate_values",
        "FailedNode": "migrate_values",
        "Migration": "migrate_values",
        "ReportLine": "migrate_values",
        "Speed": "migrate_values",
        "SpeedPair": "migrate_values",
        "StateWrite": "migrate_values",
        "DEFAULT_CALLS": "migration",
        "DEFAULT_TIMEOUT": "migration",
        "NO_AOTI": "migration",
        "NO_CONVERTER": "migration",
        "migrate": "migration",
        "write_program": "migration",
    },
)

__all__ = [
    "BEHAVES_THE_SAME",
    "DEFAULT_CALLS",
    "DEFAULT_TIMEOUT",
    "DIFFERS",
    "DOES_NOT_CONVERT",
    "LINE_KINDS",
    "NO_AOTI",
    "NO_CONVERTER",
    "VERDICTS",
    "Aoti",
    "Conversion",
    "FailedNode",
    "Migration",
    "ReportLine",
    "Speed",
    "SpeedPair",
    "StateWrite",
    "migrate",
    "write_program",
]
