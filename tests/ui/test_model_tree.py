"""The Model pane's tree (``ui/widgets/model_tree.py``): its header at real sizes."""

from __future__ import annotations

from pathlib import Path

import pytest

from freezeview.ui.views import AttrView

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


def _views(inlined: int, kept: int, dropped: int) -> list[AttrView]:
    counts = {"inlined": inlined, "kept": kept, "dropped": dropped}
    return [
        AttrView(f"layers.{i}.{status}", "parameter", "Tensor", status)
        for status, n in counts.items()
        for i in range(n)
    ]


@pytest.mark.parametrize(
    ("inlined", "kept", "dropped", "status_filter"),
    [(374, 49, 258, "all"), (12288, 2048, 10240, "all"), (374, 49, 258, "dropped")],
)
@pytest.mark.slow
async def test_the_header_fits_at_160_columns(
    small_pt: Path,
    tmp_path: Path,
    inlined: int,
    kept: int,
    dropped: int,
    status_filter: str,
) -> None:
    """An L48 encoder's counts (and a 2,048-block stack's) show whole in the header."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.main_screen.model_tree
        tree.show("transformer_encoder_L48.pt", _views(inlined, kept, dropped))
        tree.status_filter = status_filter
        await pilot.pause()
        label = tree.root.label.plain
        for n, status in ((inlined, "inlined"), (kept, "kept"), (dropped, "dropped")):
            assert f"{n} {status}" in label
        # The root's line is "▼ " and the label: all of it within the tree's width.
        assert 2 + len(label) <= tree.scrollable_content_region.width, label


@pytest.mark.parametrize("status_filter", ["all", "dropped"])
@pytest.mark.slow
async def test_the_header_fits_at_80_columns(
    small_pt: Path, tmp_path: Path, status_filter: str
) -> None:
    """On a narrow terminal the tree has the whole width (its tab): an L96 encoder's
    counts still show whole, before and after the tab is chosen."""
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=(80, 24)) as pilot:
        await wait_ready(pilot)
        screen = app.main_screen
        tree = screen.model_tree
        tree.show("transformer_encoder_L96.pt", _views(24576, 4096, 20480))
        tree.status_filter = status_filter
        screen.narrow_pane = "model"
        await pilot.pause()
        await pilot.pause()
        label = tree.root.label.plain
        for n, status in ((24576, "inlined"), (4096, "kept"), (20480, "dropped")):
            assert f"{n} {status}" in label
        width = tree.scrollable_content_region.width
        assert width > 40 and 2 + len(label) <= width, (label, width)


@pytest.mark.slow
async def test_only_the_nodes_shown_are_made(small_pt: Path, tmp_path: Path) -> None:
    """An L48-sized explanation (48 blocks of 200 attributes) makes the rows that show,
    not one per attribute; a module's rows are made when it opens, and selecting a
    deep attribute opens its way to it."""
    views = [AttrView("layers", "submodule", "ModuleList", "kept")]
    for i in range(48):
        views.append(AttrView(f"layers.{i}", "submodule", "Block", "kept"))
        views += [
            AttrView(f"layers.{i}.p{j}", "parameter", "Tensor", "inlined") for j in range(200)
        ]
    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.main_screen.model_tree
        tree.show("encoder", views)
        await pilot.pause()
        made = len(tree._tree_nodes)  # Textual's own count of the nodes made
        assert made < 100, made  # root, layers and its 48 blocks
        assert tree.select_path("layers.47.p199")
        await pilot.pause()
        await pilot.pause()
        assert tree.selected_path == "layers.47.p199"
        assert len(tree._tree_nodes) < made + 250  # that block's rows only
        block = next(n for n in tree.root.children[0].children if n.data.path == "layers.3")  # type: ignore[union-attr]
        block.expand()
        await pilot.pause()
        assert len(block.children) == 200


def _stack(blocks: int) -> list[AttrView]:
    """A stack of blocks as nn.Sequential names them: "0.0.weight", "0.1.weight", ..."""
    return [
        AttrView(f"{i}.{part}.weight", "parameter", "Tensor", status)
        for i in range(blocks)
        for part, status in ((0, "inlined"), (1, "dropped"))
    ]


async def test_laying_out_a_big_tree_draws_only_the_lines_shown(
    small_pt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Textual measured every line's label by drawing it whenever the tree's lines were
    laid out again (0.5 s of the event loop on a 2,048-block stack's explanation). The
    tree gives each label's width without drawing it, the same width Textual's drawing
    gives, expanded or not; only the lines on screen are drawn."""
    from textual.widgets import Tree

    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.main_screen.model_tree
        views = _stack(1500)
        drawn: list[object] = []
        render_label = type(tree).render_label

        def counted(self: Tree, node: object, *args: object) -> object:
            drawn.append(node)
            return render_label(self, node, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(type(tree), "render_label", counted)
        tree.show("stack.pt", views)
        await pilot.pause()
        lines = tree.last_line + 1
        assert lines > 1500  # the root and the blocks
        assert 0 < len(drawn) < 200, (len(drawn), lines)
        monkeypatch.undo()
        nodes = [tree.get_node_at_line(i) for i in range(lines)]
        for node in nodes[:50] + nodes[-50:]:
            assert node is not None
            assert tree.get_label_width(node) == Tree.get_label_width(tree, node)
            node.toggle()
            assert tree.get_label_width(node) == Tree.get_label_width(tree, node)


async def test_a_new_explanation_relabels_the_rows_it_changes_in_place(
    small_pt: Path, tmp_path: Path
) -> None:
    """A toggle changes a few verdicts of thousands: the rows stay (the same nodes, the
    cursor where it was), the changed row reads its new status, an unchanged row is not
    drawn again; a change of the rows shown (a filter, a row gone) builds the tree anew."""
    import dataclasses

    app = app_for(small_pt, tmp_path)
    async with app.run_test(size=SIZE) as pilot:
        await wait_ready(pilot)
        tree = app.main_screen.model_tree
        views = _stack(300)
        tree.show("stack.pt", views)
        await pilot.pause()
        tree.select_path("7.0.weight")
        tree.select_path("7.1.weight")
        await pilot.pause()
        made = dict(tree._made)
        labels = {path: node.label for path, node in made.items()}
        changed = dataclasses.replace(views[15], status="kept", preserved=True)
        assert changed.path == "7.1.weight"
        again = [changed if v is views[15] else dataclasses.replace(v) for v in views]
        tree.show("stack.pt", again)
        await pilot.pause()
        assert tree._made == made and all(tree._made[p] is n for p, n in made.items())
        node = tree._made[changed.path]
        assert node.data is changed and "kept" in node.label.plain and "★" in node.label.plain
        assert tree._made["7.0.weight"].label is labels["7.0.weight"]  # not drawn again
        assert tree.selected_path == "7.1.weight"
        assert "1 kept" in tree.root.label.plain
        # Rows shown differ: built anew.
        tree.status_filter = "dropped"
        await pilot.pause()
        dropped = dict(tree._made)
        tree.show(
            "stack.pt",
            [
                dataclasses.replace(v, status="inlined") if v.path == "3.1.weight" else v
                for v in again
            ],
        )
        await pilot.pause()
        assert "3.1.weight" not in tree._made
        assert tree._made["4"] is not dropped["4"]  # every row made anew
