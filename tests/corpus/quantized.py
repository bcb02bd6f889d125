"""torch.ao quantization as people ship it: static (eager mode), QAT-converted, dynamic.

Packed weights are TorchScript custom-class objects (``LinearPackedParamsBase``,
``Conv2dPackedParamsBase``) that freezing turns into ``prim::Constant[value=object]``;
a Linear's packed params module builds its object in TorchScript code, which makes it a
different kind of object than a Conv's. Every model is also saved and loaded back, as a
user's file would be.
"""

# No `from __future__ import annotations`: TorchScript reads annotations at script time.

import contextlib
import io
from collections.abc import Callable, Iterator

import torch
import torch.ao.quantization as tq
from torch import nn

from ._case import Case, image_inputs, seeded


@contextlib.contextmanager
def _engine(name: str = "x86") -> Iterator[None]:
    """Use one quantized engine while building, then restore the process's choice."""
    previous = torch.backends.quantized.engine
    torch.backends.quantized.engine = name
    try:
        yield
    finally:
        torch.backends.quantized.engine = previous


def _reloaded(module: torch.jit.ScriptModule) -> torch.jit.ScriptModule:
    buffer = io.BytesIO()
    torch.jit.save(module, buffer)
    buffer.seek(0)
    return torch.jit.load(buffer)


class QuantLinearNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.quant = tq.QuantStub()
        self.fc1 = nn.Linear(4, 8)
        self.relu = nn.ReLU()
        self.fc2 = nn.Linear(8, 3)
        self.dequant = tq.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.dequant(self.fc2(self.relu(self.fc1(self.quant(x)))))


class QuantConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.quant = tq.QuantStub()
        self.conv = nn.Conv2d(3, 4, 3)
        self.bn = nn.BatchNorm2d(4)
        self.relu = nn.ReLU()
        self.head = nn.Linear(4 * 6 * 6, 5)
        self.dequant = tq.DeQuantStub()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.relu(self.bn(self.conv(self.quant(x))))
        return self.dequant(self.head(y.reshape(y.shape[0], -1)))


class Tagger(nn.Module):
    """Embedding-like projection, a recurrent layer and a head: the dynamic-quant shape."""

    def __init__(self, kind: str = "LSTM") -> None:
        super().__init__()
        self.proj = nn.Linear(4, 8)
        self.rnn = getattr(nn, kind)(8, 8, num_layers=2, batch_first=True)
        self.head = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(self.proj(x))
        return self.head(y)


def _sequence_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 5, 4),)


