"""Renamed public names: the old name keeps working for one release, with a warning.

When a public name is renamed (see ``docs/glossary.md``), its module keeps the old one as
an alias: :func:`module_aliases` gives the module a ``__getattr__`` that answers each old
name with the object of its new name and warns once per call site with a
:class:`DeprecationWarning` that names the replacement; :func:`warn_renamed` warns the same
way for an old attribute or keyword. An alias is removed in the release after the rename.
"""

from __future__ import annotations

import importlib
import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["module_aliases", "warn_renamed"]


def warn_renamed(old: str, new: str, *, stacklevel: int = 3) -> None:
    """Warn that ``old`` is deprecated and ``new`` is its name now."""
    warnings.warn(
        f"{old} is deprecated: use {new} (the old name goes in the next release)",
        DeprecationWarning,
        stacklevel=stacklevel,
    )


def module_aliases(
    module: str, renamed: Mapping[str, str], home: str | None = None
) -> Callable[[str], Any]:
    """A ``__getattr__`` for ``module`` answering each old name of ``renamed`` (old -> new)
    with the object the new name has in ``home`` (by default ``module`` itself), after a
    warning; any other name is an AttributeError."""
    where = home or module

    def __getattr__(name: str) -> Any:
        new = renamed.get(name)
        if new is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        warn_renamed(f"{module}.{name}", f"{where}.{new}")
        return getattr(importlib.import_module(where), new)

    return __getattr__
