"""Save two models that call the operators of this folder's packages (run as a script).

python build_models.py OUT_DIR   # writes OUT_DIR/fvops.pt and OUT_DIR/fvother.pt
"""

import sys

import fv_other_ops  # noqa: F401  (registers fvother::shift)
import fvops  # noqa: F401  (registers fvops::scale)
import torch
from torch import nn


class Scales(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.full((4,), 0.5))
        self.fc = nn.Linear(4, 4)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.fvops.scale(self.fc(x), self.w)


class Shifts(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("b", torch.ones(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ops.fvother.shift(x, self.b) * 2


if __name__ == "__main__":
    out = sys.argv[1]
    torch.jit.save(torch.jit.script(Scales().eval()), f"{out}/fvops.pt")
    torch.jit.save(torch.jit.script(Shifts().eval()), f"{out}/fvother.pt")
