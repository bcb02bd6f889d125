"""A Pygments lexer for TorchScript IR, as ``str(graph)`` prints it.

freezeview shows IR in its IR pane with this lexer (through rich). Pygments has no
lexer for TorchScript IR, so freezeview carries its own: value names (``%x.1``), types
after ``:``, operator kinds (``aten::``, ``prim::``, other namespaces), node attributes in
square brackets (``[value=1]``, ``[name="weight"]``), constants, the ``graph(``/``block0(``/
``->``/``return`` structure and the ``# file.py:12:4`` source comments torch appends.
"""

from __future__ import annotations

from typing import ClassVar

from pygments.lexer import RegexLexer, bygroups, default, include
from pygments.token import (
    Comment,
    Keyword,
    Name,
    Number,
    Operator,
    Punctuation,
    String,
    Text,
    Whitespace,
)

__all__ = ["TorchScriptIRLexer"]

_TYPE_CHARS = r"[\w.?\[\](),\s]"


class TorchScriptIRLexer(RegexLexer):
    """Highlight TorchScript IR printouts (``print(module.graph)``).

    Tokens used: ``Name.Variable`` for values, ``Keyword.Type`` for types,
    ``Name.Function`` for ``aten::`` operators, ``Name.Builtin`` for ``prim::`` nodes,
    ``Name.Namespace`` for other kinds, ``Name.Attribute`` for node attribute names,
    ``Number``/``String``/``Keyword.Constant`` for constant values and ``Comment.Single``
    for source comments.
    """

    name = "TorchScript IR"
    aliases: ClassVar[list[str]] = ["torchscript-ir", "tsir"]
    filenames: ClassVar[list[str]] = ["*.tsir"]
    mimetypes: ClassVar[list[str]] = ["text/x-torchscript-ir"]

    tokens: ClassVar[dict[str, list]] = {  # type: ignore[type-arg]
        "root": [
            (r"\n", Whitespace),
            (r"[ \t]+", Whitespace),
            # `# /path/model.py:12:4` (source comment) — everything to the end of line.
            (r"#[^\n]*", Comment.Single),
            (r"\b(graph|block\d+)(\()", bygroups(Keyword, Punctuation)),
            (r"\breturn\b", Keyword),
            (r"->", Operator),
            (r"(%[\w.]+)(\s*)(:)", bygroups(Name.Variable, Whitespace, Punctuation), "type"),
            (r"%[\w.]+", Name.Variable),
            (r"\baten::\w+", Name.Function),
            (r"\bprim::\w+", Name.Builtin),
            (r"\b[a-z_]\w*::\w+", Name.Namespace),
            (r"\[", Punctuation, "attrs"),
            (r"=", Operator),
            (r"[(),]", Punctuation),
            (r"[^\s%#()\[\],=]+", Text),
        ],
        # After `%name :` comes a type up to `=`, `,` at depth 0, `)` closing the list,
        # or the end of line; types nest brackets (`Dict(str, Tensor)`, `int[]`).
        "type": [
            (r"[ \t]+", Whitespace),
            (r"\(", Keyword.Type, "type-paren"),
            (r"[\w.?\[\]]+", Keyword.Type),
            default("#pop"),
        ],
        "type-paren": [
            (r"\(", Keyword.Type, "#push"),
            (r"\)", Keyword.Type, "#pop"),
            (r"[^()\n]+", Keyword.Type),
            (r"\n", Whitespace, "#pop"),
        ],
        # Node attributes: `[value=1]`, `[name="weight"]`, `[value=<Tensor>]`,
        # `[value=[1, 1]]`, `[value=2.]`.
        "attrs": [
            (r"\]", Punctuation, "#pop"),
            (r"(\w+)(=)", bygroups(Name.Attribute, Operator)),
            include("literal"),
            (r"[,\s]+", Punctuation),
            (r"[^\]\n]", Text),
        ],
        "literal": [
            (r'"(\\\\|\\"|[^"])*"', String.Double),
            (r"'(\\\\|\\'|[^'])*'", String.Single),
            (r"<[^>\n]*>", Keyword.Constant),
            (r"\b(None|True|False)\b", Keyword.Constant),
            (r"-?\d+\.\d*(e[+-]?\d+)?|-?\d*\.\d+(e[+-]?\d+)?|-?\d+e[+-]?\d+", Number.Float),
            (r"-?\d+", Number.Integer),
            (r"\[", Punctuation, "list"),
        ],
        "list": [
            (r"\]", Punctuation, "#pop"),
            include("literal"),
            (r"[,\s]+", Punctuation),
            (r"[^\]\n]", Text),
        ],
    }
