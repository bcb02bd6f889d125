"""The main screen's widgets talk by messages: what each posts when the user acts.

These are the messages a new widget (a graph view of the step shown, say) listens to
or posts; the screen routes them (``freezeview/ui/screens/main.py``).
"""

from __future__ import annotations

from pathlib import Path
from typing import TypeVar

import pytest
from textual.message import Message

from freezeview.ui.messages import Status
from freezeview.ui.widgets.ir_pane import IRPane
from freezeview.ui.widgets.model_tree import ModelTree
from freezeview.ui.widgets.steps_bar import StepsBar

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio

M = TypeVar("M", bound=Message)


def of_type(messages: list[Message], kind: type[M]) -> list[M]:
    """The messages of ``kind``, once each (the hook sees a message at every node it
    bubbles through)."""
    return list({id(m): m for m in messages if isinstance(m, kind)}.values())


async def test_each_widget_says_what_the_user_did(small_pt: Path, tmp_path: Path) -> None:
    app = app_for(small_pt, tmp_path)
    posted: list[Message] = []
    async with app.run_test(size=SIZE, message_hook=posted.append) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen

        posted.clear()
        await pilot.press("n")
        await pilot.pause()
        assert [m.index for m in of_type(posted, StepsBar.StepSelected)] == [1]
        assert screen.ir_pane.index == 1

        posted.clear()
        screen.model_tree.focus()
        assert screen.model_tree.select_path("scale")
        await pilot.pause()
        await pilot.pause()
        selected = of_type(posted, ModelTree.AttributeSelected)
        assert selected and selected[-1].path == "scale"
        view = selected[-1].view
        assert view is not None and view.status == "inlined"

        posted.clear()
        await pilot.press("space")
        await wait_ready(pilot)
        assert [m.path for m in of_type(posted, ModelTree.PreserveToggled)] == ["scale"]
        assert app.preserved == ("scale",)

        posted.clear()
        screen.steps_bar.passes.focus()
        await pilot.press("t")
        await pilot.pause()
        toggled = of_type(posted, StepsBar.PassToggled)
        assert len(toggled) == 1 and not toggled[0].on
        assert toggled[0].pass_id not in screen.enabled_passes()
        assert of_type(posted, StepsBar.PassesChanged)

        posted.clear()
        await pilot.press("f")
        await pilot.pause()
        assert "model tree shows: inlined" in [m.text for m in of_type(posted, Status)]

        posted.clear()
        screen.ir.focus()
        await pilot.pause()
        line = next(
            i
            for i, t in enumerate(screen.ir.plain_lines())
            if " = aten::" in t and i != screen.ir.cursor_line
        )
        screen.ir.cursor_line = line
        await pilot.pause()
        nodes = of_type(posted, IRPane.NodeSelected)
        assert nodes and nodes[-1].facts.node.kind.startswith("aten::")
