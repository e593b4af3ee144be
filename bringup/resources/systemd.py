"""systemd units: running or stopped, enabled or disabled."""
from __future__ import annotations

import re

from ..command import sh
from ..errors import InputError
from .base import Plan, Resource, kv_lines

__all__ = ["Service", "SYSTEMD_FACT", "without_systemd"]

#: The fact a role that manages units declares (in its FACTS) to use :func:`without_systemd`.
SYSTEMD_FACT = "system.systemd"


def without_systemd(host, what: str, instead: str):
    """A :class:`~bringup.resources.guard.Skip` saying why ``what`` is left to the host's init system when
    systemd is not PID 1 there (a container, a VM whose PID 1 is something else); None when systemd runs.

    ``instead`` says what the operator does then ("start dockerd with this host's init system").
    """
    from .guard import Skip

    state = host.facts.get(SYSTEMD_FACT) or {}
    if state.get("booted"):
        return None
    return Skip(what, f"systemd is not running (PID 1 is {state.get('pid1') or 'unknown'}): {instead}")

#: ``systemctl show``'s names for what the plan reads as ``load`` and ``active``.
_STATES = {"LoadState": "load", "ActiveState": "active"}

_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+$")


class Service(Resource):
    """A systemd unit in the wanted state.

        Service("irqbalance", running=True, enabled=True)

    ``None`` leaves that aspect alone; ``daemon_reload`` reloads unit files
    first (after a unit file changed).
    """

    kind = "service"
    read_alongside = True

    def __init__(self, unit: str, *, running: bool | None = None, enabled: bool | None = None,
                 daemon_reload: bool = False, notify=()):
        if not _UNIT.match(unit):
            raise InputError(f"unit name {unit!r} is malformed")
        super().__init__(unit, notify=notify)
        self.unit, self.running, self.enabled, self.daemon_reload = unit, running, enabled, daemon_reload

    def read(self) -> str:
        return sh(
            "if [ ! -d /run/systemd/system ]; then echo systemd=no; exit 0; fi\n"
            # One systemctl for both states (is-active prints ActiveState); is-enabled stays its own call:
            # `show`'s UnitFileState has no answer for a SysV script that systemd-sysv-install enables.
            "systemctl show -p LoadState -p ActiveState -- %s\n"
            "printf 'enabled='; systemctl is-enabled -- %s 2>/dev/null || echo",
            self.unit, self.unit,
        )

    def plan(self, current: str) -> Plan:
        st = {_STATES.get(k, k): v for k, v in kv_lines(current).items()}
        if st.get("systemd") == "no":
            return Plan.fail(f"{self.unit}: systemd is not running on this host")
        cmds: list[str] = []
        changes: dict = {}
        if st.get("load") == "not-found":
            if self.running is None and self.enabled is None:
                return Plan.noop(f"{self.unit} is not installed")
            # All reads of a role happen before its writes: the unit file or
            # package may come from an earlier resource of the same role.  If
            # it does not, systemctl fails on apply, attributed to this unit.
            changes["unit"] = ("not found yet", "loaded")
            st = {"active": "inactive", "enabled": "not-found"}
            cmds.append("systemctl daemon-reload")
        active = st.get("active", "")
        enabled = st.get("enabled", "")
        if self.enabled is True and enabled not in ("enabled", "static", "alias", "indirect", "generated"):
            if enabled == "masked":
                cmds.append(sh("systemctl unmask -- %s", self.unit))
            cmds.append(sh("systemctl enable -- %s", self.unit))
            changes["enabled"] = (enabled or "unknown", "enabled")
        elif self.enabled is False and enabled == "enabled":
            cmds.append(sh("systemctl disable -- %s", self.unit))
            changes["enabled"] = ("enabled", "disabled")
        if self.running is True and active != "active":
            cmds.append(sh("systemctl start -- %s", self.unit))
            changes["running"] = (active or "unknown", "active")
        elif self.running is False and active in ("active", "activating", "reloading"):
            cmds.append(sh("systemctl stop -- %s", self.unit))
            changes["running"] = (active, "inactive")
        if not cmds:
            bits = [f"{self.unit} is {active}"] + ([f"and {enabled}"] if enabled else [])
            return Plan.noop(" ".join(bits))
        if self.daemon_reload and "systemctl daemon-reload" not in cmds:
            cmds.insert(0, "systemctl daemon-reload")
        return Plan(commands=cmds, changes=changes)