@contextlib.contextmanager
def _seeded_data() -> Iterator[None]:
    """Calibration and training data that are the same in every build of a case."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(2)
        yield


def _static(
    make: Callable[[], nn.Module],
    inputs: Callable[[], tuple[torch.Tensor, ...]],
    fuse: list[list[str]] | None = None,
    per_channel: bool = False,
) -> nn.Module:
    with _engine():
        module = seeded(make).eval()
        if per_channel:
            module.qconfig = tq.QConfig(
                activation=tq.default_observer, weight=tq.default_per_channel_weight_observer
            )
        else:
            module.qconfig = tq.get_default_qconfig("x86")
        if fuse:
            tq.fuse_modules(module, fuse, inplace=True)
        tq.prepare(module, inplace=True)
        with torch.no_grad(), _seeded_data():
            for _ in range(3):
                module(*inputs())
        tq.convert(module, inplace=True)
    return module


def _qat(make: Callable[[], nn.Module], fuse: list[list[str]]) -> nn.Module:
    with _engine():
        module = seeded(make).train()
        module.qconfig = tq.get_default_qat_qconfig("x86")
        tq.fuse_modules_qat(module, fuse, inplace=True)
        tq.prepare_qat(module, inplace=True)
        optimizer = torch.optim.SGD(module.parameters(), lr=0.01)
        with _seeded_data():
            for _ in range(2):
                optimizer.zero_grad()
                module(*image_inputs()).sum().backward()
                optimizer.step()
        module.eval()
        tq.convert(module, inplace=True)
    return module


def _dynamic(kind: str, types: set[type[nn.Module]]) -> nn.Module:
    with _engine():
        return tq.quantize_dynamic(seeded(lambda: Tagger(kind)).eval(), types, dtype=torch.qint8)


def _linear_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 4),)


def _build(
    make: Callable[[], nn.Module],
    *,
    trace_with: Callable[[], tuple[torch.Tensor, ...]] | None = None,
    reload: bool = False,
) -> Callable[[], torch.jit.ScriptModule]:
    def build() -> torch.jit.ScriptModule:
        module = make()
        with _engine():
            if trace_with is None:
                out = torch.jit.script(module)
            else:
                out = torch.jit.trace(module, trace_with(), check_trace=False)
        return _reloaded(out) if reload else out

    return build


_FUSE_CONV = [["conv", "bn", "relu"]]

CASES = [
    Case(
        "quant_static_linear",
        _build(lambda: _static(QuantLinearNet, _linear_inputs)),
        tags=frozenset({"slow", "quantized"}),
    ),
    Case(
        "quant_static_linear_saved",
        _build(lambda: _static(QuantLinearNet, _linear_inputs), reload=True),
        tags=frozenset({"quantized", "saved"}),
    ),
    Case(
        "quant_static_linear_traced",
        _build(lambda: _static(QuantLinearNet, _linear_inputs), trace_with=_linear_inputs),
        traced=True,
        tags=frozenset({"slow", "quantized", "traced"}),
    ),
    Case(
        "quant_static_conv_bn_relu_fused",
        _build(lambda: _static(QuantConvNet, image_inputs, fuse=_FUSE_CONV), reload=True),
        inputs=image_inputs,
        tags=frozenset({"quantized", "saved"}),
    ),
    Case(
        "quant_static_conv_per_channel",
        _build(lambda: _static(QuantConvNet, image_inputs, fuse=_FUSE_CONV, per_channel=True)),
        inputs=image_inputs,
        tags=frozenset({"slow", "quantized"}),
    ),
    Case(
        "quant_static_conv_per_channel_traced",
        _build(
            lambda: _static(QuantConvNet, image_inputs, fuse=_FUSE_CONV, per_channel=True),
            trace_with=image_inputs,
            reload=True,
        ),
        inputs=image_inputs,
        traced=True,
        tags=frozenset({"quantized", "traced", "saved"}),
    ),
    Case(
        "quant_qat_conv_bn_relu",
        _build(lambda: _qat(QuantConvNet, _FUSE_CONV), reload=True),
        inputs=image_inputs,
        tags=frozenset({"slow", "quantized", "qat", "saved"}),
    ),
    Case(
        "quant_dynamic_lstm",
        _build(lambda: _dynamic("LSTM", {nn.LSTM, nn.Linear}), reload=True),
        inputs=_sequence_inputs,
        tags=frozenset({"quantized", "dynamic", "rnn", "saved"}),
    ),
    Case(
        "quant_dynamic_gru",
        _build(lambda: _dynamic("GRU", {nn.GRU, nn.Linear})),
        inputs=_sequence_inputs,
        tags=frozenset({"quantized", "dynamic", "rnn"}),
    ),
    Case(
        "quant_dynamic_lstm_traced",
        _build(lambda: _dynamic("LSTM", {nn.LSTM, nn.Linear}), trace_with=_sequence_inputs),
        inputs=_sequence_inputs,
        traced=True,
        tags=frozenset({"slow", "quantized", "dynamic", "rnn", "traced"}),
    ),
    Case(
        "quant_dynamic_linear_only",
        _build(lambda: _dynamic("GRU", {nn.Linear}), reload=True),
        inputs=_sequence_inputs,
        tags=frozenset({"slow", "quantized", "dynamic", "saved"}),
    ),
]
