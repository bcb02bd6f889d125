"""The fold step's notes on kept attributes read explain's verdicts once, not per path."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from freezeview.engine.freeze.freeze_phase import _kept_reasons


@dataclass
class _Reason:
    message: str


@dataclass
class _Verdict:
    path: str
    reasons: list[_Reason]


class _CountingList(list):  # type: ignore[type-arg]
    """Counts the verdicts handed out, however they are read."""

    reads = 0

    def __iter__(self) -> Any:
        for item in super().__iter__():
            _CountingList.reads += 1
            yield item


class _Verdicts:
    def __init__(self, paths: list[str]) -> None:
        self.attributes = _CountingList(_Verdict(p, [_Reason(f"why {p}")]) for p in paths)

    def by_path(self, path: str) -> _Verdict | None:
        return next((v for v in self.attributes if v.path == path), None)


class _Host:
    def __init__(self, verdicts: _Verdicts) -> None:
        self.verdicts = verdicts

    def explanation(self, preserved: Any) -> _Verdicts:
        return self.verdicts


def test_kept_notes_read_the_verdicts_linearly_often() -> None:
    paths = [f"blocks.{i}.scale" for i in range(2_000)]
    _CountingList.reads = 0
    notes = _kept_reasons(_Host(_Verdicts(paths)), (), paths)  # type: ignore[arg-type]
    assert notes[0] == "kept blocks.0.scale: why blocks.0.scale"
    assert notes[19] == "kept blocks.19.scale: why blocks.19.scale"
    assert notes[-1] == "... and 1980 more kept" and len(notes) == 21
    assert _CountingList.reads <= 2 * len(paths)  # one pass (a scan per path: 2M reads)
