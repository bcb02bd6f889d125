"""The fast path: a snapshot parsed from torch's own IR printout.

Asking torch for each node's inputs, outputs, types and attributes costs several
Python round trips per value; on a 17k-node transformer that is seconds. Printing the
graph is one C++ call (~50 ms) and the text carries everything but the module scope
and the schema, which one cheap walk collects
(:class:`~freezeview.engine.graph.snapshot_walk.Walked`).
If the two ever disagree (a node kind sequence that does not match), the parser raises
``ValueError`` and :func:`~freezeview.engine.graph.snapshot.snapshot_graph` takes the careful
per-node path instead.
"""

from __future__ import annotations

import re
import threading

from .scalar_types import enum_names
from .snapshot_values import BlockSnapshot, ConstantSummary, NodeSnapshot, SourceLocation, ValueInfo
from .snapshot_walk import (
    BLOCK_KINDS,
    MAX_LIST_ITEMS,
    PrintedWalk,
    Walked,
    constant_attribute,
    short_scalar,
)

_LINE_RE = re.compile(
    r"^(?P<indent> *)(?:(?P<outs>%.*?) = |= )?(?P<kind>[A-Za-z_][\w]*::[\w.]+)(?P<rest>.*)$"
)
_BLOCK_RE = re.compile(r"^ *block\d+\((?P<params>.*)\):$")
_RETURN_RE = re.compile(r"^ *-> \((?P<outs>.*)\)$")
_GRAPH_RETURN_RE = re.compile(r"^  return \((?P<outs>.*)\)$")
_COMMENT_SRC_RE = re.compile(r"^(?P<file>.+):(?P<line>\d+):\d+$")
_TENSOR_TYPE_RE = re.compile(r"^(?P<dtype>[A-Z][A-Za-z0-9]*)\((?P<dims>[^=]*?)(?:, strides=|\))")
_SCALAR_TYPE_NAMES = {
    "Float",
    "Double",
    "Half",
    "BFloat16",
    "Long",
    "Int",
    "Short",
    "Char",
    "Byte",
    "Bool",
    "ComplexFloat",
    "ComplexDouble",
}
_TORCH_DTYPES = {
    "Float": "float32",
    "Double": "float64",
    "Half": "float16",
    "BFloat16": "bfloat16",
    "Long": "int64",
    "Int": "int32",
    "Short": "int16",
    "Char": "int8",
    "Byte": "uint8",
    "Bool": "bool",
    "ComplexFloat": "complex64",
    "ComplexDouble": "complex128",
}


def split_values(text: str) -> list[ValueInfo]:
    """``%a : int, %b.1 : Tensor`` -> ValueInfos (types may contain commas, not ``, %``)."""
    text = text.strip()
    if not text:
        return []
    values = []
    for chunk in text.split(", %"):
        name, _, type_text = chunk.lstrip("%").partition(" : ")
        values.append(ValueInfo(name, type_text.strip()))
    return values


def _names(text: str) -> tuple[str, ...]:
    return tuple(part.strip().lstrip("%") for part in text.split(",") if part.strip())


def _matching(text: str, start: int, open_char: str, close_char: str) -> int:
    """Index of the bracket closing the one at ``start``, skipping quoted strings."""
    # Most brackets hold neither brackets nor quotes (`(%x.1, %7)`): then the first
    # closing one is the answer, found in C. A 17k-node printout has 65k of them.
    close = text.find(close_char, start + 1)
    if (
        close != -1
        and text.find(open_char, start + 1, close) == -1
        and text.find('"', start + 1, close) == -1
        and text.find("'", start + 1, close) == -1
    ):
        return close
    depth = 0
    quote = ""
    i = start
    while i < len(text):
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == open_char:
            depth += 1
        elif ch == close_char:
            depth -= 1
            if depth == 0:
                return i
        i += 1
    raise ValueError("unbalanced brackets")


