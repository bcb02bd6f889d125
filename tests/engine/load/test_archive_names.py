"""The attribute paths read from a TorchScript archive's data.pkl without torch
(engine/load/archive_names.py), against torch's own module on the same file: every path
listed is one torch has (the app accepts a --preserve name on it), and every attribute
freezeview's inventory lists is there, but those inside a module pickled by its own
__getstate__ (left to torch's check)."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch
from corpus import CASES
from models.small import example_module

from freezeview.engine.graph.inventory import build_inventory
from freezeview.engine.load.archive_names import archive_attribute_paths


def _torch_has(module: torch.jit.ScriptModule, path: str) -> bool:
    *parents, leaf = path.split(".")
    for part in parents:
        module = dict(module.named_children())[part]
    return bool(module._c.hasattr(leaf))


def _check(module: torch.jit.ScriptModule, tmp_path: Path) -> None:
    path = tmp_path / "model.pt"
    torch.jit.save(module, str(path))
    listed = archive_attribute_paths(path)
    assert listed is not None
    loaded = torch.jit.load(str(path))
    assert all(_torch_has(loaded, p) for p in listed)
    inventory = {a.path for a in build_inventory(loaded).attributes}
    # A module pickled by its own __getstate__ (a quantized conv's tuple) is listed, its
    # contents not: names under it are left to torch's check (never refused here).
    for missing in inventory - listed:
        owner = missing.rsplit(".", 1)[0] if "." in missing else ""
        while owner and owner not in listed:
            owner = owner.rsplit(".", 1)[0] if "." in owner else ""
        assert owner, missing
        assert not any(p.startswith(owner + ".") for p in listed), missing


def test_the_example_archive_lists_what_torch_has(tmp_path: Path) -> None:
    _check(example_module().build(), tmp_path)
    assert archive_attribute_paths(tmp_path / "nothing.pt") is None


@pytest.mark.slow
@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_every_corpus_archive_lists_what_torch_has(case, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    try:
        module = case.build()
        torch.jit.save(module, str(tmp_path / "probe.pt"))
    except Exception:
        pytest.skip("torch cannot save this case")
    _check(module, tmp_path)
