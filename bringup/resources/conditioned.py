"""A systemd service that may decline to run here because of its own conditions.

Debian's ``irqbalance.service`` says ``ConditionVirtualization=!container``:
in a container ``systemctl start`` succeeds and the unit stays inactive.  A
plain :class:`~bringup.resources.systemd.Service` would then never converge;
this one reports the unit as skipped, with the conditions, once systemd has
evaluated them and said no.
"""
from __future__ import annotations

from ..ssh.command import sh
from .base import Plan, kv_lines
from .systemd import Service

__all__ = ["ConditionedService"]


class ConditionedService(Service):
    """:class:`Service`, but a unit whose start conditions fail here is skipped.

        ConditionedService("irqbalance", running=True, enabled=True)
    """

    def read(self) -> str:
        return super().read() + "\n" + sh(
            "printf 'condition='; systemctl show -p ConditionResult --value -- %s\n"
            "printf 'condition_ts='; systemctl show -p ConditionTimestampMonotonic --value -- %s\n"
            "printf 'conditions='; systemctl cat -- %s 2>/dev/null | grep '^Condition' | tr '\\n' ' '; echo",
            self.unit, self.unit, self.unit,
        )

    def plan(self, current: str) -> Plan:
        plan = super().plan(current)
        st = kv_lines(current)
        declined = st.get("condition") == "no" and st.get("condition_ts", "0").strip() not in ("", "0")
        if not (declined and self.running and "running" in plan.changes):
            return plan
        start = sh("systemctl start -- %s", self.unit)
        plan.commands = [c for c in plan.commands if c != start]
        plan.changes.pop("running")
        why = (f"{self.unit}: its start conditions are not met on this host "
               f"({st.get('conditions', '').strip() or 'see systemctl status'}): systemd keeps it stopped")
        if not plan.commands or plan.commands == ["systemctl daemon-reload"]:
            return Plan.skip(why)
        plan.reason = why
        return plan
