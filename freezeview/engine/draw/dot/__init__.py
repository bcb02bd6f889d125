"""Graphviz's ``dot``: its DOT text, the program run, and how much it lays out in time.

- :mod:`.text`: :class:`~.text.DotWriter`, DOT text as the ``graphviz`` package writes it,
  and :class:`~.text.GraphAttrs`, the graph-wide layout settings;
- :mod:`.run`: :func:`~.run.run_dot`, the program run on DOT text with a timeout, and its
  errors (missing, overran, failed), each one sentence for the user;
- :mod:`.queue`: :class:`~.queue.DotQueue`, runs in the background one at a time, killed
  with the work that asked for them;
- :mod:`.ceiling`: the box ceiling, how big a picture is worth handing to ``dot`` at all.

Knows nothing of snapshots or drawings: it is used by :mod:`..folding`, :mod:`..pictures`
and :mod:`..terminal`, and uses none of them.
"""
