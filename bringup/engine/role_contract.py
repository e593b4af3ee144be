"""The role contract: what a role module may define (:class:`RoleModule`, its :data:`HOOKS`), what it sees of a
host (:class:`HostContext`, its declared facts as a :class:`FactView`), and :class:`Role`, a loaded module held to
the contract with each hook read once.  bringup/engine/roles.py tells the contract in full and loads the roles; this
module was cut from it (issue 43 item 2) so that the contract is a leaf the loader, the roles' manifest and the
selected roles' questions all read without a circle.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from types import ModuleType
from typing import TYPE_CHECKING, Any, Callable, Protocol

from ..errors import InputError, quoted

if TYPE_CHECKING:
    from .auditkit import Expect
    from ..checks import Check
    from ..ssh.connection import Transport
    from ..resources.base import Resource

__all__ = ["RoleModule", "HOOKS", "EVERY_FACT", "Role", "HostContext", "FactView"]


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
    #: Its variables, a :class:`bringup.inventory.vars.RoleVars` model: types, constraints, defaults, checked before
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
        """Runtime promises the role's files do not show (``invoke audit``): :class:`bringup.engine.auditkit.Expect`."""

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
        #: The role's variables model (``Vars``, a :class:`bringup.inventory.vars.RoleVars`), or None.
        self.model: type | None = getattr(m, "Vars", None)
        #: ``WAITS_FOR_REBOOT = True``: not run while an earlier role's reboot is pending.
        self.waits_for_reboot = bool(getattr(m, "WAITS_FOR_REBOOT", False))

    @property
    def defaults(self) -> dict[str, Any]:
        """The role's defaults: derived from its ``Vars`` (a ``DEFAULTS`` beside it must agree), else ``DEFAULTS``."""
        if self._defaults is None:
            plain = getattr(self.module, "DEFAULTS", None)
            if self.model is not None:
                from ..inventory.vars import defaults_of

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
            from ..inventory.vars import check

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
