"""The main screen's widgets, each owning its state and saying what happened by messages.

- :mod:`.model_tree`: the Model pane: modules, attributes, status badges, ``space``;
- :mod:`.steps_bar`: the Steps bar: passes with checkboxes and the timeline of steps;
- :mod:`.ir_pane`: the IR pane: the step as IR, ``.code`` or its diff;
- :mod:`.ir_view`: the IR pane's text view: highlighted lines, cursor, marks, search;
- :mod:`.ir_source`: what the IR pane's workers ask of the engine session;
- :mod:`.inspector`: the Inspector: the selected attribute, IR line or box;
- :mod:`.box_panel`: what the inspector shows for a graph-view box with no IR line;
- :mod:`.graph_view`: the graph view (``v``): a step's graph or diff, drawn in cells;
- :mod:`.graph_canvas_view`: the graph view's scrollable canvas;
- :mod:`.status_line`: the status line above the footer;
- :mod:`.keys_footer`: the footer of keys, rebuilt only when its keys change.
"""
