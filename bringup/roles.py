"""Roles are content: modules under the project's ``roles/`` folder.

A role module declares its desired state as data::

    DEFAULTS = {"sysctl_profile": "network-latency"}     # lowest precedence
    HANDLERS = {"restart x": [sh("systemctl restart -- %s", "x")]}
    WAITS_FOR_REBOOT = True   # skip while a reboot an earlier role needs is pending

    def validate(vars: dict) -> None: ...   # refuse bad input before any host is touched
    def resources(host: HostContext) -> list[Resource]: ...
    def verify(host, transport) -> str | None: ...   # optional: after the role wrote something
    def rollback(host, transport) -> str: ...        # optional: when verify raised

``roles/__init__.py`` holds ``ORDER``, the standard order of the roles.  The
engine imports whatever is there and knows no role by name.
"""
from __future__ import annotations

import importlib.util
import sys
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import Any, Callable

from .errors import InputError

__all__ = ["Role", "HostContext", "load_roles", "select_roles"]


@dataclass
class HostContext:
    """What a role sees of one host: its name, merged variables and facts."""

    name: str
    vars: dict[str, Any]
    facts: dict[str, Any]
    render: Callable[..., str] = field(repr=False)


@dataclass
class Role:
    """A loaded role module."""

    name: str
    module: ModuleType

    @property
    def defaults(self) -> dict[str, Any]:
        return dict(getattr(self.module, "DEFAULTS", {}))

    def merged_vars(self, host_vars: dict[str, Any]) -> dict[str, Any]:
        """Role defaults under the host's inventory variables."""
        return {**self.defaults, **host_vars}

    @property
    def waits_for_reboot(self) -> bool:
        """``WAITS_FOR_REBOOT = True``: not run while an earlier role's reboot is pending."""
        return bool(getattr(self.module, "WAITS_FOR_REBOOT", False))

    def validate(self, vars: dict[str, Any]) -> None:
        fn = getattr(self.module, "validate", None)
        if fn:
            fn(vars)

    def resources(self, ctx: HostContext) -> list:
        return list(self.module.resources(ctx))

    def handlers(self, ctx: HostContext) -> dict[str, list[str]]:
        h = getattr(self.module, "HANDLERS", {})
        return dict(h(ctx) if callable(h) else h)

    # Optional post-apply hooks, called by the runner only after the role wrote
    # something: ``verify(host, transport)`` raises BringupError when the new
    # state does not work (it may return a line saying what it checked);
    # ``rollback(host, transport)`` then restores the previous state and
    # returns a line saying what it restored.
    @property
    def has_verify(self) -> bool:
        return callable(getattr(self.module, "verify", None))

    @property
    def has_rollback(self) -> bool:
        return callable(getattr(self.module, "rollback", None))

    def verify(self, ctx: HostContext, transport) -> str | None:
        return self.module.verify(ctx, transport)

    def rollback(self, ctx: HostContext, transport) -> str:
        return self.module.rollback(ctx, transport)


def _import(path: Path, name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:  # pragma: no cover
        raise InputError(f"cannot import {path}")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    return mod


def load_roles(root: Path) -> tuple[list[str], dict[str, Role]]:
    """Load ``root/roles``: returns ``(standard order, roles by name)``."""
    rdir = root / "roles"
    if not rdir.is_dir():
        raise InputError(f"{rdir}: no roles folder here; run from the project folder or pass --project")
    pkg_init = rdir / "__init__.py"
    order: list[str] = []
    if pkg_init.exists():
        order = list(getattr(_import(pkg_init, "bringup_roles"), "ORDER", []))
    roles: dict[str, Role] = {}
    for f in sorted(rdir.glob("*.py")):
        if f.name.startswith("_"):
            continue
        roles[f.stem] = Role(f.stem, _import(f, f"bringup_roles.{f.stem}"))
    # Roles missing from ORDER run after the ordered ones, by name.
    order = [r for r in order if r in roles] + sorted(r for r in roles if r not in order)
    return order, roles


def select_roles(order: list[str], roles: dict[str, Role], wanted: str | None) -> list[Role]:
    """The roles named by ``--roles a,b`` (all by default), in the standard order."""
    if not wanted:
        return [roles[r] for r in order]
    names = [w.strip() for w in wanted.split(",") if w.strip()]
    unknown = [n for n in names if n not in roles]
    if unknown:
        import difflib
        hints = []
        for u in unknown:
            close = difflib.get_close_matches(u, order, n=1)
            hints.append(f"{u!r}" + (f" (did you mean {close[0]}?)" if close else ""))
        raise InputError(f"--roles: unknown role {', '.join(hints)}; known: {', '.join(order)}")
    return [roles[r] for r in order if r in names]
