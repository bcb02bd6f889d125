"""A snapshot (or a diff) folded to a level of detail: the boxes freezeview draws.

A one-node-per-IR-op picture does not scale, so what is drawn is folded three ways:

- :mod:`.rows`: constants, constant lists and submodule reads folded into rows of the
  box that uses them;
- :mod:`.scopes`: each op's effective module scope, and the box a scope falls into at a
  level (one box per module ``d`` names deep);
- :mod:`.prepared`: what a snapshot's drawings share, computed once per snapshot
  (folding, scopes, edges by scope pair), and the boxes each level would count;
- :mod:`.plan`: :class:`~.plan.RenderOptions` (how to draw), the level chosen within the
  budget, the boxes a diff opens where freezing acted, the coarser level after an overrun;
- :mod:`.drawing`: the values drawn (:class:`~.drawing.Drawing` of
  :class:`~.drawing.Box`, :class:`~.drawing.BoxEdge`, :class:`~.drawing.Cluster`), plain and
  torch-free;
- :mod:`.module_boxes`: what a collapsed module's box says, and which clusters stay;
- :mod:`.build`: :func:`~.build.build_drawing`, a snapshot (and a diff) at a level made into
  a drawing.

Uses :mod:`..dot` (its settings and ceiling); :mod:`..pictures` and :mod:`..terminal` draw
what it builds.
"""
