"""Small promises of the commands: notes whole in a pipe, output directories made,
a near name suggested for a mistyped pass, compare's rows as explain shows them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from repo_paths import ROOT
from torch import nn

import freezeview
from freezeview.cli import main
from freezeview.engine.ci.compare import compare, render_markdown, render_text

EXAMPLE = ROOT / "examples" / "example.pt"


def _kept(module: torch.jit.ScriptModule) -> set[str]:
    names = torch._C._jit_debug_module_iterators(module._c)["named_attributes"]
    return {name for name, _ in names}


@pytest.mark.slow
def test_pass_notes_are_whole_in_a_pipe(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    done = subprocess.run(
        [sys.executable, "-m", "freezeview", "freeze", str(EXAMPLE), "-o", str(tmp_path / "f.pt")],
        capture_output=True,  # standard output is a pipe
        text=True,
        env=env,
        check=False,
        timeout=300,
    )
    assert done.returncode == 0, done.stderr
    result = freezeview.freeze(torch.jit.load(str(EXAMPLE)))
    notes = [s.first_note for s in result.steps if s.first_note]
    assert any(len(n) > 160 for n in notes)  # a note longer than any old cut
    for note in notes:
        assert note in done.stdout, note
    assert not any(line.rstrip().endswith("...") for line in done.stdout.splitlines())


def test_freeze_and_export_make_their_output_directories(tmp_path: Path) -> None:
    out = tmp_path / "out" / "deeper" / "x.pt"
    assert main(["freeze", str(EXAMPLE), "-o", str(out)]) == 0
    written = torch.jit.load(str(out))
    assert _kept(written) == _kept(torch.jit.freeze(torch.jit.load(str(EXAMPLE))))
    pictures = tmp_path / "pictures" / "run1"
    assert main(["export", str(EXAMPLE), "-o", str(pictures)]) in (0, 1)
    assert (pictures / "index.html").is_file()


def test_an_unknown_pass_gets_a_did_you_mean(
    capsys: pytest.CaptureFixture[str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    code = main(["freeze", str(EXAMPLE), "-o", "unused.pt", "--passes", "fold_conv_bm"])
    err = capsys.readouterr().err
    assert code == 1
    assert "did you mean 'fold_conv_bn'" in err
    code = main(["freeze", str(EXAMPLE), "-o", "unused.pt", "--passes", "remove-dropout"])
    assert "did you mean 'remove_dropout'" in capsys.readouterr().err
    # Nothing close: the list, no guess.
    main(["freeze", str(EXAMPLE), "-o", "unused.pt", "--passes", "zzz"])
    assert "did you mean" not in capsys.readouterr().err
    assert not Path("unused.pt").exists()


def test_an_unknown_preserved_name_gets_the_closest_paths(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["explain", str(EXAMPLE), "--preserve", "head.fcc"]) == 1
    err = capsys.readouterr().err
    assert "closest: head.fc" in err


def test_an_unknown_pass_in_an_expectations_file_gets_a_did_you_mean(tmp_path: Path) -> None:
    from freezeview.engine.ci.expectations import ExpectationsError, read_expectations

    path = tmp_path / "m.freeze.toml"
    path.write_text("[passes]\nfold_conv_bm = 1\n")
    with pytest.raises(ExpectationsError, match="did you mean 'fold_conv_bn'"):
        read_expectations(path, {"fold_conv_bn", "remove_dropout"})


class _Old(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(x)


class _New(_Old):
    def __init__(self) -> None:
        super().__init__()
        self.extra = nn.Sequential(nn.ReLU())

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.extra(self.conv(x))


def test_compare_hides_housekeeping_rows_as_explain_does() -> None:
    old = torch.jit.script(_Old().eval())
    new = torch.jit.script(_New().eval())
    result = compare(old, new)
    added = {v.path for v in result.added}
    assert {"extra.training", "extra.0.training"} <= added  # in the comparison (and JSON)
    text = render_text(result)
    assert "added extra.0 " in text
    assert "training" not in text.replace("training flags", "")
    assert "_is_full_backward_hook" not in text
    assert "--all shows them" in text
    shown = render_text(result, show_all=True)
    assert "added extra.training" in shown and "--all shows them" not in shown
    markdown = render_markdown(result)
    assert "_is_full_backward_hook" not in markdown
    assert "Attributes added: 2," in markdown
    assert {"path": "extra.training"}.items() <= next(
        a for a in result.to_json()["added"] if a["path"] == "extra.training"
    ).items()
