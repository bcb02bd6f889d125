"""TorchScript Enum attributes: torch's statuses with freezeview's own reasons, and names.

The statuses are held against torch by the corpus (``tests/corpus/enums.py``); here: an
enum member is shown by name (``Format.NHWC``) in the inventory, in ``explain``'s output
and in the app's tree, whether its Python class is importable here or not, and freezing
treats it as torch does (an immutable value, folded when read, never an object).
"""

from __future__ import annotations

import io
from pathlib import Path

import oracle
import pytest
from corpus import case_by_name
from corpus.enums import archive
from rich.console import Console

from freezeview.cli.explain import render_explanation
from freezeview.engine import explain
from freezeview.engine.graph import build_inventory
from freezeview.engine.load import LoadedModel
from freezeview.session.local import Session
from freezeview.ui.widgets.model_tree import ModelTree

CASES = ["enum_patch_embed", "enum_foreign_patch_embed"]


@pytest.mark.parametrize("name", CASES)
def test_enum_members_are_shown_by_name(name: str) -> None:
    module = case_by_name(name).build()
    inventory = build_inventory(module)
    fmt, spare = inventory.by_path("output_fmt"), inventory.by_path("spare")
    assert fmt is not None and spare is not None
    assert (fmt.value, fmt.value_kind) == ("Format.NHWC", "enum")
    assert (spare.value, spare.value_kind) == ("Color.GREEN", "enum")
    assert "object" not in fmt.type.lower() and "object" not in spare.type.lower()


@pytest.mark.parametrize("name", CASES)
def test_a_read_enum_is_folded_and_an_unused_one_dropped_as_torch_does(name: str) -> None:
    module = case_by_name(name).build()
    expected = oracle.status_from_torch(module)
    result = explain(module)
    assert not result.disagreements
    for path, code in (("output_fmt", "folded"), ("spare", "unused")):
        verdict = result.by_path(path)
        assert verdict is not None and verdict.status == expected[path]
        assert verdict.codes == (code,)


def test_explain_prints_the_member() -> None:
    result = explain(case_by_name("enum_foreign_patch_embed").build())
    console = Console(file=io.StringIO(), width=160)
    render_explanation(console, result, show_all=True)
    text = console.file.getvalue()  # type: ignore[attr-defined]
    assert "Format.NHWC" in text and "Color.GREEN" in text
    assert "<Object object>" not in text


def test_the_app_tree_shows_the_member(tmp_path: Path) -> None:
    path = tmp_path / "patch_embed.pt"
    path.write_bytes(archive("patch_embed"))
    session = Session(path=path)
    views = {view.path: view for view in session.explain([])}
    assert views["output_fmt"].value == "Format.NHWC"
    assert views["proj.weight"].value == ""  # tensors and numbers are not repeated there
    assert "Format.NHWC" in ModelTree._label(views["output_fmt"]).plain


def test_a_preserved_enum_keeps_only_its_own_slot() -> None:
    """An enum is immutable: preserving one module's member keeps no other module's."""
    case = case_by_name("enum_foreign_preserved_in_shared_class")
    module = case.build()
    expected = oracle.status_from_torch(module, case.preserved_attrs)
    result = explain(LoadedModel.from_module(module), case.preserved_attrs)
    assert {v.path: v.status for v in result.attributes} == expected
    assert expected["a.color"] == "kept" and expected["c.color"] == "inlined"
    # freezeview's own replay says why, without `undetermined` (an enum member used to
    # count as an object shared by value, its class's slot kept for every instance).
    assert not result.disagreements
    assert result.by_path("c.color").codes == ("folded",)  # type: ignore[union-attr]
