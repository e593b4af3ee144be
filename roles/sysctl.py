"""Low-latency network tuning through sysctl, by profile.

Every key's value names where it comes from.  The inventory variable
``sysctl`` (a mapping) overrides or adds keys; a key set to null drops a
default.  Values are persisted to /etc/sysctl.d/90-trt-latency.conf and the
live value is written only where it differs.  A key this kernel lacks (inside
a network namespace some net.core keys are hidden) is skipped per key.

Limits the host already set larger are kept (issue 34: the H200 VM's own sysctl.d set ``tcp_rmem``'s
maximum to 33554432, the profile's is 16777216).  A profile raises these, never lowers them
(:data:`FLOORS`):

- floors, each field the larger of the host's and the profile's: ``net.core.rmem_max``,
  ``net.core.wmem_max``, ``net.ipv4.tcp_rmem`` and ``net.ipv4.tcp_wmem`` (min, default and max: each a
  buffer size), ``net.core.netdev_max_backlog``, ``net.core.somaxconn``, ``net.ipv4.tcp_max_syn_backlog``;
- widened only: ``net.ipv4.ip_local_port_range`` (the lower low, the higher high; a host range that
  reaches Triton's ports 8000-8002 is kept as it is: reserve them with ``net.ipv4.ip_local_reserved_ports``).

The other keys are settings, not limits (``busy_poll``, ``tcp_fastopen``'s bits, ``swappiness``...): the
profile's value is set as given.  A value from the ``sysctl`` variable is the operator's and is set as given,
smaller or not: the way to lower a kept limit (the file keeps what it kept, so a reboot does not lower
it).  The host's value comes from the fact ``system.sysctl`` for the persisted file (its comment says what
was kept and why) and from the live read for the live value (the plan says the same).

Variables:
    sysctl_profile: ``network-latency`` (default) or ``none``.
    sysctl: mapping of extra or overriding keys, null to drop one.
"""
from __future__ import annotations

from typing import Any, Literal

from bringup.resources import File, Sysctl
from bringup.resources.guard import unread_facts
from bringup.resources.sysctl import keep_larger, normalize_value, validate_key
from bringup.inventory.vars import RoleVars, want

PERSIST_FILE = "/etc/sysctl.d/90-trt-latency.conf"

_TUNED_NL = "tuned network-latency profile"
_TUNED_NT = "tuned network-throughput profile"
_IP_SYSCTL = "kernel Documentation/networking/ip-sysctl.rst"

#: profile -> key -> (value, source).
PROFILES: dict[str, dict[str, tuple[object, str]]] = {
    "network-latency": {
        # Accept bursts instead of dropping SYNs (the guide: "提升突发接入能力").
        "net.core.somaxconn": (4096, "Linux 5.4 default (commit 19f92a030ca6), raised on older kernels"),
        "net.ipv4.tcp_max_syn_backlog": (8192, f"{_IP_SYSCTL}: raise with somaxconn for connection bursts"),
        "net.core.netdev_max_backlog": (16384, "Red Hat network performance tuning guide: raise when "
                                               "/proc/net/softnet_stat shows drops at 10/25GbE"),
        "net.core.rmem_max": (16777216, f"{_TUNED_NT} (16 MiB buffer maximum)"),
        "net.core.wmem_max": (16777216, f"{_TUNED_NT} (16 MiB buffer maximum)"),
        "net.ipv4.tcp_rmem": ("4096 131072 16777216", _TUNED_NT),
        "net.ipv4.tcp_wmem": ("4096 16384 16777216", _TUNED_NT),
        "net.ipv4.tcp_fastopen": (3, _TUNED_NL),
        "net.core.busy_read": (50, _TUNED_NL),
        "net.core.busy_poll": (50, _TUNED_NL),
        "net.ipv4.tcp_slow_start_after_idle": (0, f"{_IP_SYSCTL}: keep cwnd on idle keep-alive/gRPC connections"),
        "net.ipv4.tcp_tw_reuse": (1, f"{_IP_SYSCTL}: 1 reuses TIME-WAIT for outgoing connections (default 2: loopback only)"),
        "net.ipv4.ip_local_port_range": ("10240 65535", f"{_IP_SYSCTL}: more ephemeral ports, none below "
                                                        "Triton's 8000-8002 and the exporters' 9100/9400"),
        "kernel.numa_balancing": (0, f"{_TUNED_NL}: no page migration under pinned Triton workers"),
        "vm.swappiness": (10, "tuned latency-performance profile"),
    },
    "none": {},
}


