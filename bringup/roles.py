"""Roles are content: modules (or packages) under the project's ``roles/`` folder, one per role.

A role module declares its desired state as data; :class:`RoleModule` is the contract, every name a role
may define.  Only ``resources`` is required::

    class Vars(apt.AptVars, RoleVars):   # its variables: types, constraints, defaults (bringup.vars)
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
"""
from __future__ import annotations

import functools
import importlib.util
import json
import os
import stat
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Protocol

from .errors import BringupError, InputError, quoted

if TYPE_CHECKING:
    from .auditkit import Expect
    from .checks import Check
    from .connection import Transport
    from .resources.base import Resource

__all__ = ["RoleModule", "HOOKS", "EVERY_FACT", "Role", "HostContext", "FactView", "load_roles", "select_roles",
           "merged_defaults", "wanted_facts", "fact_keys"]


class _EveryFact:
    def __repr__(self) -> str:
        return "EVERY_FACT"


#: ``FACTS = EVERY_FACT``: the role reads any fact, so every fact is gathered for it (what leaving FACTS out
#: means too; the shipped roles all name theirs, and only the selected roles' facts are gathered).
EVERY_FACT: Any = _EveryFact()


class FactView(dict):
    """The facts one reader declared: reading any other is a bug in the reader, named at once.

    Without the check, a fact nobody gathered would read as absent and a role
    would quietly plan as if the host lacked it.
    """

    def __init__(self, facts: dict[str, Any], declared: tuple[str, ...] | None, reader: str,
                 errors: dict[str, str] | None = None):
        super().__init__(facts if declared is None else {k: facts[k] for k in declared if k in facts})
        self.declared = None if declared is None else set(declared)
        self.reader = reader
        #: Why a declared fact could not be read (cut, empty, garbled, untrusted): its value is then its default.
        self.errors = {k: v for k, v in (errors or {}).items() if declared is None or k in declared}

    def unread(self, key: str) -> str | None:
        """Why the fact ``key`` could not be read on this host (its value is then its default), or None."""
        self._check(key)
        return self.errors.get(key)

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


class RoleModule(Protocol):
    """The contract of a role module: every name it may define, each optional but ``resources``.

    ``host`` is the role's :class:`HostContext` (its variables, its declared facts, ``render`` for its
    templates); ``transport`` is the host's connection (``run_script``), for hooks that look at the host
    after the role ran.
    """

    #: The fact names it reads (``bringup.facts``): only the selected roles' facts are gathered, in one
    #: round trip, and reading one it did not declare is an error naming it.  ``()``: none; left out, or
    #: :data:`EVERY_FACT`: every fact.
    FACTS: tuple[str, ...]
    #: Its variables, a :class:`bringup.vars.RoleVars` model: types, constraints, defaults, checked before
    #: any host is touched.  Its defaults are the role's (lowest precedence).
    Vars: type
    #: Plain ``{variable: default}`` of a role without ``Vars`` (derived from ``Vars`` where there is one).
    DEFAULTS: Mapping[str, Any]
    #: ``{name: [shell commands]}`` run once after the role when a resource that names them (``notify``)
    #: changed; or a function of the host returning that mapping.
    HANDLERS: Mapping[str, list[str]] | Callable[[HostContext], Mapping[str, list[str]]]
    #: True: not run while a reboot an earlier role needs is pending (no ``--allow-reboot``).
    WAITS_FOR_REBOOT: bool

    def resources(self, host: HostContext) -> list[Resource]:
        """The desired state: resources, planned against the host and applied by the engine.  Required."""

    def fact_keys(self, vars: dict[str, Any]) -> Mapping[str, Iterable[str]]:
        """``{fact: keys}``: the only keys of those facts (of its ``FACTS``) the role reads on a host with these
        variables, so that a fact that can (``Fact.command_for``) reads them alone (``system.sysctl``: the
        sysctl role's keys, not ``sysctl -a``).  A fact another reader wants whole is read whole."""

    def validate(self, vars: dict[str, Any]) -> None:
        """What the types cannot say (a key file on the control machine, rendered configs): raise
        :class:`~bringup.errors.InputError`, one line.  Runs after the ``Vars`` model."""

    def audit(self, host: HostContext) -> list[Expect]:
        """Runtime promises the role's files do not show (``invoke audit``): :class:`bringup.auditkit.Expect`."""

    def checks(self, host: HostContext) -> list[Check]:
        """The role's own lines in the rack checklist: :func:`bringup.checks.line` values."""

    def verify(self, host: HostContext, transport: Transport) -> str | None:
        """After the role wrote something: raise :class:`~bringup.errors.BringupError` when the new state does
        not work; may return a line saying what it checked."""

    def rollback(self, host: HostContext, transport: Transport) -> str:
        """When ``verify`` raised: restore the previous state; returns a line saying what it restored."""

    def health(self, host: HostContext, transport: Transport) -> str | None:
        """A rolling run's gate after each host converged: raise when what the role runs does not serve;
        return a line saying what it checked, or None when the host runs nothing of the role."""


