"""Build freezeview's bundled example: a small TorchScript model that shows every verdict.

Run ``python examples/build_example.py [OUT.pt]`` (``make demo`` does it). The model has:

* a conv + batch-norm + dropout stem: weights folded, dropout removed, bn folded into conv;
* ``steps``: a buffer counted up in ``forward`` with ``add_`` - kept (in-place write);
* ``history``: a buffer written through a view (``self.history[0]`` then ``copy_``) -
  kept (in-place write through an alias);
* ``last_scale``: a float assigned in ``forward`` - kept (``prim::SetAttr``);
* ``temperature``: a tensor preserved by name in the demo plan - kept (preserved);
* ``legacy_table``: a buffer nothing reads - dropped (unused);
* ``calibrator``: a submodule reached only by the exported method ``calibrate`` - dropped
  unless ``calibrate`` is preserved;
* ``head``: linear + batch-norm1d, folded by the linear-bn pass.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn


class Calibrator(nn.Module):
    """Only used by the exported ``calibrate`` method."""

    def __init__(self) -> None:
        super().__init__()
        self.offset = nn.Parameter(torch.zeros(8))
        self.seen = 0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.seen += 1
        return x - self.offset


class Head(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(8, 4)
        self.bn = nn.BatchNorm1d(4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.bn(self.fc(x))


class ExampleNet(nn.Module):
    """A small model on which every freezing outcome shows up."""

    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3, padding=1)
        self.bn = nn.BatchNorm2d(8)
        self.drop = nn.Dropout(0.1)
        self.head = Head()
        self.calibrator = Calibrator()
        self.register_buffer("steps", torch.zeros(1, dtype=torch.long))
        self.register_buffer("history", torch.zeros(4, 8))
        self.register_buffer("legacy_table", torch.zeros(16))
        self.temperature = nn.Parameter(torch.ones(1))
        self.last_scale = 1.0

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn(self.conv(x)))
        y = self.drop(y)
        pooled = y.mean(dim=(2, 3))
        self.steps.add_(1)
        slot = self.history[0]
        slot.copy_(pooled[0].detach())
        scale = float(pooled.abs().max())
        self.last_scale = scale
        return self.head(pooled) / self.temperature

    @torch.jit.export
    def calibrate(self, x: torch.Tensor) -> torch.Tensor:
        return self.calibrator(x)


def build() -> torch.jit.ScriptModule:
    """The scripted example in eval mode, with deterministic weights."""
    torch.manual_seed(0)
    model = ExampleNet()
    with torch.no_grad():
        model.bn.running_mean.uniform_(-0.1, 0.1)
        model.bn.running_var.uniform_(0.5, 1.5)
        model.head.bn.running_mean.uniform_(-0.1, 0.1)
        model.head.bn.running_var.uniform_(0.5, 1.5)
    return torch.jit.script(model.eval())


def main(argv: list[str]) -> int:
    out = Path(argv[1]) if len(argv) > 1 else Path(__file__).with_name("example.pt")
    scripted = build()
    tmp = out.with_suffix(".pt.tmp")
    torch.jit.save(scripted, str(tmp))
    tmp.replace(out)
    print(f"wrote {out} (input shape 1,3,16,16; try: freezeview {out} --preserve temperature)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
