"""The TorchScript IR lexer, on IR torch prints in this run."""

from __future__ import annotations

import torch
from pygments.token import Comment, Error, Keyword, Name, Number, String

from freezeview.ui.lexer import TorchScriptIRLexer
from freezeview.ui.widgets.ir_view import display_text, highlight_lines

from .models import Small


def _graphs() -> list[str]:
    module = torch.jit.script(Small().eval())
    inlined = module.forward.graph.copy()
    torch._C._jit_pass_inline(inlined)
    return [str(module.forward.graph), str(inlined), str(torch.jit.freeze(module).graph)]


def test_lexes_real_ir_without_errors_and_round_trips() -> None:
    for text in _graphs():
        tokens = list(TorchScriptIRLexer(stripnl=False, ensurenl=False).get_tokens(text))
        assert not [t for t in tokens if t[0] is Error]
        assert "".join(v for _, v in tokens) == text


def test_token_classes() -> None:
    text = (
        "graph(%self.1 : __torch__.M,\n      %x.1 : Tensor):\n"
        '  %w : Tensor = prim::GetAttr[name="weight"](%self.1)\n'
        "  %3 : int = prim::Constant[value=1]() # /src/m.py:7:21\n"
        "  %4 : Tensor = aten::add_(%w, %3, %3) # /src/m.py:8:8\n"
        "  %5 : float = prim::Constant[value=2.5]()\n"
        "  return (%4)\n"
    )
    tokens = [(t, v) for t, v in TorchScriptIRLexer().get_tokens(text) if v.strip()]
    kinds = dict((v, t) for t, v in tokens)
    assert kinds["%self.1"] is Name.Variable
    assert kinds["Tensor"] is Keyword.Type
    assert kinds["prim::GetAttr"] is Name.Builtin
    assert kinds["aten::add_"] is Name.Function
    assert kinds['"weight"'] is String.Double
    assert kinds["1"] is Number.Integer and kinds["2.5"] is Number.Float
    assert kinds["# /src/m.py:7:21"] is Comment.Single
    assert kinds["return"] is Keyword and kinds["graph"] is Keyword


def test_highlight_lines_keeps_every_line() -> None:
    for text in _graphs():
        lines = highlight_lines(text, "ir")
        # Every line, in order; only the per-clone type mangling is left out.
        assert [line.plain for line in lines] == display_text(text).splitlines()