def _split_attributes(text: str) -> list[tuple[str, str]]:
    """``name="weight", value=[1, 1]`` -> pairs (commas inside brackets/quotes kept)."""
    pairs: list[tuple[str, str]] = []
    depth = 0
    quote = ""
    current = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            current += ch
            if ch == "\\" and i + 1 < len(text):
                current += text[i + 1]
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
            current += ch
        elif ch in "[(<{":
            depth += 1
            current += ch
        elif ch in "])>}":
            depth -= 1
            current += ch
        elif ch == "," and depth == 0:
            pairs.append(_pair(current))
            current = ""
        else:
            current += ch
        i += 1
    if current.strip():
        pairs.append(_pair(current))
    return pairs


def _pair(text: str) -> tuple[str, str]:
    name, _, value = text.strip().partition("=")
    value = value.strip()
    if len(value) >= 2 and value[0] == value[-1] == '"':
        value = value[1:-1]
    return name.strip(), value


def _constant_from_text(value_text: str | None, out: ValueInfo) -> ConstantSummary:
    attribute = constant_attribute(out.name)
    t = out.type
    match = _TENSOR_TYPE_RE.match(t)
    if match and match.group("dtype") in _SCALAR_TYPE_NAMES:
        dims_text = match.group("dims").strip()
        dims = tuple(int(d) for d in dims_text.split(",") if d.strip().isdigit())
        dtype = match.group("dtype")
        shown = f"{dtype}({', '.join(str(d) for d in dims)})"
        if not dims and value_text is not None and "<Tensor>" not in value_text:
            number = value_text.split("[", 1)[0].strip()
            if number:
                shown = f"{dtype}({number})"
        return ConstantSummary(
            "tensor", shown, _TORCH_DTYPES.get(dtype, dtype.lower()), dims, attribute
        )
    if t == "Tensor":
        return ConstantSummary("tensor", "Tensor", None, None, attribute)
    if value_text is None or t == "NoneType":
        return ConstantSummary("none", "None", attribute=attribute)
    if t == "bool":
        return ConstantSummary(
            "bool", "True" if value_text in ("1", "True") else "False", attribute=attribute
        )
    if t == "int":
        names = enum_names(int(value_text)) if value_text.lstrip("-").isdigit() else ()
        return ConstantSummary("int", value_text, attribute=attribute, names=names)
    if t == "float":
        try:
            return ConstantSummary("float", f"{float(value_text):.6g}", attribute=attribute)
        except ValueError:
            return ConstantSummary("float", value_text, attribute=attribute)
    if t == "str":
        return ConstantSummary("str", short_scalar(value_text), attribute=attribute)
    if t == "Device":
        return ConstantSummary("device", repr(value_text), attribute=attribute)
    if t.endswith("[]"):
        items = [v.strip() for v in value_text.strip("[]").split(",") if v.strip()]
        more = ", ..." if len(items) > MAX_LIST_ITEMS else ""
        shown = ", ".join(items[:MAX_LIST_ITEMS]) + more
        return ConstantSummary("list", f"[{shown}]", attribute=attribute)
    if t.startswith("("):
        return ConstantSummary(
            "tuple", value_text if len(value_text) <= 40 else t, attribute=attribute
        )
    if t.startswith("__torch__."):
        return ConstantSummary("object", "object", attribute=attribute)
    return ConstantSummary("other", value_text if len(value_text) <= 40 else t, attribute=attribute)


#: What one printed node line says, whatever its position: indentation, printed kind,
#: outputs, attributes, inputs, source location, constant summary and the line itself.
LineParts = tuple[
    int,
    str,
    tuple[ValueInfo, ...],
    tuple[tuple[str, str], ...],
    tuple[str, ...],
    "SourceLocation | None",
    "ConstantSummary | None",
    str,
]


