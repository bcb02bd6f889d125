"""Tests for freezeview/ui/widgets/inspector.py: how the inspector names a source position."""

from __future__ import annotations

from freezeview.ui.widgets.inspector import shown_source


def test_library_code_is_named_by_its_package_path() -> None:
    where = "/home/me/env/lib/python3.11/site-packages/torch/nn/functional.py:2817"
    assert shown_source(where) == "torch/nn/functional.py:2817"


def test_the_models_own_file_is_shown_as_recorded() -> None:
    assert shown_source("/build/models/net.py:41") == "/build/models/net.py:41"
    assert shown_source("net.py:3") == "net.py:3"
