"""The values :func:`freezeview.engine.explain` returns: verdicts, reasons, explanations.

torch-free, so the app's screen and the reports can hold them without importing torch.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..graph import AttributeInfo, FrozenContents, Inventory

__all__ = [
    "REASON_CODES",
    "STATUSES",
    "WRITTEN_HELP",
    "AttributeVerdict",
    "ConstantWrite",
    "Disagreement",
    "Explanation",
    "Reason",
    "written_constants",
    "written_warning",
]

#: The closed set of reason codes, with what each means. Documented in docs/reasons.md
#: (tests/test_docs_reasons.py holds the page to this set).
REASON_CODES: dict[str, str] = {
    "folded": "inlined: a preserved method reads it and freezing folds it into a constant",
    "written-constant": (
        "inlined, yet the frozen graph writes it: the frozen model mutates its own constant"
    ),
    "unused": "dropped: no preserved method reads it",
    "dead-code": "dropped: only read in code that freezing's clean-up removes",
    "preserved": "kept: named in preserved_attrs, or under a named submodule",
    "set-attr": "kept: a prim::SetAttr assigns it in a preserved method",
    "in-place-write": "kept: alias analysis finds a node that writes its value in place",
    "aliases-mutable": "kept: its value shares memory with a kept, mutable value",
    "module-kept": "kept: a module on its path is kept whole (returned or preserved)",
    "not-materializable": "kept: its value has no constant form in TorchScript IR",
    "interface": "reached through a module interface attribute",
    "shared-type": "kept: another module of the same TorchScript class keeps this slot",
    "holds-kept": "kept: a submodule that holds kept attributes",
    "referenced": "kept: a node that reads it survives freezing's clean-up",
    "forked": (
        "kept: a torch.jit.fork runs its body on this submodule, which the body still reads "
        "after folding"
    ),
    "undetermined": (
        "torch's status, which freezeview's replay of freeze_module.cpp did not predict: "
        "freezeview could not work out why, and lists what it found"
    ),
}

STATUSES = ("kept", "inlined", "dropped")


@dataclass(frozen=True, slots=True)
class Reason:
    """One reason behind a verdict.

    Attributes:
        code: one of :data:`REASON_CODES`.
        message: a sentence for people.
        node: the IR line of the node involved (a writer, a SetAttr), if any.
        source: ``file:line`` of that node in the model's source, if recorded.
        method: the preserved method where it happens, if any.
        source_text: the text of that source line, read from the model's own debug
            information (so it works where the recorded file does not exist).
    """

    code: str
    message: str
    node: str | None = None
    source: str | None = None
    method: str | None = None
    source_text: str | None = None

    def one_line(self) -> str:
        """``code: message | source line text``, for reports that give one line a reason."""
        text = f"{self.code}: {self.message}"
        return f"{text} | {self.source_text}" if self.source_text else text

    def to_json(self) -> dict[str, Any]:
        """JSON object for ``explain --json``."""
        return {
            "code": self.code,
            "message": self.message,
            "node": self.node,
            "source": self.source,
            "method": self.method,
            "source_text": self.source_text,
        }


@dataclass(frozen=True, slots=True)
class AttributeVerdict:
    """What freezing does with one attribute, and why."""

    path: str
    kind: str
    type: str
    status: str
    reasons: tuple[Reason, ...]
    info: AttributeInfo

    @property
    def codes(self) -> tuple[str, ...]:
        """The reason codes, in order."""
        return tuple(r.code for r in self.reasons)

    def to_json(self) -> dict[str, Any]:
        """JSON object following DESIGN.md's ``explain --json`` contract."""
        data: dict[str, Any] = {
            "path": self.path,
            "kind": self.kind,
            "type": self.type,
            "status": self.status,
            "reasons": [r.to_json() for r in self.reasons],
        }
        if self.info.shape is not None:
            data["dtype"] = self.info.dtype
            data["shape"] = list(self.info.shape)
        return data


#: Where the user reads what a written constant does and what to change in the model.
WRITTEN_HELP = "docs/troubleshooting.md#the-frozen-model-mutates-its-own-constants"

_NODE_KIND = re.compile(r"=\s*([\w:.]+)\(")


def written_warning(count: int) -> str:
    """The warning every output gives for ``count`` written constants (``written-constant``
    attributes), without a leading ``warning:``."""
    noun = "folded attribute is" if count == 1 else "folded attributes are"
    them = "constants" if count > 1 else "constant"
    return (
        f"{count} {noun} still written by the frozen graph: the frozen model mutates "
        f"its own {them}, its outputs can change from call to call, and a saved file "
        f"holds whatever the {them} held at save time"
    )