def line_parts(line: str) -> LineParts:
    """Parse one node's printed line (continuations joined) into its parts."""
    match = _LINE_RE.match(line)
    if match is None:
        raise ValueError(f"unexpected IR line: {line[:80]}")
    # A node without outputs prints as "<indent> = kind(...)": one more space.
    width = len(match.group("indent"))
    if match.group("outs") is None and line[width:].startswith("= "):
        width -= 1
    printed = match.group("kind")
    outputs = split_values(match.group("outs") or "")
    rest = match.group("rest")
    attributes: list[tuple[str, str]] = []
    if rest.startswith("["):
        end = _matching(rest, 0, "[", "]")
        attributes = _split_attributes(rest[1:end])
        rest = rest[end + 1 :]
    end = _matching(rest, 0, "(", ")") if rest.startswith("(") else -1
    inputs = _names(rest[1:end]) if end > 0 else ()
    comment = rest[end + 1 :].strip() if end >= 0 else rest.strip()
    source = None
    if comment.startswith("#"):
        src = _COMMENT_SRC_RE.match(comment[1:].strip())
        if src:
            where = (src.group("file"), int(src.group("line")))
            source = _SOURCES.get(where)
            if source is None:
                if len(_SOURCES) > 100_000:
                    _SOURCES.clear()
                source = _SOURCES[where] = SourceLocation(*where)
    constant = None
    if printed == "prim::Constant" and outputs:
        value_text = next((v for k, v in attributes if k == "value"), None)
        constant = _constant_from_text(value_text, outputs[0])
        attributes = []
    return (
        width,
        printed,
        tuple(outputs),
        tuple(attributes),
        inputs,
        source,
        constant,
        line.strip(),
    )


class _Recent:
    """The parts of the lines graphs printed lately, by line.

    The steps of a run print mostly the same lines, and a re-run prints the same graphs
    again: a line seen lately is not parsed again. Two generations are kept, the
    current one and the one before; the stepwise pipeline starts a new generation
    with each run, and a generation past :data:`LINE_LIMIT` lines starts one too, so
    memory stays put however many graphs are parsed.
    """

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.current: dict[str, LineParts] = {}
        self.before: dict[str, LineParts] = {}

    def generations(self) -> tuple[dict[str, LineParts], dict[str, LineParts]]:
        """The current generation and the one before (the current one grows)."""
        with self.lock:
            if len(self.current) > LINE_LIMIT:
                self.before, self.current = self.current, {}
            return self.current, self.before

    def new_generation(self) -> None:
        """Start a generation: lines not seen again in it are forgotten at the next.

        Not while the current one is empty and the one before is small: a re-run whose
        steps' counts are all known parses nothing, and the lines of the run before it
        stay for the next toggle (:data:`IDLE_KEEP_LIMIT`).
        """
        with self.lock:
            if self.current or len(self.before) > IDLE_KEEP_LIMIT:
                self.before, self.current = self.current, {}

    def clear(self) -> None:
        """Forget every line."""
        with self.lock:
            self.before, self.current = {}, {}


#: Lines one generation holds at most (a 140k-node graph prints 140k lines).
LINE_LIMIT = 300_000
#: Lines kept across runs that parse nothing: what a run's counts parse (its pass steps'
#: graphs, each of at most ``FULL_DIFF_LIMIT`` nodes, diffed in full). The lines of a big
#: graph (a step the user looked at: 70k at 48 layers) go after two runs, as ever.
IDLE_KEEP_LIMIT = 20_000
RECENT_LINES = _Recent()
# Nodes inlined from one line of Python (every layer of a transformer runs the same
# lines) share one immutable location: fewer objects to build and to scan. Bounded by
# the model's source lines.
_SOURCES: dict[tuple[str, int], SourceLocation] = {}


