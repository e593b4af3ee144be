"""Stand-ins for two standard-library packages that bringup's libraries import at their top for one rarely used
name, placed by the console script (issue 42: ~40 modules of every command's start-up that no command uses).

- ``asyncio``: pydantic-core marks functions ``@typing_extensions.deprecated``, and that decorator runs
  ``import asyncio.coroutines`` to ask whether each is a coroutine function: the whole ``asyncio`` package (its
  ``__init__`` imports every submodule) for a question :func:`inspect.iscoroutinefunction` answers.
- ``unittest.mock``: Invoke's ``invoke.context`` imports ``Mock`` for ``MockContext``, a test helper no bringup
  command makes, and with it ``unittest`` and ``asyncio``.

The console script places them (:func:`place`) before it loads anything, where neither is imported yet (a
test process, Invoke's own ``invoke`` program: nothing is placed), and leaves them for the process's life.  A
stand-in never answers wrongly: anything it does not answer itself (any other name, a function that is a
coroutine function after all, a ``Mock`` made) takes every stand-in out of ``sys.modules`` and asks the real
module, which from then on is the one imported; a submodule imported meanwhile (``import unittest.case``) is found
by :class:`_Submodules`, which does the same and hands over the real package's own submodule.
"""
from __future__ import annotations

import importlib
import importlib.util
import inspect
import sys
from types import ModuleType
from typing import Any

__all__ = ["place", "STANDS_IN_FOR"]

#: The modules a stand-in is made for, parents first.
STANDS_IN_FOR = ("asyncio", "asyncio.coroutines", "unittest", "unittest.mock")
_PACKAGES = ("asyncio", "unittest")

_placed: dict[str, ModuleType] = {}


def _withdraw() -> None:
    """Take every stand-in still named out of ``sys.modules``, and their finder out of ``sys.meta_path``."""
    for name, module in list(_placed.items()):
        if sys.modules.get(name) is module:
            del sys.modules[name]
        _placed.pop(name, None)
    if _Submodules in sys.meta_path:
        sys.meta_path.remove(_Submodules)


class _Loaded:
    """The loader of a submodule the real package has just imported: the module as it is, its own spec kept."""

    def __init__(self, module: ModuleType) -> None:
        self.module, self.spec = module, module.__spec__

    def create_module(self, spec: Any) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        module.__spec__ = self.spec  # the import system wrote the spec it was handed over the module's own


class _Submodules:
    """The first finder while the stand-ins are placed: a submodule of a stood-in package (``import unittest.case``,
    ``import asyncio.events``) withdraws them, imports the real package and the submodule through it, and is that
    module, loaded once (the import system has passed its look in ``sys.modules`` when it asks a finder)."""

    @staticmethod
    def find_spec(fullname: str, path: Any = None, target: Any = None) -> Any:
        package = fullname.partition(".")[0]
        if "." not in fullname or package not in _PACKAGES or package not in _placed:
            return None
        _withdraw()
        importlib.import_module(package)
        module = importlib.import_module(fullname)
        # Out of sys.modules until the import system takes it back through _Loaded: a name found there now
        # would be loaded again from its own spec (importlib's "the parent import may have imported it").
        del sys.modules[fullname]
        return importlib.util.spec_from_loader(fullname, _Loaded(module))


def _real(name: str) -> ModuleType:
    """The real module ``name``: the stand-ins are withdrawn first, so its package imports its own submodules."""
    _withdraw()
    return importlib.import_module(name)


class _StandIn(ModuleType):
    """A module whose unknown names come from the real module of the same name."""

    def __getattr__(self, attr: str) -> Any:
        # Dunders too (__file__, __all__).  A plain module has no __path__, as the real one has none (``from
        # unittest.mock import Mock`` asks); a package's is set where it is placed.
        if attr == "__path__":
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
        if name in _PACKAGES:
            # A package: the import system reads its __path__ before it asks the finders for a submodule.
            _placed[name].__path__ = []  # type: ignore[attr-defined]
    sys.meta_path.insert(0, _Submodules)
    # A package's submodule is its attribute (``import unittest.mock`` then ``unittest.mock.patch``).
    _placed["asyncio"].coroutines = _placed["asyncio.coroutines"]  # type: ignore[attr-defined]
    _placed["unittest"].mock = _placed["unittest.mock"]  # type: ignore[attr-defined]
