"""The app's engine side: one model opened, and every torch call the app makes.

What lives here runs where torch runs, plus the screen's half of the wire:

- :mod:`.contract`: what any session offers the screen (:class:`EngineSession`) and the
  options a session is opened with (:class:`SessionOptions`);
- :mod:`.local`: :class:`Session`, the engine in this process (the Python API, tests);
- :mod:`.explain_turns`: explain in two turns, torch's statuses first and freezeview's
  reasons after, with the memo that spares a toggle from explaining again;
- :mod:`.engine_process` and :mod:`.spawn`: the child process ``freezeview MODEL.pt``
  keeps torch in, and how it is started; :mod:`.remote`: :class:`RemoteSession`, the
  screen's handle on it, with the same methods as :class:`Session`;
- the values that cross, each next to its wire format: :mod:`.summaries` and
  :mod:`.summaries_wire` (what the widgets draw), :mod:`.graph_wire` (a step's graph in
  slices), :mod:`.canvas` (a graph drawn with characters) and :mod:`.layouts` (the
  graph view's pictures, laid out where the engine runs);
- :mod:`.collector`: the screen process's garbage-collector policy for what arrives.

The screen (:mod:`freezeview.ui`) imports the engine only through the names below.
Importing this package imports no torch: the names that need it load on first use.
"""