class TextParser:
    """Builds the snapshot from the IR printout plus the walked facts."""

    def __init__(self, text: str, walked: Walked | PrintedWalk) -> None:
        self.lines = text.split("\n")
        self.pos = 0
        self.walked = walked
        self.next_id = 0
        self.values: dict[str, ValueInfo] = {}
        self.seen, self.earlier = RECENT_LINES.generations()
        # The nodes by id (pre-order): the snapshot's walk order, for free.
        self.in_order: list[NodeSnapshot | None] = []

    def parse(self) -> BlockSnapshot:
        # Header: "graph(%self : T,\n      %x : Tensor):" possibly over several lines.
        header = ""
        while self.pos < len(self.lines):
            header += self.lines[self.pos].strip()
            self.pos += 1
            if header.endswith("):"):
                break
        inputs = split_values(header[len("graph(") : -2])
        for v in inputs:
            self.values[v.name] = v
        nodes, outputs = self._block(indent=2, top=True)
        return BlockSnapshot(tuple(inputs), tuple(nodes), outputs)

    def _block(self, indent: int, top: bool) -> tuple[list[NodeSnapshot], tuple[str, ...]]:
        nodes: list[NodeSnapshot] = []
        while self.pos < len(self.lines):
            line = self.lines[self.pos]
            if top:
                match = _GRAPH_RETURN_RE.match(line)
                if match:
                    self.pos += 1
                    return nodes, _names(match.group("outs"))
            else:
                match = _RETURN_RE.match(line)
                if match and len(line) - len(line.lstrip(" ")) == indent:
                    self.pos += 1
                    return nodes, _names(match.group("outs"))
            nodes.append(self._node(indent))
        raise ValueError("graph text ended inside a block")

    def _node(self, indent: int) -> NodeSnapshot:
        line = self.lines[self.pos]
        self.pos += 1
        # A printed constant may continue over several lines (multi-line tensor values).
        while self.pos < len(self.lines) and not self._starts_item(self.lines[self.pos], indent):
            line += " " + self.lines[self.pos].strip()
            self.pos += 1
        parts = self.seen.get(line)
        if parts is None:
            parts = self.earlier.get(line)
            if parts is None:
                parts = line_parts(line)
            self.seen[line] = parts
        width, printed, outputs, attributes, inputs, source, constant, head = parts
        if width != indent:
            raise ValueError(f"unexpected IR line: {line[:80]}")
        node_id = self.next_id
        self.next_id += 1
        self.in_order.append(None)  # filled once the node (after its blocks) is built
        walked = self.walked.kinds[node_id] if node_id < len(self.walked.kinds) else ""
        # Nodes holding a subgraph print as `prim::fork_0` and list it after the graph.
        if walked != printed and not re.fullmatch(re.escape(walked) + r"_\d+", printed):
            raise ValueError(
                f"node {node_id} is {printed} in the printout but "
                f"{self.walked.kinds[node_id] if node_id < len(self.walked.kinds) else 'absent'} "
                "in the graph walk"
            )
        values = self.values
        for v in outputs:
            values[v.name] = v
        blocks: list[BlockSnapshot] = []
        if walked in BLOCK_KINDS:
            while self.pos < len(self.lines):
                header = _BLOCK_RE.match(self.lines[self.pos])
                if (
                    header is None
                    or len(self.lines[self.pos]) - len(self.lines[self.pos].lstrip(" "))
                    != indent + 2
                ):
                    break
                self.pos += 1
                params = split_values(header.group("params"))
                for v in params:
                    values[v.name] = v
                sub_nodes, sub_outputs = self._block(indent + 4, top=False)
                blocks.append(BlockSnapshot(tuple(params), tuple(sub_nodes), sub_outputs))
        node = NodeSnapshot(
            node_id,
            walked,
            inputs,
            outputs,
            attributes,
            constant,
            self.walked.scopes[node_id],
            source,
            self.walked.schemas[node_id],
            tuple(blocks),
            head,
        )
        self.in_order[node_id] = node
        return node

    def _starts_item(self, line: str, indent: int) -> bool:
        stripped = line.lstrip(" ")
        width = len(line) - len(stripped)
        if width <= indent:
            return True
        return bool(_LINE_RE.match(line) or _BLOCK_RE.match(line) or _RETURN_RE.match(line))
