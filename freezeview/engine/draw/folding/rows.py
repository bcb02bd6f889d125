"""Folding: which nodes are drawn as rows inside the node that uses them, and the rows.

``prim::Constant``, lists and tuples built only from constants, and ``prim::GetAttr``
reads of submodules carry no data flow a reader needs to follow, so they become label
rows of their users (``weight = Float(64, 3, 7, 7) <conv1.weight>``) instead of boxes
with dozens of edges each. A ``prim::GetAttr`` that reads a value (a kept attribute,
after freezing) is not folded: it stays a box of its own and stands out.
"""

from __future__ import annotations

import re
from functools import lru_cache

from ...diff import NodeInfo
from ...graph import GraphSnapshot, NodeSnapshot, demangle

__all__ = ["short_type"]

_LIST_KINDS = frozenset({"prim::ListConstruct", "prim::TupleConstruct"})
#: The only kinds ever drawn inside their users (see ``Folder._fold_text``).
_FOLDABLE_KINDS = _LIST_KINDS | {"prim::Constant", "prim::GetAttr"}
MAX_ROWS = 6
_MAX_ROW_CHARS = 48
_TYPE_DETAIL_RE = re.compile(r",\s*(strides|requires_grad|device)=.*?(?=\)$|,\s*\w+=)")
_SCHEMA_ARGS_RE = re.compile(r"\(([^)]*)\)")
_BRACKETS_RE = re.compile(r"\[[^\]]*\]|\([a-z]+!?(?:\s*->\s*\*)?\)")


@lru_cache(maxsize=4096)
def _schema_args(schema: str) -> tuple[tuple[str, str], ...]:
    """(type, name) of each argument of an operator schema (``aten::conv2d(Tensor input,
    ...)``); list types lose their brackets (``int[2]`` is ``int``)."""
    # Defaults such as `stride=[1, 1]`, types such as `int[2]` and alias sets such as
    # `Tensor(a!)` hold commas and brackets; drop them so commas separate arguments only.
    match = _SCHEMA_ARGS_RE.search(_BRACKETS_RE.sub("", schema))
    if not match:
        return ()
    args = []
    for arg in match.group(1).split(","):
        arg = arg.strip()
        if not arg or arg == "*":
            continue
        decl = arg.split("=", 1)[0].strip()
        type_, _, name = decl.rpartition(" ")
        args.append((type_.strip(), name))
    return tuple(args)


def short_type(type_text: str) -> str:
    """A value type as a label: ``Float(1, 64, 56, 56)``; strides and devices left out."""
    text = demangle(type_text)
    return _TYPE_DETAIL_RE.sub("", text)


def clip_row(text: str, limit: int = _MAX_ROW_CHARS) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _is_trivial(node: NodeSnapshot) -> bool:
    c = node.constant
    if c is None or c.attribute or c.kind == "tensor":
        return False
    return c.kind in {"none", "bool", "int", "float", "device"} or (
        c.kind == "list" and len(c.text) <= 12
    )


class Folder:
    """Decides which nodes are drawn inside their users and what text they get."""

    def __init__(self, snapshot: GraphSnapshot, info: dict[int, NodeInfo], constants: str) -> None:
        self.snapshot = snapshot
        self.info = info
        self.constants = constants
        self.producer: dict[str, int] = {
            out.name: node_id for node_id, i in info.items() for out in i.node.outputs
        }
        self.self_name = snapshot.inputs[0].name if snapshot.inputs else ""
        self.text: dict[int, str | None] = {}
        self.folded: set[int] = set()
        # Most nodes cannot be folded; only the others are asked (in walk order, since a
        # list folds when what it holds did).
        foldable = [(n, i) for n, i in info.items() if i.node.kind in _FOLDABLE_KINDS]
        for node_id, i in foldable:
            text = self._fold_text(i)
            if text is not None:
                self.folded.add(node_id)
                self.text[node_id] = text

    def _fold_text(self, info: NodeInfo) -> str | None:
        node = info.node
        if node.kind == "prim::Constant" and node.constant is not None:
            if self.constants == "nodes":
                return None
            c = node.constant
            # Only tensors keep a trustworthy origin: torch pools equal scalars into one
            # constant named after whichever attribute came first (`False <bn1.training>`).
            return f"{c.text} <{c.attribute}>" if c.attribute and c.is_tensor else c.text
        if node.kind in _LIST_KINDS and node.outputs:
            parts = []
            for name in node.inputs:
                pid = self.producer.get(name)
                if pid is None or pid not in self.folded:
                    return None
                parts.append(self.text[pid] or "")
            brackets = "[]" if node.kind == "prim::ListConstruct" else "()"
            return brackets[0] + ", ".join(parts) + brackets[1]
        if node.kind == "prim::GetAttr" and node.outputs and self._is_module_read(node):
            return f"self.{info.attribute}" if info.attribute else node.attribute("name")
        return None

    def _is_module_read(self, node: NodeSnapshot) -> bool:
        # Reads of submodules (typed `__torch__.…`) are plumbing; reads of values are
        # what freezing inlines or keeps, so those stay visible.
        rooted = node.inputs and (
            node.inputs[0] == self.self_name or self.producer.get(node.inputs[0]) in self.folded
        )
        return bool(rooted) and node.outputs[0].type.startswith("__torch__.")

    def hidden(self, node_id: int) -> bool:
        """Folded and left out entirely (``hide-trivial`` mode)."""
        return self.constants == "hide-trivial" and _is_trivial(self.info[node_id].node)

    def rows(self, node: NodeSnapshot) -> list[str]:
        """Label rows for the folded inputs of ``node``."""
        args = _schema_args(node.schema) if node.schema else ()
        rows = []
        for index, value in enumerate(node.inputs):
            pid = self.producer.get(value)
            if pid is None or pid not in self.folded or self.hidden(pid):
                continue
            text = self.text[pid] or ""
            if text.startswith("self.") and self.info[pid].node.kind == "prim::GetAttr":
                continue  # a submodule handle passed on (CallMethod); the tooltip has it
            type_, name = args[index] if index < len(args) else ("", f"#{index}")
            # An int fed to a `ScalarType dtype` (or a layout, a memory format) is shown
            # by its name: `dtype = torch.quint8`, never torch's number for it.
            constant = self.info[pid].node.constant
            named = constant.name_as(type_) if constant is not None and type_ else None
            rows.append(clip_row(f"{name} = {named or text}"))
        if len(rows) > MAX_ROWS:
            rows = [*rows[: MAX_ROWS - 1], f"… {len(rows) - MAX_ROWS + 1} more"]
        return rows
