"""The IR pane colours what it shows, when it shows it (issue 23): a step of a big graph
costs the lines on screen, not a pass over its whole text after every run."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from freezeview.ui.lexer import TorchScriptIRLexer

from .conftest import step_graph, wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


@pytest.mark.slow
async def test_a_big_step_is_lexed_as_far_as_it_is_seen(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        step = screen.steps[0]
        graph = step_graph(screen, 0)
        lines = graph.text.splitlines()
        big_text = "\n".join(lines * (20_000 // len(lines) + 1)) + "\n"  # ~20k lines
        big_graph = dataclasses.replace(graph, text=big_text)
        big = dataclasses.replace(step, graph=-1)  # a key of its own
        known = screen.session.known_graph
        monkeypatch.setattr(
            screen.session, "known_graph", lambda key: big_graph if key == -1 else known(key)
        )

        lexed: list[int] = []
        original = TorchScriptIRLexer.get_tokens

        def counting(self, text, *args, **kwargs):  # type: ignore[no-untyped-def]
            lexed.append(len(text))
            return original(self, text, *args, **kwargs)

        monkeypatch.setattr(TorchScriptIRLexer, "get_tokens", counting)
        screen.ir_pane.show_step(screen.run_id + 100, [big], 0)  # a run of its own
        await pilot.pause(0.5)
        await pilot.press("pagedown", "pagedown")
        await pilot.pause(0.5)
        ir = screen.ir
        assert ir.line_count == big_text.count("\n")
        # Three screens were shown (about 130 lines): a few hundred lines' worth lexed
        # at most, never the 20k-line document.
        assert sum(lexed) < len(big_text) / 20, (sum(lexed), len(big_text))
        shown = ir.render_line(0)  # coloured as before: the IR lexer's styles
        assert len({segment.style for segment in shown}) > 1
        # Paged on through some 2,000 lines: the drawn lines kept stay bounded (each a
        # Strip in reference cycles, walked by the deep collection at every r).
        for _ in range(40):
            await pilot.press("pagedown")
        await pilot.pause(0.2)
        assert len(ir._full) <= 1000 and len(ir._cache) <= 600, (len(ir._full), len(ir._cache))


async def test_a_big_graph_is_read_whole_off_the_event_loop(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An attribute's marks and a line's node facts read the whole graph (hundreds of ms
    at 70k nodes): above the pane's threshold they are read in a worker, and the marks,
    the inspector's count of them and the node's facts still arrive."""
    import threading

    import freezeview.session as facts  # the screen reads the facts through the session
    from freezeview.ui.widgets import ir_pane

    readers: list[tuple[str, str]] = []
    for name in ("attribute_node_ids", "node_facts", "line_index"):
        original = getattr(facts, name)

        def noting(*args, _original=original, _name=name, **kwargs):  # type: ignore[no-untyped-def]
            readers.append((_name, threading.current_thread().name))
            return _original(*args, **kwargs)

        monkeypatch.setattr(facts, name, noting)
    monkeypatch.setattr(ir_pane, "_SYNC_FACTS_NODES", 0)  # every graph counts as big
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        readers.clear()
        screen.model_tree.focus()
        assert screen.model_tree.select_path("calls")
        for _ in range(100):  # the marks, then (MarksShown) the inspector's count of them
            await pilot.pause(0.02)
            count = f"{len(screen.ir.marked_lines)} line(s)"
            if screen.ir.marked_lines and count in screen.inspector.plain_text():
                break
        marked = [screen.ir.plain_lines()[i] for i in sorted(screen.ir.marked_lines)]
        assert any('prim::GetAttr[name="calls"]' in line for line in marked)
        assert f"{len(screen.ir.marked_lines)} line(s)" in screen.inspector.plain_text()

        screen.ir.focus()
        await pilot.pause()
        text = next(t for t in screen.ir.plain_lines() if " = aten::mul" in t)
        screen.ir.cursor_line = screen.ir.plain_lines().index(text)
        for _ in range(50):
            await pilot.pause(0.02)
            if "aten::mul" in screen.inspector.plain_text():
                break
        assert "aten::mul" in screen.inspector.plain_text()  # the node's facts
        assert {name for name, _ in readers} == {"attribute_node_ids", "node_facts", "line_index"}
        assert all(thread != threading.main_thread().name for _, thread in readers), readers


async def test_a_big_document_shown_again_is_not_split_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A re-run shows the loaded model's IR again (70k lines at L48): its lines are
    kept, not split again on the ``r`` key."""
    from freezeview.ui.widgets import ir_view

    text = "".join(f"  %{i} : Tensor = aten::relu(%x)\n" for i in range(3000))
    other = text.replace("relu", "gelu")
    splits: list[int] = []

    class Counted(str):
        def splitlines(self, keepends: bool = False) -> list[str]:
            splits.append(len(self))
            return super().splitlines(keepends)

    view = ir_view.IRView()
    monkeypatch.setattr(view, "refresh", lambda *a, **k: view)
    loaded, step = Counted(text), Counted(other)
    for shown in (loaded, step, loaded, step, loaded):
        view.set_document(shown, "ir")
        assert view.line_count == 3000
    assert len(splits) == 2


async def test_a_big_document_shown_again_draws_its_lines_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``r`` shows the loaded model's IR again: the lines on screen were drawn when it
    was shown before (a millisecond each through rich, 20-30 ms a screen on the key)
    and are drawn from what was kept, for the mode they were drawn in."""
    from textual.app import App, ComposeResult

    from freezeview.ui.widgets import ir_view

    text = "".join(f"  %{i} : Tensor = aten::relu(%x)\n" for i in range(3000))
    other = text.replace("relu", "gelu")
    drawn: list[str] = []
    highlight = ir_view.highlight_line

    def counting(line: str, mode: str):  # type: ignore[no-untyped-def]
        drawn.append(line)
        return highlight(line, mode)

    monkeypatch.setattr(ir_view, "highlight_line", counting)

    class Host(App[None]):
        def compose(self) -> ComposeResult:
            yield ir_view.IRView()

    async with Host().run_test(size=(120, 30)) as pilot:
        view = pilot.app.query_one(ir_view.IRView)
        for shown in (text, other, text):
            view.set_document(shown, "ir")
            await pilot.pause()
            await pilot.pause()
        relu = [line for line in drawn if "relu" in line]
        gelu = [line for line in drawn if "gelu" in line]
        assert len(gelu) >= 20  # a screen of the other document
        assert len(relu) == len(set(relu)) >= 20  # each line of the first drawn once
        view.set_document(text, "code")  # drawn in another mode: drawn again
        await pilot.pause()
        await pilot.pause()
        assert len([line for line in drawn if "relu" in line]) > len(relu)
