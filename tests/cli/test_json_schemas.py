"""docs/schemas/: every JSON document freezeview writes validates against its schema.

The commands run for real (``freezeview.cli.main`` in this process) on the bundled
example model and on two versions of a small model; their output is validated with
``jsonschema`` against the draft 2020-12 schemas that docs/json.md documents. Each command
runs once per module, and a few hand-made mistakes must fail, so the schemas stay strict.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import torch
from docs_support import DOCS
from models.small import example_module
from models.versions import save_version

from freezeview.cli import main
from freezeview.engine import REASON_CODES

SCHEMAS = DOCS / "schemas"
NAMES = ("explain", "freeze-step", "freeze-result", "export", "passes", "check", "compare")


def _schema(name: str) -> dict[str, Any]:
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def _validator(name: str) -> jsonschema.Draft202012Validator:
    schema = _schema(name)
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema)


def _run(argv: list[str], expected: int = 0) -> str:
    """``freezeview ARGV`` in this process; its standard output."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(argv)
    assert code == expected, argv
    return out.getvalue()


@pytest.fixture(scope="module")
def documents(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[Any]]:
    """Every document kind, as the real commands print it (one or more of each)."""
    folder = tmp_path_factory.mktemp("json")
    model = folder / "example.pt"
    torch.jit.save(example_module().build(), str(model))
    shape = ["--input-shape", "2,3,16,16"]
    docs: dict[str, list[Any]] = {name: [] for name in NAMES}
    docs["explain"].append(json.loads(_run(["explain", str(model), "--json"])))
    docs["explain"].append(
        json.loads(_run(["explain", str(model), "--preserve", "temperature", "--json"]))
    )
    # An already-frozen model: explain lists what freezing left in it.
    frozen = folder / "frozen-example.pt"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        torch.jit.save(torch.jit.freeze(example_module().build()), str(frozen))
    docs["explain"].append(json.loads(_run(["explain", str(frozen), "--json"])))
    timing = ["--time-budget", "0.01"]
    # freeze and compare untimed here (their timed documents, with a fresh-process round
    # trip each model, are test_timed_output_validates's: 5 s more).
    untimed = ["--time-budget", "0"]
    _add_freeze_documents(docs, model, folder / "frozen.pt", [*shape, *untimed])
    # explain with sample inputs: the final latency figure.
    docs["explain"].append(json.loads(_run(["explain", str(model), "--json", *shape, *timing])))
    # --one-process: the forked helper is export's business (test_forked.py); a fork of the
    # test process, with whatever threads pytest runs, is not needed to see the document.
    export = [
        "export",
        str(model),
        "-o",
        str(folder / "out"),
        "--format",
        "dot",
        "--json",
        "--one-process",
    ]
    docs["export"].append(json.loads(_run(export)))
    docs["passes"].append(json.loads(_run(["passes", "--json"])))
    expect = folder / "example.freeze.toml"
    _run(["check", str(model), "--write-expect", str(expect), "--preserve", "temperature"])
    docs["check"].append(
        json.loads(_run(["check", str(model), "--expect", str(expect), "--format", "json"]))
    )
    # A broken rule: its violation carries a reason with a source line.
    strict = folder / "strict.freeze.toml"
    strict.write_text(
        '[plan]\npreserve = ["temperature"]\n\n[attributes]\nkept = ["temperature"]\n'
    )
    broken = ["check", str(model), "--expect", str(strict), "--format", "json"]
    docs["check"].append(json.loads(_run(broken, expected=1)))
    old = save_version("base", folder / "base.pt")
    new = save_version("in-place", folder / "in-place.pt")
    docs["compare"].append(_compare_document(old, new, untimed))
    return docs


def _add_freeze_documents(
    docs: dict[str, list[Any]], model: Path, out: Path, options: list[str]
) -> None:
    for line in _run(["freeze", str(model), "-o", str(out), "--json", *options]).splitlines():
        doc = json.loads(line)
        docs["freeze-step" if doc["type"] == "step" else "freeze-result"].append(doc)


def _compare_document(old: Path, new: Path, options: list[str]) -> Any:
    return json.loads(
        _run(["compare", str(old), str(new), "--json", "--input-shape", "1,3,8,8", *options])
    )


