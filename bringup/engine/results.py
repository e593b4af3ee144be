"""What a run leaves: one :class:`ResourceResult` per resource, one :class:`HostResult` per host, the exit code,
and the summary per role that the drift report and the checklist read (:func:`role_states`).

The runner (:mod:`bringup.engine.runner`, :mod:`bringup.engine.rolerun`) makes them; the report, the audit, the drift
report and the checklist read them, without importing the runner.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["ResourceResult", "HostResult", "exit_code", "jsonable", "RoleState", "role_states"]


@dataclass
class ResourceResult:
    """The outcome of one resource on one host."""

    role: str
    id: str
    status: str  # ok | changed | failed | skipped
    changes: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    diff: str | None = None
    error: str | None = None

    def __post_init__(self) -> None:
        # The one place every run's, audit's and checklist's "is, want" values, diffs and lines come from: a
        # secret of the inventory (a vaulted value, of any length, a reference) is ``********`` from here on.
        from ..secrets import MASK

        self.changes = {k: MASK.mask_obj(v, lines=True) for k, v in self.changes.items()}
        self.diff = MASK.mask_lines(self.diff) if isinstance(self.diff, str) else self.diff
        self.reason = MASK.mask_lines(self.reason) if isinstance(self.reason, str) else self.reason
        self.error = MASK.mask_lines(self.error) if isinstance(self.error, str) else self.error


@dataclass
class HostResult:
    """The outcome on one host, with Ansible's recap counters."""

    host: str
    status: str = "ok"  # ok | failed | unreachable | interrupted | not started
    message: str | None = None
    resources: list[ResourceResult] = field(default_factory=list)
    handlers: list[str] = field(default_factory=list)
    round_trips: int = 0
    seconds: float = 0.0
    fact_errors: dict[str, str] = field(default_factory=dict)
    reboot_required: bool = False
    #: Why the host must reboot (when it did not), or why it rebooted.
    reboot_reason: str | None = None
    rebooted: bool = False
    #: What a role changed live only (its changes' keys: sysctl names) and then failed before persisting:
    #: a reboot would lose it.
    live_not_persisted: list[str] = field(default_factory=list)

    def count(self, status: str) -> int:
        return sum(1 for r in self.resources if r.status == status)

    @property
    def recap(self) -> dict[str, int]:
        ok = self.count("ok") + self.count("changed")
        return {
            "ok": ok,
            "changed": self.count("changed"),
            "failed": self.count("failed") + (1 if self.status == "failed" and not self.count("failed") else 0),
            "skipped": self.count("skipped"),
            "unreachable": 1 if self.status == "unreachable" else 0,
        }


def exit_code(results: list[HostResult]) -> int:
    """Ansible's codes: 4 if any host was unreachable, else 2 if any failed, else 0."""
    if any(r.status == "unreachable" for r in results):
        return 4
    if any(r.status == "failed" for r in results):
        return 2
    return 0


def jsonable(changes: dict) -> dict:
    """A plan's changes (``key: (old, new)``) as a result records them: the pairs as lists."""
    return {k: list(v) if isinstance(v, tuple) else v for k, v in changes.items()}


@dataclass
class RoleState:
    """One role's resources on one host, as a check-mode plan left them."""

    role: str
    total: int = 0
    #: Ids of the resources that would change.
    pending: list[str] = field(default_factory=list)
    #: ``id: error`` of the resources that could not be planned.
    failed: list[str] = field(default_factory=list)
    #: Reasons of the resources not applicable here (not a drift, not a pass either).
    skipped: list[str] = field(default_factory=list)
    #: Reasons of the resources the inventory does not ask for (``Unused``).
    unused: list[str] = field(default_factory=list)


def role_states(result: HostResult) -> dict[str, RoleState]:
    """``{role: RoleState}`` of one host's plan, in the roles' order."""
    from ..resources.guard import Unused

    out: dict[str, RoleState] = {}
    for r in result.resources:
        s = out.setdefault(r.role, RoleState(r.role))
        s.total += 1
        if r.status == "changed":
            s.pending.append(r.id)
        elif r.status == "failed":
            s.failed.append(f"{r.id}: {r.error}")
        elif r.status == "skipped" and r.id.startswith(f"{Unused.kind}:"):
            s.unused.append(r.reason or "")
        elif r.status == "skipped":
            s.skipped.append(r.reason or "skipped")
    return out