#: Every name of the contract: the constants, then the functions, in :class:`RoleModule`'s order.
HOOKS: tuple[str, ...] = (*RoleModule.__annotations__,
                          *(n for n, v in vars(RoleModule).items() if not n.startswith("_") and callable(v)))
_FUNCTIONS = tuple(h for h in HOOKS if h not in RoleModule.__annotations__)


def _refuse_unknown_hooks(name: str, module: Any) -> None:
    """A public name of the module close to a hook's name but not one (``resurces``, ``HANDELRS``,
    ``Facts``) is a misspelt hook: refused, one line naming the closest."""
    import difflib

    own = getattr(module, "__name__", None)
    for key, value in vars(module).items():
        if key.startswith("_") or key in HOOKS or isinstance(value, ModuleType):
            continue
        if own is not None and getattr(value, "__module__", own) != own:
            continue  # imported: not the module's own name
        same_case = [h for h in HOOKS if h.isupper() == key.isupper()]
        close = [h for h in HOOKS if h.lower() == key.lower()] or difflib.get_close_matches(key, same_case, 1, 0.8)
        if close:
            raise InputError(f"role {name}: {key} is not a role hook; did you mean {close[0]}? (known: "
                             f"{', '.join(HOOKS)}; a helper of the role starts with _)")