@pytest.mark.slow
def test_timed_output_validates(tmp_path: Path) -> None:
    """freeze and compare with sample inputs timed: latency figures and the fresh-process
    round trip in their documents, valid and there."""
    model = tmp_path / "example.pt"
    torch.jit.save(example_module().build(), str(model))
    docs: dict[str, list[Any]] = {name: [] for name in NAMES}
    timing = ["--input-shape", "2,3,16,16", "--time-budget", "0.01"]
    _add_freeze_documents(docs, model, tmp_path / "frozen.pt", timing)
    old = save_version("base", tmp_path / "base.pt")
    new = save_version("in-place", tmp_path / "in-place.pt")
    docs["compare"].append(_compare_document(old, new, ["--time-budget", "0.01"]))
    for name in ("freeze-step", "freeze-result", "compare"):
        validator = _validator(name)
        for doc in docs[name]:
            errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
            assert not errors, errors
    assert any(s["latency_ms"] for s in docs["freeze-step"])
    assert docs["compare"][0]["latency_ms"] is not None
    result = docs["freeze-result"][0]
    assert result["latency_ms"]["frozen"] and result["portability"]["roundtrip"] == "same"


@pytest.mark.parametrize("name", NAMES)
def test_real_output_validates(name: str, documents: dict[str, list[Any]]) -> None:
    validator = _validator(name)
    assert documents[name], f"no {name} document was produced"
    for doc in documents[name]:
        errors = [f"{list(e.absolute_path)}: {e.message}" for e in validator.iter_errors(doc)]
        assert not errors, errors


def test_the_examples_reach_the_interesting_branches(documents: dict[str, list[Any]]) -> None:
    # Without these the schemas' inner objects would be validated against nothing.
    assert any(a["status"] == "kept" for a in documents["explain"][1]["attributes"])
    assert documents["explain"][2]["already_frozen"]["constants"]
    assert any(s["numerics"] for s in documents["freeze-step"])
    assert any("latency_ms" in doc for doc in documents["explain"])
    # (Timed freeze and compare documents: test_timed_output_validates.)
    assert any(v["reason"] for r in documents["check"][1]["rules"] for v in r["violations"])
    assert documents["compare"][0]["status_changes"]


def test_reason_codes_in_every_schema_are_the_engine_s(documents: dict[str, list[Any]]) -> None:
    for name in ("explain", "check", "compare"):
        enum = _schema(name)["$defs"]["reason"]["properties"]["code"]["enum"]
        assert set(enum) == set(REASON_CODES), name


def _mistakes() -> list[tuple[str, Callable[[Any], None]]]:
    def drop(key: str) -> Callable[[Any], None]:
        return lambda doc: doc.pop(key)

    def first_attribute(change: Callable[[dict[str, Any]], None]) -> Callable[[Any], None]:
        return lambda doc: change(doc["attributes"][0])

    return [
        ("explain", drop("attributes")),
        ("explain", drop("torch_version")),
        ("explain", lambda doc: doc.update(extra=1)),
        ("explain", first_attribute(lambda a: a.update(status="frozen"))),
        ("explain", first_attribute(lambda a: a.update(kind="tensor"))),
        ("explain", first_attribute(lambda a: a.update(reasons=[]))),
        ("explain", first_attribute(lambda a: a["reasons"][0].update(code="because"))),
        ("explain", first_attribute(lambda a: a["reasons"][0].pop("message"))),
        ("freeze-step", lambda doc: doc.update(type="result")),
        ("freeze-step", drop("changed")),
        ("freeze-result", lambda doc: doc["plan"].pop("passes")),
        ("export", drop("total_seconds")),
        ("export", lambda doc: doc["pictures"][0].update(level="deep")),
        ("passes", lambda doc: doc[0].update(group="sometimes")),
        ("check", lambda doc: doc["rules"][0].update(kind="speed")),
        ("check", drop("ok")),
        ("compare", lambda doc: doc["status_changes"][0].update(new="frozen")),
        ("compare", drop("regressions")),
    ]


@pytest.mark.parametrize(
    ("name", "mistake"), _mistakes(), ids=[f"{n}-{i}" for i, (n, _) in enumerate(_mistakes())]
)
def test_a_mistake_fails_validation(
    name: str, mistake: Callable[[Any], None], documents: dict[str, list[Any]]
) -> None:
    doc = copy.deepcopy(documents[name][-1])
    mistake(doc)
    assert not _validator(name).is_valid(doc)
