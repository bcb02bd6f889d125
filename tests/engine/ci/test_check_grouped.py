"""``check --write-expect`` writes repeated blocks once (``layer1.0-2.conv1.weight``), and
``check`` reads that form back: the same model holds, one block's change fails and names
the block's own path. Statuses are torch's (check freezes with torch)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
import torch
from torch import nn

from freezeview.cli import main
from freezeview.engine.ci.path_ranges import group_paths, path_matcher


class _Block(nn.Module):
    def __init__(self, c: int) -> None:
        super().__init__()
        self.conv1 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(c)
        self.conv2 = nn.Conv2d(c, c, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(c)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class _Counting(_Block):
    """The changed block: its statistics written in place."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.bn1.running_mean.add_(1.0)
        y = torch.relu(self.bn1(self.conv1(x)))
        return torch.relu(x + self.bn2(self.conv2(y)))


class _ResNetish(nn.Module):
    """A torchvision-like ResNet: a stem, two stages of repeated blocks, a head."""

    def __init__(self, changed: int | None = None) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 8, 3, padding=1)
        self.layer1 = nn.Sequential(*[(_Counting if i == changed else _Block)(8) for i in range(3)])
        self.layer2 = nn.Sequential(*[_Block(8) for _ in range(4)])
        self.fc = nn.Linear(8, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.layer2(self.layer1(self.stem(x)))
        return self.fc(x.mean((2, 3)))


def _save(path: Path, changed: int | None = None) -> Path:
    torch.manual_seed(0)
    torch.jit.save(torch.jit.script(_ResNetish(changed).eval()), str(path))
    return path


def _attributes(module: torch.jit.ScriptModule) -> set[str]:
    found: set[str] = set()
    stack = [("", module._c)]
    while stack:
        prefix, cmod = stack.pop()
        for name, value in torch._C._jit_debug_module_iterators(cmod)["named_attributes"]:
            found.add(f"{prefix}{name}")
            if isinstance(value, torch._C.ScriptModule):
                stack.append((f"{prefix}{name}.", value))
    return found


def _inlined(path: Path) -> set[str]:
    """torch's own answer: the parameters and float buffers the frozen module lost."""
    module = torch.jit.load(str(path))
    kept = _attributes(torch.jit.freeze(module))
    every = {n for n, _ in module.named_parameters()}
    every |= {n for n, b in module.named_buffers() if b.is_floating_point()}
    return every - kept


def test_group_paths_is_exact() -> None:
    paths = [f"layer1.{b}.conv{c}.weight" for b in range(3) for c in (1, 2)]
    paths += ["fc.weight", "b.0.w", "b.2.w", "b.3.w", "x.01.w", "x.1.w"]
    grouped = group_paths(paths)
    assert "layer1.0-2.conv1.weight" in grouped and "b.{0,2-3}.w" in grouped
    for pattern in grouped:  # each pattern stands for exactly the paths it replaced
        assert sum(path_matcher(pattern)(p) for p in paths) >= 1
    for path in paths:
        assert sum(path_matcher(g)(path) for g in grouped) == 1, path
    assert not path_matcher("b.{0,2-3}.w")("b.1.w")


def test_grouped_expectations_round_trip_and_name_the_changed_block(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = _save(tmp_path / "base.pt")
    expect = tmp_path / "base.freeze.toml"
    assert main(["check", str(base), "--write-expect", str(expect)]) == 0
    wrote = capsys.readouterr().out
    assert "1 pass firing" in wrote  # fold_conv_bn, once
    text = expect.read_text()
    doc = tomllib.loads(text)
    inlined = doc["attributes"]["inlined"]
    assert "layer1.0-2.bn1.running_mean" in inlined
    assert "layer2.0-3.conv2.weight" in inlined
    # The patterns stand for exactly torch's inlined parameters and buffers.
    expected = _inlined(base)
    covered = {p for p in expected if any(path_matcher(g)(p) for g in inlined)}
    assert covered == expected
    assert len(inlined) < len(expected) / 2  # 7 blocks written as 2
    # A bound with room, and the file says so.
    assert "# today " in text and "lower it to hold today's figure exactly" in text
    assert main(["check", str(base), "--expect", str(expect)]) == 0
    assert "rules hold" in capsys.readouterr().out

    changed = _save(tmp_path / "changed.pt", changed=1)
    assert "layer1.1.bn1.running_mean" not in _inlined(changed)  # torch keeps it now
    assert main(["check", str(changed), "--expect", str(expect)]) == 1
    out = capsys.readouterr().out
    assert "layer1.1.bn1.running_mean" in out
    assert "layer1.0.bn1.running_mean" not in out and "layer1.2.bn1.running_mean" not in out
    assert "attributes.kept: nothing may be kept" in out