@dataclass(frozen=True, slots=True)
class ConstantWrite:
    """One node of the frozen graph writing one folded attribute (a ``written-constant``
    reason), as the warnings of explain, freeze, the app and the review page list it."""

    path: str
    reason: Reason

    @property
    def kind(self) -> str:
        """The writing node's kind (``aten::add_``), read from its IR line."""
        found = _NODE_KIND.search(self.reason.node or "")
        return found.group(1) if found else "a node"

    def where(self) -> str:
        """``aten::add_ in forward at /src/m.py:11``: the writer and its source line."""
        text = self.kind
        if self.reason.method:
            text += f" in {self.reason.method}"
        if self.reason.source:
            text += f" at {self.reason.source}"
        return text

    def to_json(self) -> dict[str, Any]:
        """One entry of the ``written_constants`` lists of explain and freeze ``--json``."""
        return {
            "path": self.path,
            "node": self.reason.node,
            "source": self.reason.source,
            "method": self.reason.method,
            "source_text": self.reason.source_text,
        }


def written_constants(verdicts: Iterable[AttributeVerdict]) -> list[ConstantWrite]:
    """Each folded attribute the frozen graph writes, once per writing node, in order."""
    return [
        ConstantWrite(v.path, r)
        for v in verdicts
        for r in v.reasons
        if r.code == "written-constant"
    ]


@dataclass
class Explanation:
    """The verdict for every attribute of a model under one plan.

    ``frozen`` is set when the model is already frozen (``torch.jit.freeze``'s output):
    the constants and attributes that freezing left in it.
    """

    model: str
    torch_version: str
    preserved_attrs: tuple[str, ...]
    methods: tuple[str, ...]
    attributes: list[AttributeVerdict]
    inventory: Inventory
    seconds: float = 0.0
    warnings: list[str] = field(default_factory=list)
    torch_seconds: float = 0.0
    disagreements: list[Disagreement] = field(default_factory=list)
    torch_log: tuple[str, ...] = ()
    frozen: FrozenContents | None = None

    def counts(self) -> dict[str, int]:
        """How many attributes are inlined, kept and dropped."""
        counts = {status: 0 for status in ("inlined", "kept", "dropped")}
        for verdict in self.attributes:
            counts[verdict.status] += 1
        return counts

    def summary(self) -> str:
        """``412 inlined · 3 kept · 7 dropped``."""
        c = self.counts()
        return f"{c['inlined']} inlined · {c['kept']} kept · {c['dropped']} dropped"

    def by_path(self, path: str) -> AttributeVerdict | None:
        """The verdict for ``path``, or None."""
        return next((v for v in self.attributes if v.path == path), None)

    def with_status(self, status: str) -> list[AttributeVerdict]:
        """The verdicts with the given status, in tree order."""
        return [v for v in self.attributes if v.status == status]

    def written_constants(self) -> list[ConstantWrite]:
        """The writes of folded constants the frozen graph makes (``written-constant``)."""
        return written_constants(self.attributes)

    @property
    def plan(self) -> dict[str, Any]:
        """The plan the verdicts hold for."""
        return {"preserved_attrs": list(self.preserved_attrs), "methods": list(self.methods)}

    def to_json(self) -> dict[str, Any]:
        """JSON document following DESIGN.md's ``explain --json`` contract."""
        data = {
            "model": self.model,
            "torch_version": self.torch_version,
            "plan": self.plan,
            "summary": self.counts(),
            "attributes": [v.to_json() for v in self.attributes],
            "disagreements": [d.to_json() for d in self.disagreements],
            "written_constants": [w.to_json() for w in self.written_constants()],
        }
        if self.frozen is not None:
            data["already_frozen"] = self.frozen.to_json()
        return data


@dataclass(frozen=True, slots=True)
class Disagreement:
    """One attribute whose status freezeview's replay got wrong (torch's wins).

    Attributes:
        path: the attribute's dotted path.
        torch_status: what torch did (the status shown).
        replay_status: what freezeview's replay of freeze_module.cpp expected.
        replay_reasons: the replay's reasons, as ``code: message`` lines.
        log: torch's freezing log lines that name the attribute.
    """

    path: str
    torch_status: str
    replay_status: str
    replay_reasons: tuple[str, ...]
    log: tuple[str, ...]

    def to_json(self) -> dict[str, object]:
        """JSON object for ``explain --json``'s ``disagreements`` list."""
        return {
            "path": self.path,
            "torch_status": self.torch_status,
            "replay_status": self.replay_status,
            "replay_reasons": list(self.replay_reasons),
            "log": list(self.log),
        }