@dataclass
class Role:
    """A loaded role module, held to :class:`RoleModule`: its hooks read once, each in one form."""

    name: str
    module: ModuleType
    _handlers: Callable[[HostContext], Mapping[str, list[str]]] = field(init=False, repr=False, compare=False)
    _hooks: dict[str, Callable[..., Any]] = field(init=False, repr=False, compare=False)
    _defaults: dict[str, Any] | None = field(init=False, repr=False, compare=False, default=None)

    def __post_init__(self) -> None:
        m, name = self.module, self.name
        _refuse_unknown_hooks(name, m)
        facts = getattr(m, "FACTS", EVERY_FACT)
        if facts is not EVERY_FACT and (isinstance(facts, str) or not isinstance(facts, (tuple, list))
                                        or not all(isinstance(f, str) for f in facts)):
            raise InputError(f"role {name}: FACTS {facts!r} must be a tuple of fact names (e.g. ('nvidia.smi',)), "
                             f"() for none or EVERY_FACT")
        self.facts: tuple[str, ...] | None = None if facts is EVERY_FACT else tuple(facts)
        handlers = getattr(m, "HANDLERS", {})
        if isinstance(handlers, Mapping):
            fixed = {k: list(v) for k, v in handlers.items()}
            self._handlers = lambda ctx: fixed
        elif callable(handlers):
            self._handlers = handlers
        else:
            raise InputError(f"role {name}: HANDLERS must map handler names to commands, or be a function of the "
                             f"host returning that mapping; got {type(handlers).__name__}")
        self._hooks = {}
        for hook in _FUNCTIONS:
            fn = getattr(m, hook, None)
            if fn is not None and not callable(fn):
                raise InputError(f"role {name}: {hook} must be a function ({RoleModule.__name__}.{hook})")
            if fn is not None:
                self._hooks[hook] = fn
        #: The role's variables model (``Vars``, a :class:`bringup.vars.RoleVars`), or None.
        self.model: type | None = getattr(m, "Vars", None)
        #: ``WAITS_FOR_REBOOT = True``: not run while an earlier role's reboot is pending.
        self.waits_for_reboot = bool(getattr(m, "WAITS_FOR_REBOOT", False))

    @property
    def defaults(self) -> dict[str, Any]:
        """The role's defaults: derived from its ``Vars`` (a ``DEFAULTS`` beside it must agree), else ``DEFAULTS``."""
        if self._defaults is None:
            plain = getattr(self.module, "DEFAULTS", None)
            if self.model is not None:
                from .vars import defaults_of

                derived = defaults_of(self.model)
                if plain is not None and dict(plain) != derived:
                    odd = sorted(k for k in {*plain, *derived} if plain.get(k, ...) != derived.get(k, ...))
                    raise InputError(f"role {self.name}: DEFAULTS says otherwise than Vars about "
                                     f"{', '.join(odd)}; leave DEFAULTS out: it is derived from Vars")
                self._defaults = derived
            else:
                self._defaults = dict(plain or {})
        return dict(self._defaults)

    def validate(self, vars: dict[str, Any]) -> None:
        """Refuse bad input (one line): the model's types and constraints, then the ``validate`` hook."""
        if self.model is not None:
            from .vars import check

            check(self.model, vars)
        if "validate" in self._hooks:
            try:
                self._hooks["validate"](vars)
            except OSError as e:  # a path of the variables the file system refuses (too long, a loop of links)
                raise InputError(f"{e.strerror or e}"
                                 + (f" ({quoted(e.filename, 120)})" if e.filename else "")
                                 + "; fix the role's path variable") from None
            except (OverflowError, RecursionError) as e:  # a number or a nesting past what Python computes with
                raise InputError(f"a variable is out of range ({type(e).__name__}); use "
                                 "values of a sane size") from None

    @property
    def has_resources(self) -> bool:
        return "resources" in self._hooks

    def resources(self, ctx: HostContext) -> list:
        if "resources" not in self._hooks:
            raise InputError(f"role {self.name} declares no resources(host)")
        return list(self._hooks["resources"](ctx))

    def fact_keys(self, vars: dict[str, Any]) -> dict[str, list[str]]:
        """``{fact: keys}`` the role reads of its facts on a host with ``vars`` (its ``fact_keys`` hook; none
        without it: every fact whole)."""
        if "fact_keys" not in self._hooks:
            return {}
        # Reading a fact in part only saves time: a hook that fails, or answers something else than
        # {fact: [keys]}, has its facts read whole (what they would be without it), never a failed run.
        try:
            got = self._hooks["fact_keys"](vars)
            if not isinstance(got, Mapping):
                return {}
            return {f: sorted(set(keys)) for f, keys in got.items() if isinstance(f, str)
                    and not isinstance(keys, (str, bytes)) and all(isinstance(k, str) for k in keys)}
        except Exception:  # noqa: BLE001 - see above
            return {}

    def audit(self, ctx: HostContext) -> list:
        """The role's runtime promises (``audit(host)``; none when the role has no such hook)."""
        return list(self._hooks["audit"](ctx)) if "audit" in self._hooks else []

    def checks(self, ctx: HostContext) -> list:
        """The role's own lines in the rack checklist (``checks(host)``; none when the role has no such hook)."""
        return list(self._hooks["checks"](ctx)) if "checks" in self._hooks else []

    def handlers(self, ctx: HostContext) -> dict[str, list[str]]:
        """``{handler: commands}`` on this host, whichever form the module gives."""
        return dict(self._handlers(ctx))

    # Post-apply hooks, called by the runner only after the role wrote something (RoleModule.verify, .rollback),
    # and the health gate of a rolling run (RoleModule.health).
    @property
    def has_verify(self) -> bool:
        return "verify" in self._hooks

    @property
    def has_rollback(self) -> bool:
        return "rollback" in self._hooks

    @property
    def has_health(self) -> bool:
        return "health" in self._hooks

    def verify(self, ctx: HostContext, transport) -> str | None:
        return self._hooks["verify"](ctx, transport)

    def rollback(self, ctx: HostContext, transport) -> str:
        return self._hooks["rollback"](ctx, transport)

    def health(self, ctx: HostContext, transport) -> str | None:
        return self._hooks["health"](ctx, transport)


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


