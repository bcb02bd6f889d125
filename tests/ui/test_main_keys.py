"""The main screen's keys (``ui/screens/main_keys.py``): each bound once.

A key of the main screen works wherever the focus is; the widget with the focus may give
one a meaning of its own there (the graph view's ``d`` and ``/``, the passes list's
``space``), but never a second binding to the same end (the model tree's ``space`` once
stood beside the screen's).
"""

from __future__ import annotations

from collections import defaultdict

import pytest
from textual.binding import Binding
from textual.dom import DOMNode

from freezeview.ui import FreezeviewApp

pytestmark = pytest.mark.asyncio

#: The keys a focused widget gives a meaning of its own, over the screen's: the graph
#: view's ``d`` (its graph or its diff) and ``/`` (find a box), which the help screen
#: lists, and the passes list's ``space`` (tick the highlighted pass, as any of
#: Textual's selection lists does).
OWN_MEANINGS = {
    "d": (("GraphView", "toggle_diff"), ("MainScreen", "cycle_view")),
    "slash": (("GraphView", "search"), ("MainScreen", "search")),
    "space": (("PassList", "select"), ("MainScreen", "toggle_preserve")),
}


def _bindings(node: DOMNode) -> list[tuple[Binding, bool]]:
    """The bindings ``node``'s classes declare, each key of a ``"up,k"`` binding on its
    own, with whether freezeview declares it (or Textual)."""
    return [
        (binding, klass.__module__.startswith("freezeview."))
        for klass in reversed(type(node).__mro__)
        for binding in Binding.make_bindings(vars(klass).get("BINDINGS", []))
    ]


@pytest.mark.slow  # the app itself, about half a second
async def test_each_key_of_the_main_screen_is_bound_once() -> None:
    """At every focus the main screen offers (the graph view shown too), each key of the
    screen's and the app's is taken by one enabled binding along the focus chain, but
    for the widgets' own meanings above."""
    app = FreezeviewApp(show_timings=False)  # no model: the screen, its widgets, its keys
    async with app.run_test(size=(160, 48)) as pilot:
        screen = app.main_screen
        await pilot.pause()
        focuses = list(screen.focus_chain)
        await pilot.press("v")  # the graph view, and its keys, in the model pane's place
        await pilot.pause()
        focuses += screen.focus_chain
        assert screen.graph_view.canvas_view in focuses and screen.model_tree in focuses
        keys = {b.key for b, ours in _bindings(screen) + _bindings(app) if ours}
        doubles: dict[str, set[tuple[tuple[str, str], ...]]] = defaultdict(set)
        for widget in focuses:
            takers: dict[str, list[tuple[str, str]]] = defaultdict(list)
            for node in widget.ancestors_with_self:
                for binding, ours in _bindings(node):
                    # Textual's own keys freezeview does not want are switched off the
                    # way Textual offers (check_action, as the tree's space); one of
                    # freezeview's own counts switched off too: it is bound twice.
                    taken = ours or node.check_action(binding.action, ()) is not False
                    if binding.key in keys and taken:
                        takers[binding.key].append((type(node).__name__, binding.action))
            for key, owners in takers.items():
                if len(owners) > 1:
                    doubles[key].add(tuple(owners))
        assert dict(doubles) == {key: {owners} for key, owners in OWN_MEANINGS.items()}
        # What the footer and the help screen read: the screen's space is the one there.
        await pilot.press("v")
        screen.model_tree.focus()
        await pilot.pause()
        space = screen.active_bindings["space"]
        assert space.node is screen and space.binding.action == "toggle_preserve"
