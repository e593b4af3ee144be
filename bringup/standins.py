"""Stand-ins for two standard-library packages that bringup's libraries import at their top for one rarely used
name, placed by the console script (issue 42: ~40 modules of every command's start-up that no command uses).

- ``asyncio``: pydantic-core marks functions ``@typing_extensions.deprecated``, and that decorator runs
  ``import asyncio.coroutines`` to ask whether each is a coroutine function: the whole ``asyncio`` package (its
  ``__init__`` imports every submodule) for a question :func:`inspect.iscoroutinefunction` answers.
- ``unittest.mock``: Invoke's ``invoke.context`` imports ``Mock`` for ``MockContext``, a test helper no bringup
  command makes, and with it ``unittest`` and ``asyncio``.

The console script places them (:func:`place`) before it loads anything, where neither is imported yet (a
test process, Invoke's own ``invoke`` program: nothing is placed), and leaves them for the process's life.  A
stand-in never answers wrongly: anything it does not answer itself (any other name, a submodule, a function that
is a coroutine function after all, a ``Mock`` made) takes every stand-in out of ``sys.modules`` and asks the real
module, which from then on is the one imported.
"""
from __future__ import annotations

import importlib
import inspect
import sys
from types import ModuleType
from typing import Any

__all__ = ["place", "STANDS_IN_FOR"]

#: The modules a stand-in is made for, parents first.
STANDS_IN_FOR = ("asyncio", "asyncio.coroutines", "unittest", "unittest.mock")

_placed: dict[str, ModuleType] = {}


def _withdraw() -> None:
    """Take every stand-in still named out of ``sys.modules``."""
    for name, module in list(_placed.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
        _placed.pop(name, None)


def _real(name: str) -> ModuleType:
    """The real module ``name``: the stand-ins are withdrawn first, so its package imports its own submodules."""
    _withdraw()
    return importlib.import_module(name)


class _StandIn(ModuleType):
    """A module whose unknown names come from the real module of the same name."""

    def __getattr__(self, attr: str) -> Any:
        # Dunders too (__file__, __all__), and a package's __path__ (a submodule imported); a plain module has no
        # __path__, as the real one has none (``from unittest.mock import Mock`` asks).
        if attr == "__path__" and "." in self.__name__:
            raise AttributeError(attr)
        value = getattr(_real(self.__name__), attr)
        # Kept: a module that bound the stand-in at its import (``import asyncio`` at its top) reads the real
        # name at the next use without asking again.
        setattr(self, attr, value)
        return value


def _iscoroutinefunction(func: Any) -> bool:
    """``asyncio.coroutines.iscoroutinefunction`` for a plain function; anything that is or may be marked a
    coroutine function is asked of the real one."""
    if inspect.iscoroutinefunction(func) or hasattr(func, "_is_coroutine"):
        return _real("asyncio.coroutines").iscoroutinefunction(func)
    return False


class _MockOnUse:
    """``unittest.mock.Mock`` made by the real module when one is made."""

    def __new__(cls, *args: Any, **kwargs: Any) -> Any:
        return _real("unittest.mock").Mock(*args, **kwargs)


def _stand_in(name: str) -> ModuleType:
    module = _StandIn(name, f"Stands in for {name} while a library imports (bringup.standins).")
    if name == "asyncio.coroutines":
        module.iscoroutinefunction = _iscoroutinefunction  # type: ignore[attr-defined]
    elif name == "unittest.mock":
        module.Mock = _MockOnUse  # type: ignore[attr-defined]
    return module


def place() -> None:
    """Name a stand-in in ``sys.modules`` for each of :data:`STANDS_IN_FOR`, where none of them is imported yet."""
    if any(name in sys.modules for name in STANDS_IN_FOR):
        return
    for name in STANDS_IN_FOR:
        _placed[name] = sys.modules[name] = _stand_in(name)
    # A package's submodule is its attribute (``import unittest.mock`` then ``unittest.mock.patch``).
    _placed["asyncio"].coroutines = _placed["asyncio.coroutines"]  # type: ignore[attr-defined]
    _placed["unittest"].mock = _placed["unittest.mock"]  # type: ignore[attr-defined]
