"""A drawing laid out by Graphviz on a grid of terminal cells, for the app's graph view.

- :mod:`.layout`: :func:`~.layout.layout_graph`, a snapshot (or a diff) laid out by
  ``dot -Tjson0`` with boxes measured in cells, edges routed cell by cell, coarser levels
  on an overrun;
- :mod:`.fit`: a module level fitted to the view's pane (one line a box, long chains
  folded into columns);
- :mod:`.values`: the layout's plain, torch-free values (:class:`~.values.GraphLayout`),
  which cross from the engine process to the screen's.

Uses :mod:`..dot` and :mod:`..folding`.
"""
