"""freezeview: see what ``torch.jit.freeze`` does to a TorchScript model.

The Python API mirrors the command line:

* :func:`explain` - for every attribute, whether freezing inlines, keeps or drops it, and why;
* :func:`load_model` - load a ``.pt`` file with one clear sentence for every bad input;
* :func:`check` - hold a model against an expectations file (``freezeview check``);
* :func:`compare` - what freezing does differently to two versions of a model.

The stepwise freeze engine (``freezeview.freeze``) and rendering (``freezeview.export``)
are re-exported when present.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .engine import REASON_CODES, Explanation, explain, load_model


def __getattr__(name: str) -> Any:
    # Resolved on first use (PEP 562) so that `import freezeview.<anything>` does not
    # import torch: the app's first screen appears while torch is still loading.
    if name in ("REASON_CODES", "Explanation", "explain", "load_model"):
        from . import engine

        return getattr(engine, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__version__ = "0.1.0"

__all__ = [
    "REASON_CODES",
    "Explanation",
    "__version__",
    "check",
    "compare",
    "explain",
    "export",
    "freeze",
    "load_model",
]


def freeze(*args: Any, **kwargs: Any) -> Any:
    """Run freezing step by step; see :func:`freezeview.engine.pipeline.freeze`."""
    from .engine.pipeline import freeze as _freeze

    return _freeze(*args, **kwargs)


def export(*args: Any, **kwargs: Any) -> Any:
    """Write pictures and diffs; see :func:`freezeview.engine.export.export`."""
    from .engine.export import export as _export

    return _export(*args, **kwargs)


def check(*args: Any, **kwargs: Any) -> Any:
    """Hold a model against an expectations file; see :func:`freezeview.engine.check.check`."""
    from .engine.check import check as _check

    return _check(*args, **kwargs)


def compare(*args: Any, **kwargs: Any) -> Any:
    """Compare freezing two models; see :func:`freezeview.engine.compare.compare`."""
    from .engine.compare import compare as _compare

    return _compare(*args, **kwargs)
