"""Sample inputs and output comparison: did a step move the numbers?

A user who gives sample inputs (``--inputs FILE.pt`` or ``--input-shape 1,3,224,224``)
sees, for every step of the pipeline, how far the outputs have drifted from the
unfrozen module's outputs on the same inputs. Folding batch norms into convolutions is
allowed to move the last bits; anything larger points at the step that did it.

Running a module can change its state (a buffer updated in place, an attribute
assigned with ``prim::SetAttr``, a folded constant the frozen graph writes), and a
frozen module shares tensor storage with the module it came from: the graphs are run on
a :class:`~.sandbox.Sandbox` (a private copy), never on the modules themselves.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from ..plumbing import BadInputError, plural

__all__ = [
    "Numerics",
    "compare_outputs",
    "flatten_outputs",
    "load_inputs",
    "parse_input_shape",
    "random_inputs",
]

# Names accepted after the shape in ``--input-shape 1,3,224,224:float16``.
_DTYPES: dict[str, torch.dtype] = {
    "float32": torch.float32,
    "float": torch.float32,
    "float64": torch.float64,
    "double": torch.float64,
    "float16": torch.float16,
    "half": torch.float16,
    "bfloat16": torch.bfloat16,
    "int64": torch.int64,
    "long": torch.int64,
    "int32": torch.int32,
    "int": torch.int32,
    "bool": torch.bool,
}


@dataclass(frozen=True, slots=True)
class Numerics:
    """How far a step's outputs are from the unfrozen module's outputs.

    Attributes:
        max_abs: largest absolute difference over every output element.
        max_rel: ``max_abs`` divided by the largest magnitude in the reference outputs
            (a norm-wise relative error: element-wise ratios explode near zero).
        allclose: ``torch.testing.assert_close`` passes on every output (its default
            tolerances for the output dtype: rtol 1.3e-6 / atol 1e-5 for float32).
        outputs: how many tensors were compared.
        note: why the comparison is partial or impossible (empty when it is complete).
    """

    max_abs: float
    max_rel: float
    allclose: bool
    outputs: int
    note: str = ""

    @property
    def exact(self) -> bool:
        """True when every output is bit-for-bit identical."""
        return self.max_abs == 0.0 and not self.note

    def to_json(self) -> dict[str, Any]:
        """Plain JSON form (``inf``/``nan`` become strings)."""

        def num(x: float) -> float | str:
            return x if math.isfinite(x) else str(x)

        return {
            "max_abs": num(self.max_abs),
            "max_rel": num(self.max_rel),
            "allclose": self.allclose,
            "outputs": self.outputs,
            "note": self.note,
        }


def parse_input_shape(text: str) -> tuple[tuple[int, ...], torch.dtype]:
    """Parse ``1,3,224,224`` (optionally ``:float16``) into a shape and a dtype.

    Args:
        text: comma-separated sizes, optionally followed by ``:`` and a dtype name.

    Returns:
        ``(shape, dtype)``; dtype is float32 unless named.

    Raises:
        BadInputError: a size is not a non-negative integer or the dtype is unknown.
    """
    shape_text, _, dtype_text = text.partition(":")
    try:
        shape = tuple(int(part) for part in shape_text.replace("x", ",").split(",") if part.strip())
    except ValueError:
        shape = ()
    if not shape or any(s < 0 for s in shape):
        raise BadInputError(
            f"--input-shape {text!r} is not a shape: "
            "give comma-separated sizes such as 1,3,224,224."
        )
    dtype_name = dtype_text.strip().lower() or "float32"
    if dtype_name not in _DTYPES:
        raise BadInputError(
            f"--input-shape {text!r}: unknown dtype {dtype_name!r} "
            f"(use one of {', '.join(sorted(_DTYPES))})."
        )
    return shape, _DTYPES[dtype_name]


def random_inputs(shapes: Sequence[str], seed: int = 0) -> tuple[torch.Tensor, ...]:
    """Build one input tensor per ``--input-shape``, reproducibly.

    Args:
        shapes: the ``--input-shape`` texts, in argument order.
        seed: seed of the private generator (the global RNG is not touched).

    Returns:
        A tuple of tensors: normal samples for floating dtypes, small integers (0..9)
        or booleans otherwise.
    """
    gen = torch.Generator().manual_seed(seed)
    tensors: list[torch.Tensor] = []
    for text in shapes:
        shape, dtype = parse_input_shape(text)
        if dtype.is_floating_point:
            tensors.append(torch.randn(shape, generator=gen).to(dtype))
        elif dtype == torch.bool:
            tensors.append(torch.randint(0, 2, shape, generator=gen).bool())
        else:
            tensors.append(torch.randint(0, 10, shape, generator=gen).to(dtype))
    return tuple(tensors)


def load_inputs(path: str | os.PathLike[str]) -> tuple[Any, ...]:
    """Load sample inputs saved with ``torch.save`` (a tensor or a tuple/list of them).

    The file is read with ``weights_only=True``: it may hold tensors and plain
    containers, never code.

    Args:
        path: the ``--inputs`` file.

    Returns:
        The positional arguments for ``forward``.

    Raises:
        BadInputError: missing or unreadable file, or not tensors.
    """
    p = Path(path)
    if not p.is_file():
        raise BadInputError(f"--inputs {p}: no such file.")
    try:
        data = torch.load(str(p), map_location="cpu", weights_only=True)
    except Exception as exc:
        first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:160]
        raise BadInputError(
            f"--inputs {p} could not be read as torch.save'd tensors ({first})."
        ) from exc
    if isinstance(data, torch.Tensor):
        return (data,)
    if isinstance(data, (tuple, list)) and data:
        return tuple(data)
    raise BadInputError(
        f"--inputs {p} holds {type(data).__name__}; save a tensor or a tuple of tensors "
        "(torch.save((x,), path))."
    )


def flatten_outputs(value: Any) -> list[torch.Tensor]:
    """Every tensor (and number, as a tensor) in a nested output, in a stable order."""
    out: list[torch.Tensor] = []

    def visit(v: Any) -> None:
        if isinstance(v, torch.Tensor):
            # MKLDNN tensors (optimize_for_inference) cannot be compared directly.
            out.append(v.to_dense() if v.is_mkldnn else v)
        elif isinstance(v, (bool, int, float)):
            out.append(torch.tensor(v))
        elif isinstance(v, (tuple, list)):
            for item in v:
                visit(item)
        elif isinstance(v, dict):
            for key in sorted(v, key=repr):
                visit(v[key])

    visit(value)
    return out


def compare_outputs(reference: Any, candidate: Any) -> Numerics:
    """Compare two forward outputs (nested tensors, tuples, lists, dicts, numbers).

    Args:
        reference: what the unfrozen module returned.
        candidate: what the step's graph returned on the same inputs.

    Returns:
        A :class:`Numerics`; structure or shape mismatches give ``inf`` with a note.
    """
    ref = flatten_outputs(reference)
    got = flatten_outputs(candidate)
    if len(ref) != len(got):
        return Numerics(
            math.inf,
            math.inf,
            False,
            len(ref),
            f"{plural(len(got), 'output')} instead of {len(ref)}",
        )
    max_abs = 0.0
    scale = 0.0
    allclose = True
    for r, g in zip(ref, got, strict=True):
        if r.shape != g.shape:
            return Numerics(
                math.inf,
                math.inf,
                False,
                len(ref),
                f"output shape {tuple(g.shape)} instead of {tuple(r.shape)}",
            )
        if r.numel() == 0:
            continue
        rd = r.detach().double() if r.dtype != torch.bool else r.detach().to(torch.float64)
        gd = g.detach().double() if g.dtype != torch.bool else g.detach().to(torch.float64)
        diff = (rd - gd).abs()
        # NaN in the same place on both sides is agreement, not an infinite error.
        both_nan = torch.isnan(rd) & torch.isnan(gd)
        diff = torch.where(both_nan, torch.zeros_like(diff), diff)
        d = float(diff.max())
        max_abs = max(max_abs, d) if not math.isnan(d) else math.inf
        finite = rd[torch.isfinite(rd)]
        if finite.numel():
            scale = max(scale, float(finite.abs().max()))
        allclose = allclose and _close(r.detach(), g.detach())
    max_rel = max_abs / scale if scale > 0 else (0.0 if max_abs == 0 else math.inf)
    return Numerics(max_abs, max_rel, allclose, len(ref))


def _close(ref: torch.Tensor, got: torch.Tensor) -> bool:
    """``torch.testing.assert_close``'s verdict with its per-dtype default tolerances."""
    try:
        torch.testing.assert_close(got, ref, equal_nan=True, check_dtype=False, check_device=False)
    except AssertionError:
        return False
    return True
