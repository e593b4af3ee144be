"""What a role declares for a host, as data, and its check by bringup's own audit over the testinfra backend.

The modules that ``invoke audit --export-testinfra DIR`` writes (:mod:`.export`) list, per role, every item
the role declares for a host with what it wants (:func:`values`: a file's sha256, mode and owner, a sysctl's
value, a unit's wanted state, a runtime promise's read), and each test is :func:`check`: the role is audited on
the test's host exactly as ``invoke audit`` audits it (:class:`bringup.checklist.audit.AuditedRole` in a check-mode
:class:`bringup.engine.runner.HostRun`, over the backend's connection: the role's facts, then every read of the role in
one round trip), and the test passes, skips or fails as the audit's item does, with the audit's line
(``net.ipv4.tcp_slow_start_after_idle is 1, want 0``).  What the role declares now must still be what was
exported; when the inventory or the role changed since, the test says which value and asks for a new export.
"""
from __future__ import annotations

import hashlib
import weakref
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from ..errors import Unreachable
from ..process import command
from ..engine.runner import HostRun, Options

if TYPE_CHECKING:
    from ..checklist.audit import Item
    from ..resources.base import Resource
    from .backend import BringupBackend

__all__ = ["values", "item_of", "check", "RoleAudit", "audit_role"]


def values(r: Resource) -> dict[str, Any]:
    """What the audit compares the host against, for the resource kinds that say it as plain values."""
    from ..engine.auditkit import Expect
    from ..resources import Command, Directory, File, JsonFile, Packages, Service, Skip, Sysctl
    from ..resources.conditioned import ConditionedService
    from ..resources.cpu import CpuFreq, SysfsChoice
    from ..resources.irq import IrqAffinity

    if isinstance(r, File):
        return {"path": r.path, "sha256": _sha256(r.content), "mode": r.mode, "owner": r.owner, "group": r.group}
    if isinstance(r, Directory):
        return {"path": r.path, "mode": r.mode, "owner": r.owner, "group": r.group}
    if isinstance(r, Sysctl):
        # keep: the value is a floor (or a range to widen) a host may hold larger (resources.sysctl.keep_larger)
        return {"key": r.key, "value": r.value, "proc": r.proc, "keep": r.keep}
    if isinstance(r, Packages):
        return {"packages": r.packages, "present": r.present, "manager": r.manager}
    if isinstance(r, Service):
        return {"unit": r.unit, "running": r.running, "enabled": r.enabled,
                "conditioned": isinstance(r, ConditionedService)}
    if isinstance(r, IrqAffinity):
        return {"irq": r.irq, "cpus": r.cpus, "path": r.path, "refused_file": r.refused_file,
                "in_container": r.in_container}
    if isinstance(r, CpuFreq):
        return {"governor": r.governor, "epp": r.epp}
    if isinstance(r, SysfsChoice):
        return {"path": r.full, "value": r.value}
    if isinstance(r, Command):
        return {"creates": r.creates, "removes": r.removes, "unless": r.unless, "onlyif": r.onlyif}
    if isinstance(r, Skip):
        return {"reason": r.reason}
    if isinstance(r, Expect):
        return {"read": r.snippet}
    if isinstance(r, JsonFile):
        return _json_values(r)
    return {}


def _json_values(r) -> dict[str, Any]:
    """A merged JSON file's keys, or, when they hold a secret (a PrivateJsonFile's always may), only their
    sha256: what bringup exports or hands a peer never carries a credential."""
    import json

    from ..resources.privatejson import PrivateJsonFile
    from ..secrets import MASK

    text = json.dumps(r.keys, sort_keys=True, default=str)
    out: dict[str, Any] = {"path": r.path, "owned": r.owned}
    if isinstance(r, PrivateJsonFile) or MASK.holds(r.keys):
        return {**out, "keys_sha256": _sha256(text.encode(), secret=True)}
    return {**out, "keys": r.keys}


def _sha256(content: bytes, secret: bool = False) -> str:
    """The sha256 of ``content``, or ``********`` when it holds a secret (``secret``, or one :data:`MASK` knows): a
    hash of a text holding a short secret gives it away (a 4-character password is found from it in a moment), and
    the export is handed to others.  The test's own audit still reads the host."""
    from ..secrets import HIDDEN, MASK

    if secret or MASK.holds(content.decode("utf-8", "replace")):
        return HIDDEN
    return hashlib.sha256(content).hexdigest()


def item_of(r: Resource) -> dict[str, Any]:
    """One exported item: its id (``kind:name``, as the audit's reports name it), kind, name and values."""
    from ..secrets import MASK

    # A secret the role wants on the host (a vaulted value, of any length) is ``********`` in the export and in
    # what a test compares it with, as the audit's own lines show it.
    return {"id": r.id, "kind": r.kind, "name": r.name, **MASK.mask_obj(values(r), lines=True)}


