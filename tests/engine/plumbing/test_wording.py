"""Counts agree with their nouns in what freezeview prints: ``1 pass``, never ``1
passes`` or ``pass(es)`` (freezeview/engine/plumbing/wording.py and its users)."""

from __future__ import annotations

import re

import pytest
from repo_paths import ROOT as CHECKOUT

from freezeview.engine.draw.folding.plan import level_name
from freezeview.engine.plumbing import did_you_mean, plural

ROOT = CHECKOUT / "freezeview"


@pytest.mark.parametrize(
    ("count", "word", "words", "text"),
    [
        (1, "pass", None, "1 pass"),
        (2, "pass", None, "2 passes"),
        (0, "constant", None, "0 constants"),
        (1, "kept attribute read", None, "1 kept attribute read"),
        (1024, "op", None, "1,024 ops"),
        (3, "box", None, "3 boxes"),
        (2, "child", "children", "2 children"),
    ],
)
def test_plural_agrees_with_the_count(count: int, word: str, words: str | None, text: str) -> None:
    assert plural(count, word, words) == text


def test_one_level_is_a_level() -> None:
    assert level_name(1) == "one box per module 1 level deep"
    assert level_name(2) == "one box per module 2 levels deep"


def test_no_printed_sentence_hedges_its_plural_with_s_in_brackets() -> None:
    """No f-string of the CLI or the engine prints ``word(s)`` after a count."""
    hedged = []
    for path in [*ROOT.joinpath("cli").rglob("*.py"), *ROOT.joinpath("engine").rglob("*.py")]:
        for number, line in enumerate(path.read_text().splitlines(), 1):
            code = line.split("#", 1)[0]
            if re.search(r"[\"'][^\"']*(?<![\w.])(?!str\()[a-z]+\(s\)(?! for )[^\"']*[\"']", code):
                hedged.append(f"{path.relative_to(ROOT)}:{number}: {line.strip()}")
    assert not hedged, "\n".join(hedged)


def test_did_you_mean_names_the_close_names_only() -> None:
    """One "did you mean" for plans and expectations files: dashes, spaces and case
    are forgiven, and a name close to nothing gets no hint."""
    known = {"fold_conv_bn", "fold_conv_add_or_sub", "remove_dropout"}
    assert did_you_mean("Fold-Conv-BN", known).startswith(" did you mean 'fold_conv_bn'")
    assert did_you_mean("remove dropout", known) == " did you mean 'remove_dropout'?"
    assert did_you_mean("quantize", known) == ""


def test_an_unknown_pass_is_told_in_one_sentence_wherever_it_was_given(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """``--passes`` and an expectations file's ``[passes]`` and ``plan.passes`` say an
    unknown pass alike: the closest ids, then every valid one."""
    from freezeview.engine.ci.expectations import read_expectations
    from freezeview.engine.freeze import Plan
    from freezeview.engine.freeze.passes import REGISTRY
    from freezeview.engine.plumbing import FreezeviewError

    said = []
    try:
        Plan(passes=["fold_conv_bm"]).validate()
    except FreezeviewError as exc:
        said.append(str(exc))
    for text in ("[passes]\nfold_conv_bm = true\n", '[plan]\npasses = ["fold_conv_bm"]\n'):
        path = tmp_path / "e.toml"
        path.write_text(text)
        try:
            read_expectations(path, known_passes=set(REGISTRY))
        except FreezeviewError as exc:
            said.append(str(exc))
    assert len(said) == 3
    for sentence in said:
        assert "unknown pass 'fold_conv_bm'" in sentence
        assert "did you mean 'fold_conv_bn'" in sentence and "Valid passes are: " in sentence
        assert all(pid in sentence.split("Valid passes are: ")[1] for pid in REGISTRY)
