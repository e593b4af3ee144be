"""Roles are content: modules (or packages) under the project's ``roles/`` folder, one per role.

A role module declares its desired state as data; :class:`RoleModule` is the contract, every name a role
may define.  Only ``resources`` is required::

    class Vars(apt.AptVars, RoleVars):   # its variables: types, constraints, defaults (bringup.inventory.vars)
        sysctl_profile: Literal["network-latency", "none"] = want("network-latency", "one of ...")
    FACTS = ("system.sysctl_writable",)  # the facts it reads; () for none, EVERY_FACT for all
    HANDLERS = {"restart x": [sh("systemctl restart -- %s", "x")]}   # or a function of the host
    def fact_keys(vars): return {"system.sysctl": [...]}  # the only keys of its facts it reads (optional)

    def resources(host: HostContext) -> list[Resource]: ...

Every selected role's ``Vars`` checks each host's merged variables before any host is touched; a
mapping variable's value is a ``Spec`` model (unknown keys refused, the closest known one named); a
variable several roles read is declared once in its owner's model and inherited (``apt.AptVars``,
``image.ImageVars``, ``gpu.GpuVars``, ``topology.PlannerVars``).  The role's defaults are derived from
``Vars`` (a ``DEFAULTS`` beside it must say the same); a role without ``Vars`` gives plain ``DEFAULTS``
and checks everything in ``validate``.

A role is ``roles/<name>.py``, or a package ``roles/<name>/__init__.py`` whose modules split it by
concern (relative imports work).  ``roles/__init__.py`` holds ``ORDER``, the standard order of the roles:
a role missing from it is refused (without ``roles/__init__.py`` the roles run by name).  A public name
in a role module close to a hook's (``resurces``, ``HANDELRS``) is refused naming the hook: helpers of a
role start with ``_`` or are named apart.  The engine imports whatever is there and knows no role by name.

Beside this module: the roles' manifest that lets a run skip the roles it did not select
(bringup/engine/roles_manifest.py), what the selected roles need together, their merged defaults and facts
(bringup/engine/roles_selected.py), and the contract itself, :class:`Role` and what a role sees of a host
(bringup/engine/role_contract.py); their names are re-exported here.
"""
from __future__ import annotations

import functools
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from ..errors import InputError
from .role_contract import EVERY_FACT, HOOKS, FactView, HostContext, Role, RoleModule
from .roles_manifest import manifest_path, read_manifest, write_manifest
from .roles_selected import fact_keys, merged_defaults, wanted_facts

__all__ = ["RoleModule", "HOOKS", "EVERY_FACT", "Role", "HostContext", "FactView", "load_roles", "select_roles",
           "merged_defaults", "wanted_facts", "fact_keys"]



def _import(path: Path, name: str, package: Path | None = None) -> ModuleType:
    """Import a project's role module from its file, or a package role from its ``__init__.py`` (``package``:
    its folder, where its own modules are found); bytecode cached as the process allows (see
    ``bringup.process.keep_bytecode``)."""
    spec = importlib.util.spec_from_file_location(
        name, path, submodule_search_locations=None if package is None else [str(package)])
    if spec is None or spec.loader is None:  # pragma: no cover
        raise InputError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    if package is not None:  # its own modules are this project's, not those of a package role loaded before
        for stale in [k for k in sys.modules if k.startswith(f"{name}.")]:
            del sys.modules[stale]
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


class _Deferred(Role):
    """A role the run did not select, its module not imported: its defaults (all a run needs of it: every role's
    defaults are each host's lowest variables) come from the roles' manifest; anything else of it imports
    the module then, as :func:`load_roles` would have, and it is a :class:`Role` from there on."""

    def __init__(self, name: str, load: Callable[[], Role], defaults: dict[str, Any]):  # noqa: D107
        self.name = name
        self._load = load
        self._defaults = defaults

    def __getattr__(self, attr: str) -> Any:
        # Only what the instance lacks comes here: the module, its hooks and model, its facts.
        if attr.startswith("__") or "_load" not in self.__dict__:
            raise AttributeError(attr)
        real = self.__dict__.pop("_load")()
        self.__dict__.update(real.__dict__)
        return getattr(self, attr)