#: The largest roles manifest read: a project's defaults are a few KiB.
_MANIFEST_MAX = 1 << 20
_MANIFEST_FORMAT = 1


def _manifest_path(rdir: Path) -> Path | None:
    """Where the roles' manifest lives: beside their bytecode (``roles/__pycache__``, or under
    ``PYTHONPYCACHEPREFIX``), one per interpreter, as a ``.pyc`` is."""
    try:
        return Path(importlib.util.cache_from_source(str(rdir / "__init__.py"))).with_name(
            f"bringup-roles.{sys.implementation.cache_tag}.json")
    except (NotImplementedError, ValueError):  # pragma: no cover - an interpreter without a bytecode cache
        return None


def _stamps(files: list[str]) -> dict[str, list[int] | None]:
    """Each file's (modification time, size, inode): what says it is the file the manifest was made from."""
    out: dict[str, list[int] | None] = {}
    for f in files:
        try:
            st = os.stat(f)
        except OSError:
            out[f] = None
            continue
        out[f] = [st.st_mtime_ns, st.st_size, st.st_ino]
    return out


def _plain(value: Any, depth: int = 0) -> bool:
    """Whether ``value`` comes back from JSON as it is (mappings of text, lists, text, whole and finite numbers,
    true/false, null): a default that would not (a tuple, a set, an object) keeps the roles imported."""
    if depth > 32:
        return False
    if value is None or isinstance(value, (bool, int, str)):
        return True
    if isinstance(value, float):
        return value == value and value not in (float("inf"), float("-inf"))
    if type(value) is list:
        return all(_plain(v, depth + 1) for v in value)
    if type(value) is dict:
        return all(isinstance(k, str) and _plain(v, depth + 1) for k, v in value.items())
    return False


def _read_manifest(path: Path | None, found: dict[str, tuple[Path, Path | None]]) -> dict[str, dict] | None:
    """The defaults of every role by name, from a manifest made from exactly these role files (and the modules
    they imported), or None: no manifest, another bringup, a file changed, or anything unexpected in it."""
    from . import __version__

    if path is None:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0))
    except OSError:
        return None
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        with os.fdopen(fd, "rb", closefd=False) as f:
            data = f.read(_MANIFEST_MAX + 1)
    except OSError:
        return None
    finally:
        os.close(fd)
    if len(data) > _MANIFEST_MAX:
        return None
    try:
        doc = json.loads(data.decode("utf-8"))
    except (UnicodeDecodeError, ValueError, RecursionError):
        return None
    if not (isinstance(doc, dict) and doc.get("format") == _MANIFEST_FORMAT and doc.get("bringup") == __version__
            and isinstance(doc.get("files"), dict) and isinstance(doc.get("roles"), dict)):
        return None
    roles = doc["roles"]
    if sorted(roles) != sorted(found) or any(
            not isinstance(roles[n], dict) or roles[n].get("path") != str(where[0])
            or not isinstance(roles[n].get("defaults"), dict) or not _plain(roles[n]["defaults"])
            for n, where in found.items()):
        return None
    files = doc["files"]
    if not all(isinstance(k, str) for k in files) or _stamps(list(files)) != files:
        return None
    return {n: roles[n]["defaults"] for n in found}


