"""Recurrent models: scripted and traced LSTM, GRU and RNN inside taggers and encoders.

A scripted ``nn.LSTM`` reads its weights through ``_flat_weights``, a list of parameters
that freezing folds into one constant list; one or more layers, bidirectional or not,
batch-first or not, with and without an initial state handed in.
"""

# No `from __future__ import annotations`: TorchScript reads annotations at script time.

import torch
from torch import nn

from ._case import Case, scripted, traced


class Encoder(nn.Module):
    def __init__(self, kind: str, **options: object) -> None:
        super().__init__()
        self.rnn = getattr(nn, kind)(4, 6, **options)
        width = 12 if options.get("bidirectional") else 6
        self.head = nn.Linear(width, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x)
        return self.head(y)


class WithState(nn.Module):
    """An LSTM handed its initial state, returning the final one too."""

    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.LSTM(4, 6, num_layers=2)
        self.head = nn.Linear(6, 3)

    def forward(self, x: torch.Tensor, h: torch.Tensor, c: torch.Tensor) -> torch.Tensor:
        y, (h_n, c_n) = self.rnn(x, (h, c))
        return self.head(y) + h_n.sum() + c_n.sum()


class GruWithState(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.rnn = nn.GRU(4, 6, batch_first=True, bidirectional=True)
        self.register_buffer("h0", torch.zeros(2, 2, 6))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y, _ = self.rnn(x, self.h0)
        return y


def _sequence() -> tuple[torch.Tensor, ...]:
    return (torch.randn(5, 2, 4),)


def _batch_first() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 5, 4),)


def _with_state() -> tuple[torch.Tensor, ...]:
    return (torch.randn(5, 2, 4), torch.zeros(2, 2, 6), torch.zeros(2, 2, 6))


def _encoder(kind: str, **options: object):  # type: ignore[no-untyped-def]
    def make() -> nn.Module:
        return Encoder(kind, **options)

    return make


CASES = [
    Case(
        "rnn_lstm_two_layers_bidirectional",
        scripted(_encoder("LSTM", num_layers=2, bidirectional=True)),
        inputs=_sequence,
        tags=frozenset({"rnn"}),
    ),
    Case(
        "rnn_gru_batch_first",
        scripted(_encoder("GRU", batch_first=True)),
        inputs=_batch_first,
        tags=frozenset({"rnn"}),
    ),
    Case(
        "rnn_tanh_two_layers",
        scripted(_encoder("RNN", num_layers=2)),
        inputs=_sequence,
        tags=frozenset({"slow", "rnn"}),
    ),
    Case(
        "rnn_lstm_initial_state", scripted(WithState), inputs=_with_state, tags=frozenset({"rnn"})
    ),
    Case(
        "rnn_gru_state_buffer_bidirectional",
        scripted(GruWithState),
        inputs=_batch_first,
        tags=frozenset({"rnn"}),
    ),
    Case(
        "rnn_lstm_traced",
        traced(_encoder("LSTM", num_layers=2), _sequence),
        inputs=_sequence,
        traced=True,
        tags=frozenset({"slow", "rnn", "traced"}),
    ),
    Case(
        "rnn_gru_traced_bidirectional",
        traced(_encoder("GRU", bidirectional=True), _sequence),
        inputs=_sequence,
        traced=True,
        tags=frozenset({"slow", "rnn", "traced"}),
    ),
    Case(
        "rnn_lstm_initial_state_traced",
        traced(WithState, _with_state),
        inputs=_with_state,
        traced=True,
        tags=frozenset({"slow", "rnn", "traced"}),
    ),
]
