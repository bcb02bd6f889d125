"""The Model pane's tree (``ui/widgets/model_tree.py``): its header at real sizes."""

from __future__ import annotations

from pathlib import Path

import pytest
from textual.app import App, ComposeResult

from freezeview.session.summaries import AttrSummary
from freezeview.ui.widgets.model_tree import ModelTree

from .conftest import wait_ready
from .test_app import SIZE, app_for

pytestmark = pytest.mark.asyncio


class _TreeApp(App[None]):
    """The tree alone (no model loading beside it, whose explanation would show too);
    the names it asks to preserve."""

    def __init__(self) -> None:
        super().__init__()
        self.toggled: list[str] = []

    def compose(self) -> ComposeResult:
        yield ModelTree()

    def on_model_tree_preserve_toggled(self, message: ModelTree.PreserveToggled) -> None:
        self.toggled.append(message.path)


def _views(inlined: int, kept: int, dropped: int) -> list[AttrSummary]:
    counts = {"inlined": inlined, "kept": kept, "dropped": dropped}
    return [
        AttrSummary(f"layers.{i}.{status}", "parameter", "Tensor", status)
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
    views = [AttrSummary("layers", "submodule", "ModuleList", "kept")]
    for i in range(48):
        views.append(AttrSummary(f"layers.{i}", "submodule", "Block", "kept"))
        views += [
            AttrSummary(f"layers.{i}.p{j}", "parameter", "Tensor", "inlined") for j in range(200)
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
        assert len(tree._tree_nodes) < made + 150  # the range of that block's rows only
        block = next(n for n in tree.root.children[0].children if n.data.path == "layers.3")  # type: ignore[union-attr]
        block.expand()
        await pilot.pause()
        # 200 rows fold in two ranges of 100; a range's rows are made when it opens.
        assert [n.label.plain for n in block.children] == [
            "[p0 … p99]  100 rows",
            "[p100 … p199]  100 rows",
        ]
        block.children[1].expand()
        await pilot.pause()
        assert [n.data.path for n in block.children[1].children] == [  # type: ignore[union-attr]
            f"layers.3.p{j}" for j in range(100, 200)
        ]


def _blocks(blocks: int, parts: int) -> list[AttrSummary]:
    """:func:`_stack` with each block's own verdict (a submodule's), as an explanation
    gives it: the tree opens the top-level blocks unless they are folded in ranges."""
    modules = [AttrSummary(f"{i}", "submodule", "Block", "inlined") for i in range(blocks)]
    return modules + _stack(blocks, parts)


def _stack(blocks: int, parts: int = 2) -> list[AttrSummary]:
    """A stack of blocks as nn.Sequential names them: "0.0.weight", "0.1.weight", ...
    (even parts inlined, odd ones dropped)."""
    return [
        AttrSummary(f"{i}.{part}.weight", "parameter", "Tensor", ("inlined", "dropped")[part % 2])
        for i in range(blocks)
        for part in range(parts)
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
        views = _blocks(60, parts=30)  # 60 top-level modules, shown open: 1,861 lines
        drawn: list[object] = []
        render_label = type(tree).render_label

        def counted(self: Tree, node: object, *args: object) -> object:
            drawn.append(node)
            return render_label(self, node, *args)  # type: ignore[arg-type]

        monkeypatch.setattr(type(tree), "render_label", counted)
        tree.show("stack.pt", views)
        await pilot.pause()
        lines = tree.last_line + 1
        assert lines > 1800  # the root, the blocks and their rows
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
        views = _stack(300)  # the root's 300 rows fold in ranges of 100
        tree.show("stack.pt", views)
        await pilot.pause()
        tree.select_path("7.0.weight")
        tree.select_path("7.1.weight")
        tree.select_path("250.1.weight")
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
        assert tree.selected_path == "250.1.weight"
        assert "1 kept" in tree.root.label.plain
        # The range holding the kept row says so; the others as they were.
        ranges = [n.label.plain for n in tree.root.children]
        assert ranges == [
            "[0 … 99]  100 rows  1 kept",
            "[100 … 199]  100 rows",
            "[200 … 299]  100 rows",
        ]
        # Rows shown differ: built anew.
        tree.status_filter = "dropped"
        await pilot.pause()
        tree.select_path("4.1.weight")
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


async def test_thousands_of_rows_fold_in_ranges_a_selection_opens() -> None:
    """A 2,048-block stack opens on its ranges of 100 blocks (the rows of 8k made at
    once held the screen for a quarter of a second); past 10,000 rows, ranges of ranges.
    Selecting a row opens the ranges it is folded in; a range is not an attribute."""
    app = _TreeApp()
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one(ModelTree)
        tree.show("stack.pt", _blocks(2048, parts=3))
        await pilot.pause()
        assert len(tree._tree_nodes) == 21  # its ranges, nothing else
        labels = [node.label.plain for node in tree.root.children]
        assert labels[0] == "[0 … 99]  100 rows" and labels[-1] == "[2000 … 2047]  48 rows"
        assert tree.select_path("1234.2.weight")
        await pilot.pause()
        await pilot.pause()
        assert tree.selected_path == "1234.2.weight"
        assert len(tree._tree_nodes) < 21 + 100 + 10  # that range's blocks, one opened
        tree.focus()
        tree.move_cursor(tree.root.children[3])
        await pilot.pause()
        assert tree.selected_path is None and tree.selected_view is None
        await pilot.press("space")  # a range: nothing to preserve
        await pilot.pause()
        assert app.toggled == []

        many = [AttrSummary(f"big.p{j}", "parameter", "Tensor", "inlined") for j in range(12_000)]
        many[11_500] = AttrSummary("big.p11500", "parameter", "Tensor", "kept")
        tree.show("wide.pt", [AttrSummary("big", "submodule", "Wide", "inlined"), *many])
        await pilot.pause()
        big = tree.root.children[0]
        assert [n.label.plain for n in big.children] == [
            "[p0 … p9999]  10000 rows",
            "[p10000 … p11999]  2000 rows  1 kept",
        ]
        assert tree.select_path("big.p11500")
        await pilot.pause()
        await pilot.pause()
        assert tree.selected_path == "big.p11500"
        inner = big.children[1].children
        assert len(inner) == 20 and inner[15].label.plain == "[p11500 … p11599]  100 rows  1 kept"


async def test_the_trees_lines_are_freed_once_laid_out_again() -> None:
    """Textual's layout of a tree's lines left them in a reference cycle: frozen by the
    screen's collector, every layout of a big tree stayed until a deep sweep (16k
    objects a 2,048-block stack's explanation). Dropped, they go at once."""
    import gc
    import weakref

    app = _TreeApp()
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one(ModelTree)
        # 9k lines: enough young collections while they are laid out that the cycle,
        # made first, is among the oldest objects by the end (as on a big model).
        tree.show("stack.pt", _blocks(100, parts=90))
        await pilot.pause()
        lines = tree._tree_lines
        assert len(lines) > 9000
        last = weakref.ref(lines[-1])
        del lines
        gc.disable()  # nothing but reference counting frees it here
        try:
            tree.root.children[0].collapse()  # the lines laid out again
            assert last() is None
        finally:
            gc.enable()


async def test_a_big_models_rows_under_a_new_filter_are_laid_out_off_the_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """``f`` on a 2,048-block stack lays 45k verdicts out again (0.1 s): in a worker, and
    shown when it is done, unless the filter changed again by then."""
    import threading

    from freezeview.ui.widgets import model_tree

    app = _TreeApp()
    async with app.run_test(size=SIZE) as pilot:
        tree = app.query_one(ModelTree)
        views = _stack(3000)
        views[2001] = AttrSummary("1000.1.weight", "parameter", "Tensor", "kept")
        assert len(views) > model_tree.LAY_OUT_HERE
        tree.show("stack.pt", views)
        await pilot.pause()
        threads: list[str] = []
        lay_out = model_tree.lay_out

        def watched(*args: object) -> object:
            threads.append(threading.current_thread().name)
            return lay_out(*args)  # type: ignore[arg-type]

        monkeypatch.setattr(model_tree, "lay_out", watched)
        tree.status_filter = "inlined"
        tree.status_filter = "kept"  # before the first is laid out: it is not shown
        for _ in range(100):
            await pilot.pause(0.05)
            if "(" in tree.root.label.plain:  # the filter's note: "(showing kept)" as it fits
                break
        assert threads and threading.main_thread().name not in threads
        assert tree.selected_path is None
        assert [n.label.plain for n in tree.root.children] == ["1000"]
        assert tree.root.label.plain.endswith("kept)")
