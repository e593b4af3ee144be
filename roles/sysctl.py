"""Low-latency network tuning through sysctl, by profile.

Every key's value names where it comes from.  The inventory variable
``sysctl`` (a mapping) overrides or adds keys; a key set to null drops a
default.  Values are persisted to /etc/sysctl.d/90-trt-latency.conf and the
live value is written only where it differs.  A key this kernel lacks (inside
a network namespace some net.core keys are hidden) is skipped per key.

Variables:
    sysctl_profile: ``network-latency`` (default) or ``none``.
    sysctl: mapping of extra or overriding keys, null to drop one.
"""
from __future__ import annotations

from typing import Any, Literal

from bringup.resources import File, Sysctl
from bringup.resources.sysctl import normalize_value, validate_key
from bringup.vars import RoleVars, want

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


def table(vars: dict) -> dict[str, tuple[str, str]]:
    """The wanted keys: profile defaults, then the ``sysctl`` mapping (each key and value checked)."""
    profile = vars.get("sysctl_profile", "network-latency")
    wanted = {k: (normalize_value(k, v), src) for k, (v, src) in PROFILES[profile].items()}
    for key, value in (vars.get("sysctl") or {}).items():
        validate_key(key)
        if value is None:
            wanted.pop(key, None)
        else:
            wanted[key] = (normalize_value(key, value), "inventory variable sysctl")
    return wanted


#: The facts this role reads (only these are gathered for it).
FACTS = ("system.sysctl_writable",)

class Vars(RoleVars):
    sysctl_profile: Literal[tuple(PROFILES)] = want("network-latency", f"is unknown; use one of {', '.join(PROFILES)}")
    sysctl: dict[str, Any] = want({}, "must be a mapping of key: value (null drops a key)")


def validate(vars: dict) -> None:
    """Each key and value of ``sysctl`` (the kernel's names and ranges: what a type cannot say)."""
    table(vars)


def resources(host):
    wanted = table(host.vars)
    writable = set(host.facts.get("system.sysctl_writable") or ())
    # Persist only what this kernel lets us set: a missing or read-only key
    # would make systemd-sysctl fail at boot.  No fact at all: persist everything.
    present = {k: v for k, v in wanted.items() if not writable or k in writable}
    missing = sorted(set(wanted) - set(present))
    content = host.render("sysctl/90-trt-latency.conf.j2",
                          profile=host.vars.get("sysctl_profile", "network-latency"),
                          entries=sorted(present.items()), missing=missing)
    # Live values first, the file last: a value the kernel rejects stops the role before it is
    # persisted, so the next boot never applies what failed now.
    return [Sysctl(key, value) for key, (value, _src) in sorted(wanted.items())] + [
        File(PERSIST_FILE, content=content, mode="0644")]