class _Borrowed:
    """The backend's connection lent to one check-mode run: counted, bounded as the backend's own commands
    (``--bringup-deadline``), never closed by it."""

    def __init__(self, backend: BringupBackend):
        self._backend = backend
        self._t = backend.transport()
        self.host, self.round_trips = self._t.host, 0

    def run_script(self, script: str, keep: str | None = None):
        self.round_trips += 1
        with self._backend.bounded(self._t, "a read of the role's audit"):
            return self._t.run_script(script, keep=keep)

    def close(self) -> None:
        pass

    def __getattr__(self, name: str):
        return getattr(self._t, name)


@dataclass
class _Facts:
    """A host's facts gathered so far in this session: every role's run reuses them, gathers only the rest."""

    values: dict[str, Any] = field(default_factory=dict)
    errors: dict[str, str] = field(default_factory=dict)


_facts: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


class _RoleRun(HostRun):
    """``invoke audit``'s check-mode run of one role, on the backend's connection; it keeps what the role declared."""

    def __init__(self, backend: BringupBackend, role):
        from ..checklist.audit import AuditedRole
        from ..project import content_root
        from ..engine.templates import Templates

        super().__init__(backend.inventory_host, [AuditedRole(role.name, role.module)], backend.vars,
                         Options(check=True), Templates(content_root() / "templates"))
        self.transport = _Borrowed(backend)
        self.known = _facts.setdefault(backend, _Facts())
        self.declared: list[Resource] = []

    def gather(self) -> dict[str, Any]:
        from ..facts.gather import gather

        missing = [f for f in self.facts_wanted if f.name not in self.known.values]
        if missing:
            got, errors = gather(self.transport, missing)
            self.known.values.update(got)
            self.known.errors.update(errors)
        self.facts = self.known.values
        self.fact_errors = {f.name: self.known.errors[f.name] for f in self.facts_wanted if f.name in self.known.errors}
        self.result.fact_errors = self.fact_errors
        return self.facts

    def declare(self, role):
        got = super().declare(role)
        self.declared = got[2]
        return got


@dataclass
class RoleAudit:
    """One role audited on one host: its items by id, what it declares now, and why it could not be audited."""

    items: dict[str, Item]
    declared: dict[str, dict[str, Any]]
    error: str | None = None


_audits: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


def audit_role(backend: BringupBackend, name: str) -> RoleAudit:
    """Audit role ``name`` on the backend's host (once per session); raises Unreachable for a host out of reach."""
    from ..checklist.audit import items

    done = _audits.setdefault(backend, {})
    if name not in done:
        from .backend import every_role

        role = next((r for r in every_role() if r.name == name), None)
        if role is None:
            return RoleAudit({}, {}, f"role {name}: no such role in this project any more; export again")
        run = _RoleRun(backend, role)
        result = run.converge()
        if result.status == "unreachable":
            raise Unreachable(result.message)
        found = items(result)
        error = next((i.message for i in found if i.item in ("failed", "interrupted")), None)
        done[name] = RoleAudit({i.item: i for i in found}, {r.id: item_of(r) for r in run.declared}, error)
    return done[name]


def check(host, role: str, item: dict[str, Any], exported_for: str = "") -> None:
    """The test of one exported item: the role's audit of this item on ``host``, as the audit judges it."""
    import pytest

    from .backend import BringupBackend

    __tracebackhide__ = True
    backend = host.backend
    if not isinstance(backend, BringupBackend):
        pytest.fail(f"the exported checks of role {role} run through bringup's backend: --hosts=bringup://"
                    f"{exported_for or 'NAME'} (this host is {backend.get_pytest_id()})", pytrace=False)
    audit = audit_role(backend, role)
    if audit.error:
        pytest.fail(f"role {role}: {audit.error}", pytrace=False)
    again = f"export again ({command(f'audit --host {backend.name} --export-testinfra DIR')})"
    now = audit.declared.get(item["id"])
    if now is None:
        pytest.fail(f"{item['id']}: role {role} no longer declares it for {backend.name}; {again}", pytrace=False)
    changed = [k for k in item if now.get(k) != item[k]]
    if changed:
        k = changed[0]
        pytest.fail(f"{item['id']}: role {role} now declares {k} {now.get(k)!r} for {backend.name}, the export "
                    f"has {item[k]!r}; {again}", pytrace=False)
    found = audit.items.get(item["id"])
    if found is None:
        pytest.fail(f"{item['id']}: the audit of role {role} gave it no result", pytrace=False)
    if found.outcome == "passed":
        return
    if found.outcome == "skipped":
        pytest.skip(found.message)
    pytest.fail(found.message, pytrace=False)
