"""Pictures written to files: SVG, PNG or DOT of a snapshot, a diff or both sides of one.

- :mod:`.dot_source`: a drawing written as DOT (colours by status, shapes, the legend);
- :mod:`.picture`: the DOT text of a snapshot's, a diff's or both sides' picture at a level;
- :mod:`.render`: the level planned, the picture handed to Graphviz (now or in the
  background), coarser levels drawn on an overrun or a Graphviz failure, the file written
  (``start_*`` / ``render_*``, :class:`~.render.RenderResult`);
- :mod:`.overlay`: what a picture carries over its boxes: a heat fill by each box's share
  of the forward's time, and an outline where the numbers move (:class:`~.overlay.Overlay`);
- :mod:`.svg_fit`: an SVG sized to the browser's window.

Uses :mod:`..dot` and :mod:`..folding`.
"""
