"""TorchScript names as freezeview shows and compares them (no torch import here: the
app uses this before torch has loaded)."""

from __future__ import annotations

import re

__all__ = ["demangle"]

# Freezing clones module types, which TorchScript names `__torch__.___torch_mangle_N.Foo`;
# the number depends on how many clones this process made, not on the model.
_MANGLE_RE = re.compile(r"___torch_mangle_\d+\.")


def demangle(text: str) -> str:
    """``text`` without TorchScript's per-clone type mangling (``___torch_mangle_4.``).

    Two printouts of the same graph then compare equal whatever the process did before,
    and people read ``__torch__.ExampleNet`` rather than
    ``__torch__.___torch_mangle_0.ExampleNet``.
    """
    return _MANGLE_RE.sub("", text)
