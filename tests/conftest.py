"""Shared pytest set-up for freezeview's tests."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

# Test helpers (`oracle`, `corpus`) are imported by name from this directory, whether or
# not pytest puts it on sys.path itself (it does not once tests/ becomes a package).
_TESTS = str(Path(__file__).resolve().parent)
if _TESTS not in sys.path:
    sys.path.insert(0, _TESTS)

# An error in the app (a key's action, a handler, a render) ends it under test, as
# Textual does, so the test fails; users get a sentence and a log file instead
# (freezeview/ui/failures.py). Set here, so the apps tests start in tmux inherit it.
os.environ.setdefault("FREEZEVIEW_STRICT_UI", "1")


@pytest.fixture(autouse=True)
def _no_counts_from_earlier_tests() -> None:
    """Each test diffs its own steps: none takes counts an earlier test's run found."""
    from freezeview.engine.freeze.steps import forget_known_counts

    forget_known_counts()


def pytest_configure(config: pytest.Config) -> None:
    """Ignore torch's TracerWarning (tracing a model warns at every build) where tests run.

    The filter names a torch class, and pytest imports a filter's class to read it: in
    pyproject.toml it made xdist's controller, which runs no test, import torch (1.5 s
    before any worker starts)."""
    controller = getattr(config.option, "numprocesses", None) and not hasattr(config, "workerinput")
    if not controller:
        config.addinivalue_line("filterwarnings", "ignore::torch.jit.TracerWarning")
        _keep_refreshed_operators()
    # At its end pytest collects garbage five times over to find unraisable exceptions:
    # with a worker's heap after a thousand tests, seconds at the end of every run that
    # one full collection does as well (the count is the knob pytest keeps for that).
    try:
        from _pytest.unraisableexception import gc_collect_iterations_key
    except ImportError:  # another pytest: its own count
        return
    config.stash[gc_collect_iterations_key] = 1


#: Operator objects torch replaced while torch.jit's builtin table still names them.
_REPLACED_OPERATORS: list[object] = []


def _keep_refreshed_operators() -> None:
    """Keep alive the operator objects torch drops when it refreshes an operator packet.

    ``torch.library`` refreshes a packet when a library defines a second overload of an
    operator (importing torch's converter, as tests/engine/migrate/test_migration.py
    does, refreshes four ``quantized_decomposed`` packets). The old operator object is freed, but
    ``torch.jit``'s table of builtins keeps its ``id``: an object that later gets the same
    address (a ``Conv2d``'s padding list, say) is taken for that builtin and scripting the
    module fails with "builtin cannot be used as a value", at random, in any later test of
    the process. freezeview itself imports the converter only in its conversion's child
    process, which scripts nothing. Tests script models all the time: they hold the old
    objects, so no address is reused.
    """
    import torch._ops

    refresh = getattr(torch._ops, "_refresh_packet", None)
    if refresh is None or getattr(refresh, "keeps_replaced", False):
        return

    def refresh_keeping(packet: object) -> object:
        _REPLACED_OPERATORS.append(packet._op)  # type: ignore[attr-defined]
        return refresh(packet)

    refresh_keeping.keeps_replaced = True  # type: ignore[attr-defined]
    torch._ops._refresh_packet = refresh_keeping


def _shared_work(item: pytest.Item) -> str | None:
    """The work ``item`` shares with other tests, as an xdist group name (None: nothing).

    - a module-scoped fixture (the bad-input batch, the fuzz regressions' batch, models
      saved by a subprocess, the JSON documents): run on several workers, it runs on each;
    - a corpus case (``case`` parameter): each process scripts a case once and copies
      it for every later test (``tests/corpus/_case.py``), so one worker per case.
    """
    info = getattr(item, "_fixtureinfo", None)
    if info is not None:
        for name in info.names_closure:
            if any(d.scope == "module" for d in info.name2fixturedefs.get(name, ())):
                return f"{Path(item.nodeid.split('::')[0]).stem}.{name}"
    callspec = getattr(item, "callspec", None)
    case_type = getattr(sys.modules.get("corpus._case"), "Case", None)
    case = callspec.params.get("case") if callspec is not None else None
    if case_type is not None and isinstance(case, case_type):
        return f"case-{case.name}"
    return None


# First: xdist's own hook reads the marks to name each test's group.
@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark tests that share expensive work with one xdist group per piece of work.

    ``make test`` runs ``-n 3 --dist loadgroup``: each group runs on one worker, so the
    work is done once per run instead of once per worker. Without ``--dist loadgroup``
    the marks change nothing.
    """
    for item in items:
        group = _shared_work(item)
        if group is not None:
            item.add_marker(pytest.mark.xdist_group(group))
    # xdist hands out the work in this order (make runs it with --no-loadscope-reorder):
    # the key walk's group first (minutes of a worker that mostly waits on the app's
    # frames: started last it would be the run's tail), then the long poles (a test of a
    # minute collected last would leave the other workers idle for most of that minute
    # at the end), then the shared-work groups, largest first, then single tests.
    sizes: dict[str, int] = {}
    for item in items:
        name = _group_of(item)
        if name is not None:
            sizes[name] = sizes.get(name, 0) + 1

    def order(item: pytest.Item) -> tuple[int, int, str]:
        name = _group_of(item)
        if name == "key-walk":
            return (0, 0, "")
        if item.get_closest_marker("long_pole") is not None:
            return (1, 0, "")
        if name is not None:
            return (2, -sizes[name], name)
        return (3, 0, "")

    items.sort(key=order)


def _group_of(item: pytest.Item) -> str | None:
    """The item's xdist group (None: it runs on its own)."""
    mark = item.get_closest_marker("xdist_group")
    if mark is None:
        return None
    return str(mark.args[0] if mark.args else mark.kwargs.get("name", ""))
