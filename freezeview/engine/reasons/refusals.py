"""Why torch refuses to freeze a model, in one sentence with the fix.

freezeview's replay of freeze_module.cpp (:mod:`.replay`) raises these sentences itself
when it meets a model torch cannot freeze; :func:`torch_refusal` maps torch's own
messages (from ``_freeze_module``) onto the same sentences, so every command says the
same thing whichever code path met the problem first.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

__all__ = ["refusal", "torch_refusal"]

# them, so every command says the same thing whichever code path met the problem first.
_REFUSALS: dict[str, str] = {
    "returns-self": (
        "{model}: forward returns the module itself (self), which torch cannot freeze; "
        "return tensors (or preserve the method that needs the module) instead."
    ),
    "container-index": (
        "{model}: {method} indexes a ModuleList/ModuleDict with a value known only at run "
        "time (prim::ModuleContainerIndex), which torch cannot freeze; index it with a "
        "constant or unroll the loop."
    ),
    "interface-setattr": (
        "{model} assigns the module interface attribute {name} (SetAttr on an interface "
        "type), which torch cannot freeze: keep one implementation per attribute."
    ),
    "interface-preserved": (
        "{model}: freezing cannot fold the module interface attribute {name} because it is "
        "preserved or assigned; do not preserve interface attributes."
    ),
    "interfaces-off": (
        "{model} uses module interface attributes and interface freezing is off; torch "
        "refuses to freeze it that way."
    ),
    "overlapping": (
        "{model}: two attributes {name}hold overlapping values (one contains the other), "
        "which torch refuses to freeze; keep each tensor in one attribute."
    ),
    "training": (
        "{model} holds a module in training mode, and freezing needs eval mode: pass --eval "
        "(or call .eval() on the module before saving it)."
    ),
    "submodule-method": (
        "{model}: a preserved method of a submodule reads that submodule's attribute {name}, "
        "which torch's freezing looks up on the top-level module, so torch cannot freeze it "
        "this way; preserve the submodule itself instead."
    ),
    "unknown-name": (
        "unknown name {name} in preserved attributes: {model} has no attribute, submodule "
        "or method of that name."
    ),
}

# torch's own wording (freeze_module.cpp, torch/jit/_freeze.py) -> refusal key.
_TORCH_MESSAGES: tuple[tuple[re.Pattern[str], str], ...] = (
    (re.compile(r"freeze a module that returns? itself"), "returns-self"),
    (re.compile(r"ModuleContainerIndex"), "container-index"),
    (re.compile(r"SetAttr on an interface type.*?'(?P<name>[^']+)'", re.S), "interface-setattr"),
    (re.compile(r"failed to freeze interface attribute '(?P<name>[^']+)'"), "interface-preserved"),
    (re.compile(r"module that uses interface attributes"), "interfaces-off"),
    (re.compile(r"attributes values that overlaps"), "overlapping"),
    (re.compile(r"only implemented for modules in eval mode"), "training"),
    (re.compile(r"Unknown name: (?P<name>\S+)"), "unknown-name"),
    (re.compile(r"does not have a field with name '(?P<name>[^']+)'"), "submodule-method"),
)


def refusal(key: str, model: str, *, method: str = "forward", name: str = "") -> str:
    """The one-sentence reason torch cannot freeze ``model`` (see ``_REFUSALS``)."""
    return _REFUSALS[key].format(model=model, method=method, name=name)


def unknown_name(name: str, model: str, close: Sequence[str] = ()) -> str:
    """The sentence for a preserved name ``model`` has no attribute, submodule or method
    of, with the ``close`` names that exist: the one wording of explain, freeze and the
    app's start-up check."""
    hint = f"; closest: {', '.join(close)}" if close else ""
    return (
        f"unknown name {name!r} in preserved attributes: {model} has no attribute, "
        f"submodule or method of that name{hint}."
    )


def torch_refusal(message: str, model: str) -> str:
    """Turn torch's refusal to freeze into freezeview's sentence for it.

    Args:
        message: the text of the RuntimeError torch raised (``_freeze_module``,
            ``torch.jit.freeze``).
        model: how to name the model (its file).

    Returns:
        The matching sentence from freezeview's table, or ``torch refused to freeze
        MODEL: <torch's first line>`` for a refusal freezeview does not know yet.
    """
    for pattern, key in _TORCH_MESSAGES:
        found = pattern.search(message)
        if found is not None:
            name = found.groupdict().get("name") or ""
            return refusal(key, model, name=repr(name) if name else "")
    lines = [line.strip() for line in message.strip().splitlines() if line.strip()]
    first = lines[0] if lines else "no reason given"
    return f"torch refused to freeze {model}: {first[:200]}"
