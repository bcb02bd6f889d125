"""Line numbers of an expectations file: one pass over the text, the same lines as before.

``read_expectations`` names the line of every rule and every problem. It used to rescan
the whole text with regular expressions once per key, which on a written ResNet-50 file
(hundreds of patterns) cost more than parsing the TOML; :class:`_FileLines` splits the
text once. The old per-key scans are kept here as the reference.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest

import freezeview.engine.ci.expectations as expectations
from freezeview.engine.ci.expectations import _FileLines, read_expectations
from freezeview.engine.freeze.passes import REGISTRY


def _old_key_line(text: str, section: str, key: str) -> int:
    """The look-up read_expectations used before _FileLines (one scan per key)."""
    current = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?", stripped)
        if header:
            current = header.group(1)
            if current == section and not key:
                return number
        elif current == section and re.match(rf"[\"']?{re.escape(key)}[\"']?\s*=", stripped):
            return number
    return 0


def _old_value_lines(text: str) -> dict[tuple[str, str, str], int]:
    found: dict[tuple[str, str, str], int] = {}
    section = key = ""
    for number, line in enumerate(text.splitlines(), 1):
        stripped = line.strip()
        header = re.fullmatch(r"\[\s*([^\]]+?)\s*\]\s*(#.*)?", stripped)
        if header:
            section, key = header.group(1), ""
            continue
        assignment = re.match(r"[\"']?([\w.-]+)[\"']?\s*=", stripped)
        if assignment:
            key = assignment.group(1)
        for value in re.findall(r'"((?:[^"\\]|\\.)*)"|\'([^\']*)\'', stripped):
            found.setdefault((section, key, value[0] or value[1]), number)
    return found


ODD_FILE = """\
top = 1
[plan]  # the plan
preserve = ["a", 'b.c']
"eval" = false
[ attributes ]
inlined = [
    "x = y",  # a pattern that looks like a key
    "conv*.weight", "layer1.*",
]
kept = []
[limits]
max_kept_tensor_bytes=4
[passes]
fold_conv_bn = 1
'fold_linear_bn' = 0
[numerics]
input_shapes = ["1,3"]
max_abs = 1e-4
[plan]
eval = true
"""


def test_file_lines_find_what_the_per_key_scan_found() -> None:
    where = _FileLines(ODD_FILE)
    sections = ["", "plan", "attributes", "limits", "passes", "numerics", "other"]
    keys = [
        "",
        "top",
        "preserve",
        "eval",
        "inlined",
        "kept",
        "x",
        "max_kept_tensor_bytes",
        "fold_conv_bn",
        "fold_linear_bn",
        "input_shapes",
        "max_abs",
        "plan",
        "missing",
    ]
    for section in sections:
        for key in keys:
            assert where.key_line(section, key) == _old_key_line(ODD_FILE, section, key), (
                section,
                key,
            )
    assert where.values == _old_value_lines(ODD_FILE)


WRITTEN = """\
# freezeview expectations for net.pt
[plan]
preserve = []
eval = false
optimize_for_inference = false
no_optimize = false

[attributes]
inlined = [
    "conv.weight",
    "conv.bias",
    "bn.weight",
    "layer1.0.conv1.weight",
]
kept = [
    "steps",
]

[limits]
max_kept_tensor_bytes = 8

[passes]
fold_conv_bn = 1
remove_dropout = 1
"""


def test_a_file_is_split_into_lines_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Line numbers come from one pass over the text, not one scan per key."""
    expect = tmp_path / "net.toml"
    expect.write_text(WRITTEN)
    calls = [0]
    real = expectations._FileLines

    def counted(text: str) -> Any:
        calls[0] += 1
        return real(text)

    monkeypatch.setattr(expectations, "_FileLines", counted)
    read = read_expectations(expect, set(REGISTRY))
    assert calls == [1]
    lines = {(rule.kind, rule.target): rule.line for rule in read.rules}
    assert lines == {
        ("inlined", "conv.weight"): 10,
        ("inlined", "conv.bias"): 11,
        ("inlined", "bn.weight"): 12,
        ("inlined", "layer1.0.conv1.weight"): 13,
        ("kept", "steps"): 15,
        ("max-kept-bytes", ""): 20,
        ("pass", "fold_conv_bn"): 23,
        ("pass", "remove_dropout"): 24,
    }
    assert read.kept_patterns == (("steps", 16),)
    for (kind, target), line in lines.items():
        if kind == "inlined":
            assert line == _old_value_lines(WRITTEN)[("attributes", "inlined", target)]
        elif kind != "kept":
            key = target or "max_kept_tensor_bytes"
            assert line == _old_key_line(WRITTEN, "limits" if kind != "pass" else "passes", key)
