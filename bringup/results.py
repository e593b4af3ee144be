"""What a host's results add up to per role: the summary that the drift report and the checklist read.

The results themselves (:class:`~bringup.runner.HostResult`, one :class:`~bringup.runner.ResourceResult` per
resource) are made by the runner; a check-mode plan's resources, summed up per role, say which roles drifted.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from .runner import HostResult

__all__ = ["RoleState", "role_states"]


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
    from .resources.guard import Unused

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
