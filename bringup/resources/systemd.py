"""systemd units: running or stopped, enabled or disabled."""
from __future__ import annotations

import re

from ..ssh.command import sh
from ..errors import InputError
from .base import Plan, Resource, kv_lines

__all__ = ["Service", "SYSTEMD_FACT", "without_systemd", "restart_on_config"]

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
            if active == "failed":
                # A unit that hit its start limit refuses a start until its failure is cleared.
                cmds.append(sh("systemctl reset-failed -- %s", self.unit))
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


def restart_on_config(unit: str, *configs: str) -> str:
    """Shell (a handler): restart ``unit`` to read ``configs``; a restart that fails puts the files back.

        HANDLERS = {"restart docker": [restart_on_config("docker.service", "/etc/docker/daemon.json")]}

    - Not restarted when the unit runs and started after every config file last changed (a handler
      owed by a cut-off run whose change the service already read: no needless restart).
    - A failed start clears the unit's failure first, so an earlier burst of restarts (systemd's start
      limit) never keeps it down.
    - When the restart fails, each config that bringup replaced since the unit last started goes back
      to its newest backup (``<path>.<stamp>.bak``, made by the write); one bringup created is moved to
      ``<path>.<stamp>.rejected``; the unit is started again, and the handler fails with the unit's
      own last log lines.  Files nobody changed since the start are left as they are.
    """
    from .files import backups_glob

    lines = [
        sh("u=%s", unit),
        # Microseconds where systemd prints them (247 on): a file written and read in one second is
        # still told apart from one written after the start.
        'started=$(systemctl show --timestamp=us -p ExecMainStartTimestamp --value -- "$u" 2>/dev/null '
        '|| systemctl show -p ExecMainStartTimestamp --value -- "$u" 2>/dev/null)',
        'since=0; [ -z "$started" ] || since=$(date -d "$started" +%s.%N 2>/dev/null || echo 0)',
        'stamp=$(date -d "@${since%.*}" +%Y%m%dT%H%M%S)',
        "newest=0",
    ]
    for c in configs:
        lines.append(sh("if [ -e %s ]; then m=$(stat -c %%.9Y -- %s 2>/dev/null || stat -c %%Y -- %s); "
                        "newest=$(awk -v a=\"$m\" -v b=\"$newest\" 'BEGIN { print (a > b) ? a : b }'); fi",
                        c, c, c))
    lines += [
        "if systemctl is-active --quiet -- \"$u\" && awk -v a=\"$since\" -v b=\"$newest\" 'BEGIN { exit !(a > b) }'; then",
        '  echo "$u runs since $started, after its config last changed: not restarted"',
        "else",
        '  systemctl reset-failed -- "$u" 2>/dev/null || true',
        '  if ! err=$(systemctl restart -- "$u" 2>&1); then',
        # The service's own words: the journal less systemd's lines about the unit and info chatter.
        '    why=$(journalctl -u "$u" --since "@${since%.*}" -n 60 --no-pager -o cat 2>/dev/null '
        "| grep -v -e '^$' -e \"^$u:\" -e '^Stopp' -e '^Start' -e '^Failed to start' "
        "-e 'level=info' -e 'level=warning' -e 'level=debug' | tail -n 1)",
        '    [ -n "$why" ] || why=$err',
        '    put=',
    ]
    for c in configs:
        lines += [
            # The newest backup made since the unit last started: what the file held before bringup wrote it.
            "    b=; for f in " + backups_glob(c) + "; do [ -f \"$f\" ] || continue; "
            "s=${f%.bak}; s=${s##*.}; [ \"$s\" \\< \"$stamp\" ] || b=$f; done",
            sh('    if [ -n "$b" ]; then cp -p -- "$b" %s.bringup-restore && mv -f -- %s.bringup-restore %s '
               '&& put="$put, $b put back as %s"', c, c, c, c),
            sh('    elif [ -e %s ] && [ "$(stat -c %%Y -- %s)" -ge "${since%%.*}" ] && [ "${since%%.*}" -gt 0 ]; then '
               'r=%s.$(date +%%Y%%m%%dT%%H%%M%%S).rejected; mv -f -- %s "$r" && put="$put, %s moved to $r"; fi',
               c, c, c, c, c),
        ]
    lines += [
        '    systemctl reset-failed -- "$u" 2>/dev/null || true',
        '    if [ -n "$put" ] && systemctl restart -- "$u"; then again="$u runs again on the previous config";',
        '    else again="$u is still down"; fi',
        '    echo "$u did not start with the new config: $why; ${put#, }${put:+; }$again"',
        "    exit 1",
        "  fi",
        "fi",
    ]
    return "\n".join(lines)