def _write_manifest(path: Path | None, rdir: Path, found: dict[str, tuple[Path, Path | None]],
                    roles: dict[str, Role], imported: list[str]) -> None:
    """After every role loaded and was held to the contract: record their defaults and the files they came from
    (the role files, bringup's modules, whatever the roles imported first), when the process writes bytecode
    and every default comes back from JSON as it is.  Best effort: a folder that cannot be written keeps the
    next run importing every role, as before."""
    from . import __version__

    if path is None or sys.dont_write_bytecode:
        return
    try:
        defaults = {n: r.defaults for n, r in roles.items()}
        merged_defaults(list(roles.values()))  # two roles' defaults that disagree: refused at each run, never cached
    except BringupError:
        return
    if not all(_plain(d) for d in defaults.values()):
        return
    files = sorted({*(str(p) for p in rdir.rglob("*.py") if "__pycache__" not in p.parts), *imported,
                    *(str(m.__file__) for n, m in list(sys.modules.items())
                      if (n == "bringup" or n.startswith("bringup.")) and getattr(m, "__file__", None))})
    doc = {"format": _MANIFEST_FORMAT, "bringup": __version__, "files": _stamps(files),
           "roles": {n: {"path": str(found[n][0]), "defaults": defaults[n]} for n in roles}}
    try:
        from .outfile import write_atomic

        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, json.dumps(doc, sort_keys=True))
    except (OSError, ValueError):
        pass


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

    manifest = _manifest_path(rdir)
    selected = None if only is None else {w.strip() for w in only.split(",") if w.strip()}
    known = _read_manifest(manifest, found) if selected else None
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
        if selected or _read_manifest(manifest, found) is None:  # a run of every role rewrites only a stale one
            _write_manifest(manifest, rdir, found, roles, imported)
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
    from . import facts

    names: set[str] = set(extra)
    known = facts.known()
    for role in roles:
        if role.facts is None:
            return list(facts.ALL_FACTS)
        unknown = [f for f in role.facts if f not in known]
        if unknown:
            raise InputError(f"role {role.name}: FACTS names unknown fact(s) {', '.join(unknown)}; "
                             f"known: {', '.join(known)}")
        names.update(role.facts)
    unknown = sorted(n for n in extra if n not in known)
    if unknown:
        raise InputError(f"unknown fact(s) {', '.join(unknown)}")
    # Only the modules of these facts are imported (bringup.facts.named).
    return facts.named(names)


def fact_keys(roles: list[Role], vars: dict[str, Any], extra: tuple[str, ...] = ()) -> dict[str, list[str]]:
    """``{fact: keys}``: the facts that one host's run reads only in part, and those parts.  A fact is narrowed
    when every selected role that reads it said which of its keys (``fact_keys``), nothing else wants it (the
    checklist's ``extra``, a role reading every fact) and the fact can be read in part (``Fact.command_for``);
    its keys are then all those roles' keys together.  Any other fact is read whole, as before."""
    from . import facts

    if any(role.facts is None for role in roles):
        return {}
    readers: dict[str, list[Role]] = {}
    for role in roles:
        for name in role.facts or ():
            readers.setdefault(name, []).append(role)
    said = {role.name: role.fact_keys(vars) for role in roles if role.facts}
    out: dict[str, list[str]] = {}
    for name, who in readers.items():
        if name in extra or not all(name in said[r.name] for r in who):
            continue
        keys = sorted({k for r in who for k in said[r.name][name]})
        cls = facts.named([name])[0]
        if keys and cls.command_for(keys) is not None:
            out[name] = keys
    return out