def load_roles(root: Path, only: str | None = None) -> tuple[list[str], dict[str, Role]]:
    """Load ``root/roles``: returns ``(standard order, roles by name)``.

    A role is ``roles/<name>.py`` or a package ``roles/<name>/__init__.py``; each is held to
    :class:`RoleModule`, and must be in ``ORDER`` when ``roles/__init__.py`` declares one.

    ``only``: the ``--roles`` text of the run (None: every role).  The roles it does not name are then not
    imported when the roles' manifest (beside their bytecode) was made from these very files: they are
    :class:`_Deferred`, their defaults read from it.  Any role file or module they imported changed, or no
    manifest: every role is imported and held to the contract, and the manifest written again (issue 42: a
    sysctl no-op imported all twelve roles and, through them, the topology planner, GPU profiles and the
    bench's serving code, for their defaults alone).
    """
    rdir = root / "roles"
    if not rdir.is_dir():
        raise InputError(f"{rdir}: no roles folder here; run from the project folder or pass --project")
    pkg_init = rdir / "__init__.py"
    order: list[str] | None = None
    if pkg_init.exists():
        declared = getattr(_import(pkg_init, "bringup_roles"), "ORDER", None)
        order = None if declared is None else list(declared)
    found: dict[str, tuple[Path, Path | None]] = {}
    for entry in sorted(rdir.iterdir()):
        if entry.name.startswith(("_", ".")):
            continue
        if entry.suffix == ".py" and entry.is_file():
            name, where = entry.stem, (entry, None)
        elif entry.is_dir() and (entry / "__init__.py").is_file():
            name, where = entry.name, (entry / "__init__.py", entry)
        else:
            continue
        if name in found:
            raise InputError(f"{rdir}: role {name} is both {name}.py and a package {name}/; keep one")
        found[name] = where
    if order is not None:
        missing = [n for n in found if n not in order]
        if missing:
            import difflib

            stray = [o for o in order if o not in found]
            hints = [f"{n}" + (f" (ORDER names {close[0]!r}, which is no role: did you mean {n}?)"
                               if (close := difflib.get_close_matches(n, stray, 1)) else "") for n in missing]
            raise InputError(f"{pkg_init}: ORDER lacks role(s) {', '.join(hints)}; add each where it runs "
                             f"in ORDER")
    def loaded(name: str) -> Role:
        path, package = found[name]
        role = Role(name, _import(path, f"bringup_roles.{name}", package))
        if not role.has_resources:
            raise InputError(f"{path}: role {name} declares no resources(host): the one hook a role must have")
        return role

    manifest = manifest_path(rdir)
    selected = None if only is None else {w.strip() for w in only.split(",") if w.strip()}
    known = read_manifest(manifest, found) if selected else None
    roles: dict[str, Role] = {}
    if known is not None:
        for name in found:
            roles[name] = loaded(name) if name in selected else \
                _Deferred(name, functools.partial(loaded, name), known[name])
    else:
        before = set(sys.modules)
        for name in found:
            roles[name] = loaded(name)
        imported = [str(m.__file__) for n, m in list(sys.modules.items())
                    if n not in before and getattr(m, "__file__", None)]
        if selected or read_manifest(manifest, found) is None:  # a run of every role rewrites only a stale one
            write_manifest(manifest, rdir, found, roles, imported)
    # Without an ORDER (no roles/__init__.py) the roles run by name.
    order = sorted(roles) if order is None else [r for r in order if r in roles]
    return order, roles


def select_roles(order: list[str], roles: dict[str, Role], wanted: str | None) -> list[Role]:
    """The roles named by ``--roles a,b`` (all by default), in the standard order."""
    if wanted is None:
        return [roles[r] for r in order]
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    if not names:
        # `--roles ""` used to plan every role and `--roles " , "` to run none and exit 0.
        raise InputError(f"--roles {wanted!r} names no role; name them (e.g. --roles sysctl,docker) or leave "
                         f"--roles out for all of them ({', '.join(order)})")
    unknown = [n for n in names if n not in roles]
    if unknown:
        import difflib
        hints = []
        for u in unknown:
            close = difflib.get_close_matches(u, order, n=1)
            hints.append(f"{u!r}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise InputError(f"--roles: unknown role {', '.join(hints)}; known: {', '.join(order)}")
    return [roles[r] for r in order if r in names]
