"""``freezeview check``: expectations written from one version catch the next one's regressions.

Each "next version" in ``tests/models/versions.py`` carries one regression; the base
version's written expectations must fail on it with the right line, in every output
format. Statuses are torch's own (the check runs torch's freeze in the same run).
"""

from __future__ import annotations

import json
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
import torch
from models.versions import save_version, source_line

import freezeview
from freezeview.cli import main
from freezeview.engine.ci.ci_report import map_source

GITHUB = re.compile(
    r"^::error file=(?P<file>[^,]+),line=(?P<line>\d+),title=(?P<title>[^:]*)::(?P<message>.+)$"
)


@pytest.fixture(scope="module")
def models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("versions")
    names = ["base", "in-place", "set-attr", "view", "broken-conv-bn", "interface"]
    return {name: save_version(name, folder / f"{name}.pt") for name in names}


@pytest.fixture(scope="module")
def base_expect(models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("expect") / "base.toml"
    assert main(["check", str(models["base"]), "--write-expect", str(out)]) == 0
    return out


def _check(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["check", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_written_expectations_hold_for_the_same_model(
    models: dict[str, Path], base_expect: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = base_expect.read_text()
    assert "[attributes]" in text and '"conv.weight"' in text and "fold_conv_bn = 1" in text
    code, out, _ = _check(capsys, str(models["base"]), "--expect", str(base_expect))
    assert code == 0, out
    assert "rules hold" in out


@pytest.mark.parametrize(
    ("version", "path", "expected", "snippet"),
    [
        ("in-place", "cache", "expected not kept", "self.cache.add_(pooled.mean(0))"),
        ("set-attr", "calls", "expected not kept", "self.calls = self.calls + 1"),
        ("view", "window", "expected not kept", "self.window.mul_(0.5)"),
        ("broken-conv-bn", None, "pass fold_conv_bn: expected to fire at least 1x", None),
    ],
)
def test_a_regression_fails_with_the_right_line(
    models: dict[str, Path],
    base_expect: Path,
    capsys: pytest.CaptureFixture[str],
    version: str,
    path: str | None,
    expected: str,
    snippet: str | None,
) -> None:
    code, out, _ = _check(capsys, str(models[version]), "--expect", str(base_expect))
    assert code == 1, out
    failing = [line.strip() for line in out.splitlines() if line.startswith("     ")]
    wanted = [
        line
        for line in failing
        if expected in line and (path is None or line.startswith(f"{path}:"))
    ]
    assert wanted, out
    if snippet is not None:
        assert any(snippet in line for line in wanted), out  # the source line's own text

    code, out, _ = _check(
        capsys, str(models[version]), "--expect", str(base_expect), "--format", "json"
    )
    doc = json.loads(out)
    assert code == 1 and doc["ok"] is False
    messages = [v["message"] for r in doc["rules"] for v in r["violations"]]
    assert any(expected in m for m in messages)

    code, out, _ = _check(
        capsys, str(models[version]), "--expect", str(base_expect), "--format", "github"
    )
    errors = [GITHUB.match(line) for line in out.splitlines() if line.startswith("::")]
    assert code == 1 and errors and all(errors), out
    if snippet is not None:
        hit = next(m for m in errors if m and snippet in m["message"])
        assert Path(hit["file"]).resolve() == Path(freezeview_tests_versions()).resolve()
        assert int(hit["line"]) == source_line(snippet)
    else:
        # No source line to point at: the expectations file's line that states the rule.
        assert any(Path(m["file"]).resolve() == base_expect.resolve() for m in errors if m)

    code, out, _ = _check(
        capsys, str(models[version]), "--expect", str(base_expect), "--format", "junit"
    )
    _validate_junit(out, failures_at_least=1)


def freezeview_tests_versions() -> str:
    from models import versions

    return versions.__file__


def _validate_junit(text: str, failures_at_least: int) -> None:
    """The elements and attributes the JUnit schema requires, and consistent counts."""
    root = ET.fromstring(text.split("?>", 1)[1])
    assert root.tag == "testsuites"
    suites = root.findall("testsuite")
    assert len(suites) == 1
    suite = suites[0]
    for attribute in ("name", "tests", "failures", "errors"):
        assert suite.get(attribute) is not None, attribute
    cases = suite.findall("testcase")
    assert int(suite.get("tests", "-1")) == len(cases) > 0
    failed = [c for c in cases if c.find("failure") is not None]
    assert int(suite.get("failures", "-1")) == len(failed) >= failures_at_least
    for case in cases:
        assert case.get("name") and case.get("classname")
    for case in failed:
        failure = case.find("failure")
        assert failure is not None and failure.get("message")


def test_junit_of_a_passing_check_validates(
    models: dict[str, Path], base_expect: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "junit.xml"
    code, out, _ = _check(
        capsys,
        str(models["base"]),
        "--expect",
        str(base_expect),
        "--format",
        "junit",
        "-o",
        str(report),
    )
    assert code == 0 and out == ""
    root = ET.fromstring(report.read_text().split("?>", 1)[1])
    assert root.find("testsuite").get("failures") == "0"  # type: ignore[union-attr]


def test_an_interface_swapped_at_run_time_is_refused_in_one_sentence(
    models: dict[str, Path], base_expect: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _check(capsys, str(models["interface"]), "--expect", str(base_expect))
    assert code == 1
    assert "post" in err and "interface" in err and len(err.strip().splitlines()) == 1


def test_a_newly_preserved_attribute_breaks_its_inlined_rule(
    models: dict[str, Path], base_expect: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    edited = tmp_path / "preserved.toml"
    edited.write_text(base_expect.read_text().replace("preserve = []", 'preserve = ["scale"]'))
    code, out, _ = _check(capsys, str(models["base"]), "--expect", str(edited))
    assert code == 1
    assert any(
        line.strip().startswith("scale: expected inlined, torch keeps it: preserved")
        for line in out.splitlines()
    ), out


def test_kept_bytes_limit(
    models: dict[str, Path], base_expect: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    text = base_expect.read_text()
    edited = tmp_path / "bytes.toml"
    # Allow the view's extra kept buffers, but not their bytes.
    edited.write_text(text.replace("kept = []", 'kept = ["*"]'))
    code, out, _ = _check(capsys, str(models["view"]), "--expect", str(edited))
    assert code == 1
    assert "expected at most 0 bytes of tensors kept as attributes, torch keeps 16" in out


def test_write_expect_refuses_to_overwrite(
    models: dict[str, Path], base_expect: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    before = base_expect.read_text()
    code, _, err = _check(capsys, str(models["base"]), "--write-expect", str(base_expect))
    assert code == 2 and "--force" in err
    assert base_expect.read_text() == before


def test_plan_flags_with_expect_are_refused(
    models: dict[str, Path], base_expect: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _check(
        capsys, str(models["base"]), "--expect", str(base_expect), "--preserve", "x"
    )
    assert code == 2 and "--preserve cannot be combined with --expect" in err


@pytest.mark.slow
def test_numerics_are_written_and_checked(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "numerics.toml"
    code, _, _ = _check(
        capsys, str(models["base"]), "--write-expect", str(out), "--input-shape", "2,3,8,8"
    )
    assert code == 0
    text = out.read_text()
    assert '[numerics]\ninput_shapes = [\n    "2,3,8,8",\n]' in text and "max_abs = " in text
    code, printed, _ = _check(capsys, str(models["base"]), "--expect", str(out))
    assert code == 0, printed


@pytest.mark.parametrize(
    ("content", "words"),
    [
        ("[plan\npreserve = []\n", "line 1: not valid TOML"),
        (
            "[attributes]\ninlined = ['conv.weight']\nfrozen = ['x']\n",
            "line 3: unknown key 'frozen' in [attributes]",
        ),
        ("[extras]\nx = 1\n", "line 1: unknown section [extras]"),
        (
            "[attributes]\ninlined = [\n  'conv.weight',\n  'nothing.here*',\n]\n",
            "line 4: pattern 'nothing.here*' in attributes.inlined matches no attribute",
        ),
        (
            "[attributes]\ninlined = 'conv.weight'\n",
            "line 2: attributes.inlined must be a list of strings",
        ),
        (
            "[limits]\nmax_kept_tensor_bytes = -1\n",
            "line 2: limits.max_kept_tensor_bytes must be a whole number",
        ),
        ("[passes]\nfold_everything = 1\n", "line 2: unknown pass 'fold_everything'"),
        ("[plan]\neval = 'yes'\n", "line 2: plan.eval must be true or false"),
        ("[numerics]\nmax_abs = 1e-4\n", "needs input_shapes or inputs"),
    ],
)
def test_a_bad_expectations_file_is_one_sentence_and_exit_2(
    models: dict[str, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    content: str,
    words: str,
) -> None:
    bad = tmp_path / "bad.toml"
    bad.write_text(content)
    report = tmp_path / "report.xml"
    code, _, err = _check(
        capsys, str(models["base"]), "--expect", str(bad), "--format", "junit", "-o", str(report)
    )
    assert code == 2
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], err
    assert str(bad) in lines[0]
    assert not report.exists(), "nothing is written when the check cannot run"


def test_missing_expectations_file(
    models: dict[str, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _check(capsys, str(models["base"]), "--expect", str(tmp_path / "none.toml"))
    assert code == 2 and "no such expectations file" in err


def test_map_source_strips_a_prefix_and_finds_the_longest_suffix(tmp_path: Path) -> None:
    checkout = tmp_path / "repo"
    (checkout / "models" / "vision").mkdir(parents=True)
    target = checkout / "models" / "vision" / "net.py"
    target.write_text("x = 1\n")
    (checkout / "net.py").write_text("other\n")
    recorded = "/home/ci/build/models/vision/net.py"
    assert map_source(recorded, checkout) == target  # longest suffix wins over net.py
    assert map_source(recorded, checkout, "/home/ci/build") == target
    assert map_source("/elsewhere/none.py", checkout) is None


def test_python_api(models: dict[str, Path], base_expect: Path) -> None:
    report = freezeview.check(str(models["in-place"]), base_expect)
    assert not report.ok
    assert any(v.path == "cache" and v.actual == "kept" for v in report.violations)
    # The statuses are torch's own.
    frozen = torch.jit.freeze(torch.jit.load(str(models["in-place"])))
    assert frozen._c.hasattr("cache")