#: The profile keys that are limits a host may have set larger: key -> (how it is kept, its fields' names).
#: ``floor``: each field the larger; ``range``: the wider range (bringup.resources.sysctl.keep_larger).
FLOORS: dict[str, tuple[str, tuple[str, ...]]] = {
    "net.core.somaxconn": ("floor", ()),
    "net.ipv4.tcp_max_syn_backlog": ("floor", ()),
    "net.core.netdev_max_backlog": ("floor", ()),
    "net.core.rmem_max": ("floor", ()),
    "net.core.wmem_max": ("floor", ()),
    "net.ipv4.tcp_rmem": ("floor", ("min", "default", "max")),
    "net.ipv4.tcp_wmem": ("floor", ("min", "default", "max")),
    "net.ipv4.ip_local_port_range": ("range", ("low", "high")),
}

_INVENTORY = "inventory variable sysctl"


def table(vars: dict) -> dict[str, tuple[str, str]]:
    """The wanted keys: profile defaults, then the ``sysctl`` mapping (each key and value checked)."""
    profile = vars.get("sysctl_profile", "network-latency")
    wanted = {k: (normalize_value(k, v), src) for k, (v, src) in PROFILES[profile].items()}
    for key, value in (vars.get("sysctl") or {}).items():
        validate_key(key)
        if value is None:
            wanted.pop(key, None)
        else:
            wanted[key] = (normalize_value(key, value), _INVENTORY)
    return wanted


def _keep(key: str, src: str) -> tuple[str, tuple[str, ...]] | None:
    """How ``key`` is kept when the host set it larger; None: set as given (a setting, or the operator's value)."""
    return FLOORS.get(key) if src != _INVENTORY else None


def persisted(wanted: dict[str, tuple[str, str]], host_values: dict) -> dict[str, tuple[str, str]]:
    """``wanted`` with each floor raised to what the host already has (``system.sysctl``), its source saying so."""
    out = {}
    for key, (value, src) in wanted.items():
        keep = _keep(key, src)
        if keep:
            value, notes = keep_larger(key, value, host_values.get(key), keep[0], fields=keep[1])
            if notes:
                src = f"{src}; {'; '.join(notes)}"
        out[key] = (value, src)
    return out


#: The facts this role reads (only these are gathered for it).
FACTS = ("system.sysctl_writable", "system.sysctl")

class Vars(RoleVars):
    sysctl_profile: Literal[tuple(PROFILES)] = want("network-latency", f"is unknown; use one of {', '.join(PROFILES)}")
    sysctl: dict[str, Any] = want({}, "must be a mapping of key: value (null drops a key)")


def fact_keys(vars: dict) -> dict[str, list[str]]:
    """The keys this role reads of its facts: its wanted keys (the host's value of a floor, and whether a key
    is writable), so that a run reads those alone, not ``sysctl -a`` and the whole of /proc/sys."""
    keys = sorted(table(vars))
    return {"system.sysctl": keys, "system.sysctl_writable": keys}


def validate(vars: dict) -> None:
    """Each key and value of ``sysctl`` (the kernel's names and ranges: what a type cannot say)."""
    table(vars)


def resources(host):
    # The host's own values are floors (never shrunk) and its writable keys what is persisted: either unread, the
    # host is left as it is.
    refused = unread_facts(host, FACTS, "sysctl")
    if refused:
        return [refused]
    wanted = table(host.vars)
    writable = set(host.facts.get("system.sysctl_writable") or ())
    # Persist only what this kernel lets us set: a missing or read-only key
    # would make systemd-sysctl fail at boot.  No fact at all: persist everything.
    kept = persisted(wanted, host.facts.get("system.sysctl") or {})
    present = {k: v for k, v in kept.items() if not writable or k in writable}
    missing = sorted(set(wanted) - set(present))
    content = host.render("sysctl/90-trt-latency.conf.j2",
                          profile=host.vars.get("sysctl_profile", "network-latency"),
                          entries=sorted(present.items()), missing=missing)
    # Live values first, the file last: a value the kernel rejects stops the role before it is
    # persisted, so the next boot never applies what failed now.
    live = []
    for key, (value, src) in sorted(wanted.items()):
        how, fields = _keep(key, src) or (None, ())
        live.append(Sysctl(key, value, keep=how, fields=fields))
    return live + [
        File(PERSIST_FILE, content=content, mode="0644")]
