"""Roles are content: modules under the project's ``roles/`` folder.

A role module declares its desired state as data::

    class Vars(apt.AptVars, RoleVars):   # its variables: types, constraints, defaults (bringup.vars)
        sysctl_profile: Literal["network-latency", "none"] = want("network-latency", "one of ...")
    DEFAULTS = defaults_of(Vars)         # lowest precedence; derived, never a second table
    FACTS = ("system.sysctl_writable",)  # the facts it reads (all of them when absent)
    HANDLERS = {"restart x": [sh("systemctl restart -- %s", "x")]}
    WAITS_FOR_REBOOT = True   # skip while a reboot an earlier role needs is pending

    def validate(vars: dict) -> None: ...   # optional: what the types cannot say (files, rendered configs)
    def resources(host: HostContext) -> list[Resource]: ...
    def verify(host, transport) -> str | None: ...   # optional: after the role wrote something
    def rollback(host, transport) -> str: ...        # optional: when verify raised
    def checks(host: HostContext) -> list[Check]: ...  # optional: the role's lines in the rack checklist
    def health(host, transport) -> str | None: ...   # optional: a rolling run's gate after each host

Every selected role's ``Vars`` checks each host's merged variables before any host is touched; a
mapping variable's value is a ``Spec`` model (unknown keys refused, the closest known one named); a
variable several roles read is declared once in its owner's model and inherited (``apt.AptVars``,
``image.ImageVars``, ``gpu.GpuVars``, ``topology.PlannerVars``).  A role without ``Vars`` gives plain
``DEFAULTS`` and checks everything in ``validate``.

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

__all__ = ["Role", "HostContext", "FactView", "load_roles", "select_roles", "merged_defaults", "wanted_facts"]


class FactView(dict):
    """The facts one reader declared: reading any other is a bug in the reader, named at once.

    Without the check, a fact nobody gathered would read as absent and a role
    would quietly plan as if the host lacked it.
    """

    def __init__(self, facts: dict[str, Any], declared: tuple[str, ...] | None, reader: str):
        super().__init__(facts if declared is None else {k: facts[k] for k in declared if k in facts})
        self.declared = None if declared is None else set(declared)
        self.reader = reader

    def _check(self, key: str) -> None:
        if self.declared is not None and key not in self.declared:
            raise InputError(f"{self.reader} reads the fact {key!r} without declaring it: add it to its FACTS")

    def __getitem__(self, key: str) -> Any:
        self._check(key)
        return super().__getitem__(key)

    def get(self, key: str, default: Any = None) -> Any:
        self._check(key)
        return super().get(key, default)

    def __contains__(self, key: object) -> bool:
        self._check(str(key))
        return super().__contains__(key)


@dataclass
class HostContext:
    """What a role sees of one host: its name, the run's merged variables and its declared facts."""

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
    def model(self) -> type | None:
        """The role's variables model (``Vars``, a :class:`bringup.vars.RoleVars`), or None."""
        return getattr(self.module, "Vars", None)

    @property
    def defaults(self) -> dict[str, Any]:
        """The role's defaults: its model's (one source), else a module's plain ``DEFAULTS``."""
        if self.model is not None:
            from .vars import defaults_of

            return defaults_of(self.model)
        return dict(getattr(self.module, "DEFAULTS", {}))

    @property
    def facts(self) -> tuple[str, ...] | None:
        """The fact names the role reads (``FACTS``); None: it did not say, so it gets every fact."""
        f = getattr(self.module, "FACTS", None)
        return None if f is None else tuple(f)

    @property
    def waits_for_reboot(self) -> bool:
        """``WAITS_FOR_REBOOT = True``: not run while an earlier role's reboot is pending."""
        return bool(getattr(self.module, "WAITS_FOR_REBOOT", False))

    def validate(self, vars: dict[str, Any]) -> None:
        """Refuse bad input (one line): the model's types and constraints, then the ``validate`` hook."""
        if self.model is not None:
            from .vars import check

            check(self.model, vars)
        fn = getattr(self.module, "validate", None)
        if fn:
            fn(vars)

    def resources(self, ctx: HostContext) -> list:
        return list(self.module.resources(ctx))

    def checks(self, ctx: HostContext) -> list:
        """The role's own lines in the rack checklist (``checks(host)``; none when the role has no such hook)."""
        fn = getattr(self.module, "checks", None)
        return list(fn(ctx)) if fn else []

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

    # Optional health gate of a rolling run (``provision --serial``, hosts with drain hooks), called after a
    # host converged: ``health(host, transport)`` raises BringupError when what the role runs does not serve,
    # returns a line saying what it checked, or None when the host runs nothing of the role.
    @property
    def has_health(self) -> bool:
        return callable(getattr(self.module, "health", None))

    def health(self, ctx: HostContext, transport) -> str | None:
        return self.module.health(ctx, transport)


def _import(path: Path, name: str) -> ModuleType:
    """Import a project's role module from its file (its bytecode cached as the process allows: see
    ``bringup.process.keep_bytecode``)."""
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


def merged_defaults(roles: list[Role]) -> dict[str, Any]:
    """Every role's defaults in one mapping; two roles giving one variable two defaults is refused.

    A variable several roles read (``apt_lock_timeout``, the planner's) is
    declared once, in the module that owns it, and each role includes it.
    """
    out: dict[str, Any] = {}
    owner: dict[str, str] = {}
    for role in roles:
        for k, v in role.defaults.items():
            if k in out and out[k] != v:
                raise InputError(f"roles {owner[k]} and {role.name} give {k} different defaults "
                                 f"({out[k]!r}, {v!r}); declare it once and include it in both")
            out.setdefault(k, v)
            owner.setdefault(k, role.name)
    return out


def wanted_facts(roles: list[Role], extra: tuple[str, ...] = ()) -> list:
    """The fact classes to gather for ``roles`` (and ``extra`` names), in gathering order."""
    from .facts import ALL_FACTS, FACTS_BY_NAME

    names: set[str] = set(extra)
    for role in roles:
        if role.facts is None:
            return list(ALL_FACTS)
        unknown = [f for f in role.facts if f not in FACTS_BY_NAME]
        if unknown:
            raise InputError(f"role {role.name}: FACTS names unknown fact(s) {', '.join(unknown)}; "
                             f"known: {', '.join(FACTS_BY_NAME)}")
        names.update(role.facts)
    unknown = sorted(n for n in extra if n not in FACTS_BY_NAME)
    if unknown:
        raise InputError(f"unknown fact(s) {', '.join(unknown)}")
    return [f for f in ALL_FACTS if f.name in names]
