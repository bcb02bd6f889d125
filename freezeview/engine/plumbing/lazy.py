"""Names a package offers, imported from its modules on first use.

Each stage's ``__init__.py`` lists the names it offers to other stages and to users.
Importing them there would import torch with the package (most stages talk to torch),
and the app's screen process, which reads only the torch-free value modules of a stage,
must never do that. PEP 562's module ``__getattr__`` resolves a name when it is first
read instead; :func:`lazy_exports` builds that ``__getattr__`` (and ``__dir__``) from a
map of name -> module (or -> module and the name there, for a function offered under a
name of its own: one that shares its module's name would be hidden by the module, which
sits on its package under that name once imported).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["lazy_exports"]


def lazy_exports(
    package: str, names: Mapping[str, str | tuple[str, str]]
) -> tuple[Callable[[str], Any], Callable[[], list[str]]]:
    """The ``__getattr__`` and ``__dir__`` of a package offering ``names`` lazily.

    Args:
        package: the package's ``__name__``.
        names: each offered name -> the module of the package that defines it
            (``"snapshot_graph": "snapshot"``), or the module and the name it has
            there (``"export_model": ("export", "export")``).

    Returns:
        ``(__getattr__, __dir__)`` to assign at the package's top level.

    Example::

        __getattr__, __dir__ = lazy_exports(__name__, {"load_model": "loading"})
    """
    namespace = importlib.import_module(package).__dict__

    def __getattr__(name: str) -> Any:
        home = names.get(name)
        if home is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        module, there = (home, name) if isinstance(home, str) else home
        value = getattr(importlib.import_module(f"{package}.{module}"), there)
        namespace[name] = value
        return value

    def __dir__() -> list[str]:
        return sorted(set(namespace) | set(names))

    return __getattr__, __dir__
