"""The written-constant warning of ``explain`` and ``freeze``: folded attributes the frozen
graph still writes, each with its writing node and source line.

A folded attribute that forward writes through a list, a dict or a tuple, or inside a
``torch.jit.fork`` body, becomes a constant the frozen model mutates on every call
(reason ``written-constant``, docs/reasons.md). Both commands print the same block after
their tables, however the tables group their rows.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console

    from ..engine.reasons import ConstantWrite

__all__ = ["print_written_warning"]


def print_written_warning(console: Console, writes: list[ConstantWrite]) -> None:
    """Print the warning for ``writes`` (nothing when there is none).

    ``warning: N folded attributes are still written by the frozen graph: ...``, then one
    line per writing node (the attribute, the node's kind, method and ``file:line``) with
    the source line's text under it, then where the docs say what to change.
    """
    if not writes:
        return
    from rich.markup import escape
    from rich.text import Text

    from ..engine.reasons import WRITTEN_HELP, written_warning

    count = len(dict.fromkeys(w.path for w in writes))
    console.print()
    console.print(f"[bold red]warning:[/] [bold]{escape(written_warning(count))}[/]")
    width = max(len(w.path) for w in writes)
    for write in writes:
        line = Text("  ")
        line.append(f"{write.path:<{width}}", style="bold red")
        line.append(f"  written by {write.where()}")
        console.print(line)
        if write.reason.source_text:
            console.print(Text(f"  {'':<{width}}  | {write.reason.source_text}", style="green"))
    console.print(f"  [dim]what to change in the model: {WRITTEN_HELP}[/]")
