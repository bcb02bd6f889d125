"""export --migrate: migrate's findings in the review page's header.

Here the command's wiring, with the converter's child replaced by a crashing one (the
section then says the model does not convert, and the export itself is untouched); the
section on a real conversion, held against the conversion torch makes, and in Chromium:
tests/engine/migrate/test_migration.py (slow set, on the bundled example's migration).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jsonschema
import pytest
import torch
from repo_paths import ROOT
from torch import nn

from freezeview.cli import main
from freezeview.engine.migrate import migrate
from freezeview.engine.migrate import migration as migration_module
from freezeview.engine.output.migration_section import add_migration_section

SCHEMA = json.loads((ROOT / "docs" / "schemas" / "migrate.schema.json").read_text())


class _Double(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x * 2


@pytest.fixture
def double(tmp_path: Path) -> Path:
    path = tmp_path / "double.pt"
    torch.jit.save(torch.jit.script(_Double().eval()), str(path))
    return path


def test_migrate_without_inputs_is_bad_usage_and_nothing_is_written(
    double: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    assert main(["export", str(double), "-o", str(out), "--format", "dot", "--migrate"]) == 2
    assert not out.exists()


def test_the_section_says_what_migrate_says_and_is_put_there_once(
    double: Path,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setattr(
        migration_module,
        "child_command",
        lambda request, result: [sys.executable, "-c", "import os; os.abort()"],
    )
    out = tmp_path / "out"
    args = ["--format", "dot", "--input-shape", "4", "--time-budget", "0", "--json"]
    code = main(["export", str(double), "-o", str(out), "--migrate", *args])
    document = json.loads(capsys.readouterr().out)
    assert code == 0
    jsonschema.validate(document["migration"], SCHEMA)
    export_schema = json.loads((ROOT / "docs" / "schemas" / "export.schema.json").read_text())
    jsonschema.validate(document, export_schema)
    assert document["migration"]["verdict"] == "does not convert"
    page = (out / "index.html").read_text()
    assert page.count('id="migration"') == 1
    assert '<span class="verdict fails">does not convert</span>' in page
    assert "the conversion&#x27;s process was ended by SIGABRT" in page
    head, _, rest = page.partition("</header>")
    assert 'id="migration"' in head and 'id="migration"' not in rest
    again = migrate(double, (torch.randn(4),), budget=0)
    add_migration_section(out / "index.html", again)
    assert (out / "index.html").read_text().count('id="migration"') == 1
