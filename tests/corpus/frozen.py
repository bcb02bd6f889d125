"""Already-frozen models: what people receive and deploy.

Each case is the output of ``torch.jit.freeze`` (or of ``optimize_for_inference``, or a
``.ptl`` written for the lite interpreter, or ``optimize_for_mobile``'s output where torch
has XNNPACK) saved and loaded back, as a file would be. Such a module has no ``training``
flag and its weights are graph constants; torch freezes it again (the oracle calls
``torch.jit.freeze``'s own steps, ``oracle.refreeze``), and freezeview must agree.
"""

from __future__ import annotations

import io
import warnings
from collections.abc import Callable

import pytest
import torch
from torch import nn

from ._case import Case, image_inputs, seeded

Saver = Callable[[torch.jit.ScriptModule, io.BytesIO], None]


def _save(module: torch.jit.ScriptModule, buffer: io.BytesIO) -> None:
    torch.jit.save(module, buffer)


def _save_lite(module: torch.jit.ScriptModule, buffer: io.BytesIO) -> None:
    buffer.write(module._save_to_buffer_for_lite_interpreter())


def _saved(
    make: Callable[[], nn.Module],
    transform: Callable[[torch.jit.ScriptModule], torch.jit.ScriptModule],
    save: Saver = _save,
) -> Callable[[], torch.jit.ScriptModule]:
    """A ``build``: ``transform(torch.jit.script(make()))`` saved and loaded back."""

    def build() -> torch.jit.ScriptModule:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            module = transform(torch.jit.script(seeded(make).eval()))
            buffer = io.BytesIO()
            save(module, buffer)
            buffer.seek(0)
            return torch.jit.load(buffer)

    return build


class ConvBnHead(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.drop = nn.Dropout(0.2)
        self.fc = nn.Linear(4, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.drop(self.bn(self.conv(x)))
        return self.fc(y.mean((2, 3)))


class Counter(nn.Module):
    """A buffer written in place: freezing keeps it, and keeps it again."""

    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)
        self.register_buffer("calls", torch.zeros(1))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        self.calls.add_(1)
        return self.fc(x)


class Versioned(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 3)
        self.version = 2

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc(x) * self.version


class Mlp(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = nn.Linear(4, 8)
        self.fc2 = nn.Linear(8, 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(torch.relu(self.fc1(x)))


def _freeze(**options: object) -> Callable[[torch.jit.ScriptModule], torch.jit.ScriptModule]:
    return lambda module: torch.jit.freeze(module, **options)  # type: ignore[arg-type]


def _optimize_for_mobile(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    import torch.backends.xnnpack

    if not torch.backends.xnnpack.enabled:
        pytest.skip(f"torch {torch.__version__} was built without XNNPACK: no optimize_for_mobile")
    from torch.utils.mobile_optimizer import optimize_for_mobile

    return optimize_for_mobile(module)


_TAGS = frozenset({"already-frozen"})

CASES = [
    Case("frozen_conv_bn", _saved(ConvBnHead, _freeze()), inputs=image_inputs, tags=_TAGS),
    # Frozen without the numeric passes: freezing it again still folds conv and bn.
    Case(
        "frozen_no_optimize",
        _saved(ConvBnHead, _freeze(optimize_numerics=False)),
        inputs=image_inputs,
        tags=_TAGS,
    ),
    Case("frozen_kept_buffer", _saved(Counter, _freeze()), tags=_TAGS),
    Case("frozen_preserved", _saved(Versioned, _freeze(preserved_attrs=["version"])), tags=_TAGS),
    Case(
        "frozen_optimize_for_inference",
        _saved(Mlp, torch.jit.optimize_for_inference),
        tags=_TAGS,
    ),
    Case("frozen_lite_interpreter", _saved(Mlp, _freeze(), _save_lite), tags=_TAGS),
    Case("frozen_for_mobile", _saved(Mlp, _optimize_for_mobile, _save_lite), tags=_TAGS),
]
