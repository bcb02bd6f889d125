"""The app's screens: the main screen, its keys and its runs of the plan; help; migrate.

- :mod:`.main`: the main screen: the panes, every key, the routing of the widgets' and
  the workers' messages, the one failure handler;
- :mod:`.main_keys`: the main screen's keys, one table the footer, help and palette read;
- :mod:`.run_state`: the screen's runs of the plan as one public object (:class:`RunState`);
- :mod:`.node_times`: the run's node times, asked once per graph (the graph view's heat
  overlay and the inspector's time rows read them);
- :mod:`.delivery`: what ``g`` and ``e`` wrote, and how it reaches the user;
- :mod:`.help`: the help screen (``?``), generated from the bindings;
- :mod:`.migrate`: the migrate screen (``m``): will the model survive ``torch.export``,
  the migrations found (:class:`MigrationState`) and the ``.pt2`` written on request.
"""
