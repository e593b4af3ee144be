"""Issue 34 item 6: a latency profile never shrinks a limit the host already set larger.

The real case: the H200 VM (Ubuntu 24.04, its own sysctl.d files) has ``net.ipv4.tcp_rmem`` = 4096 131072
33554432; the profile's maximum is 16777216, and the role used to lower it.  Planned here from the VM's own
outputs: ``sysctl -a`` of its raw facts bundle and the selected sysctls captured beside it
(tests/fixtures/hosts/h200-vm/sysctl.txt), both unedited.
"""
from __future__ import annotations

import pytest

from bringup.facts.system import parse_sysctl
from bringup.resources import File, Sysctl
from bringup.resources.sysctl import keep_larger

from .fixture_hosts import FIX
from .h200_offline import declare, facts

import roles.sysctl as S

CHECKS = ("machine left alone",)


def _plans(resources, host_values: dict) -> dict:
    """Each Sysctl's plan from what its read prints on a host with ``host_values``."""
    return {r.key: r.plan(f"value={host_values[r.key]}\n") for r in resources if isinstance(r, Sysctl)}


def _fields(text: str) -> list[int]:
    return [int(x) for x in text.split()]


@pytest.mark.reliability(item=34, fault="the H200 VM's own tcp_rmem maximum (33554432) above the profile's "
                         "(16777216): a real sysctl -a", checks=CHECKS)
def test_the_h200s_larger_tcp_rmem_maximum_is_kept_and_the_plan_says_so():
    host = facts()["system.sysctl"]
    assert host["net.ipv4.tcp_rmem"] == "4096 131072 33554432"  # the real VM, read through the real parser
    _role, resources = declare("sysctl")
    plans = _plans(resources, host)
    rmem = plans["net.ipv4.tcp_rmem"]
    assert not rmem.changed, rmem.commands
    assert "kept max 33554432: the host's is larger than the profile's 16777216" in rmem.reason
    # What the profile raises, it still raises: tcp_wmem's maximum 4194304, the 4 MiB socket maxima, the backlog.
    assert plans["net.ipv4.tcp_wmem"].changes == {"net.ipv4.tcp_wmem": ("4096 16384 4194304", "4096 16384 16777216")}
    assert plans["net.core.rmem_max"].changes == {"net.core.rmem_max": ("4194304", "16777216")}
    assert plans["net.core.netdev_max_backlog"].changes == {"net.core.netdev_max_backlog": ("1000", "16384")}
    # The port range only widens: 32768-60999 becomes 10240-65535.
    assert plans["net.ipv4.ip_local_port_range"].changes == {
        "net.ipv4.ip_local_port_range": ("32768 60999", "10240 65535")}
    # The next boot keeps it too: the file persists the host's maximum, and says why.
    (conf,) = [r for r in resources if isinstance(r, File)]
    text = conf.content.decode()
    assert "net.ipv4.tcp_rmem = 4096 131072 33554432\n" in text
    assert "16777216\n" not in text.split("net.ipv4.tcp_rmem = ", 1)[1].split("\n", 1)[0]
    assert "kept max 33554432: the host's is larger than the profile's 16777216" in text


@pytest.mark.reliability(item=34, fault="every limit of the profile against the H200's captured sysctls and "
                         "against a host whose limits are all larger", checks=CHECKS)
@pytest.mark.parametrize("source", ["h200 capture", "all larger"])
def test_no_planned_value_is_below_the_hosts_for_any_floor(source):
    host = parse_sysctl((FIX / "h200-vm" / "sysctl.txt").read_text())
    if source == "all larger":  # every floor field ten times the profile's, the range wider (made here)
        for key, (value, _src) in S.PROFILES["network-latency"].items():
            if S.FLOORS.get(key, ("",))[0] == "floor":
                host[key] = " ".join(str(int(x) * 10) for x in str(value).split())
        host["net.ipv4.ip_local_port_range"] = "1024 65535"
    _role, resources = declare("sysctl", facts_over={"system.sysctl": host}, sysctl_profile="network-latency")
    host = {r.key: host[r.key] for r in resources if isinstance(r, Sysctl) and r.key in host}
    plans = _plans([r for r in resources if getattr(r, "key", None) in host], host)
    (conf,) = [r for r in resources if isinstance(r, File)]
    floors = [k for k in S.FLOORS if k in host]
    assert len(floors) >= 7, floors  # the capture holds all but the port range
    for key in floors:
        how = S.FLOORS[key][0]
        have, plan = _fields(host[key]), plans[key]
        got = _fields(plan.changes[key][1]) if plan.changed else have
        if how == "floor":
            assert all(g >= h for g, h in zip(got, have)), (key, have, got)
        else:
            assert got[0] <= have[0] and got[1] >= have[1], (key, have, got)
        if source == "all larger":
            assert not plan.changed and "kept" in plan.reason, (key, plan)
            assert f"{key} = {host[key]}\n" in conf.content.decode()


def test_an_operators_own_value_is_set_as_given_and_settings_are_not_floors():
    """The operator's ``sysctl`` mapping is exact (smaller allowed); busy_poll is a setting: the profile's 50."""
    _role, resources = declare("sysctl", sysctl={"net.ipv4.tcp_rmem": "4096 87380 6291456"})
    plans = _plans(resources, {r.key: ("4096 131072 33554432" if r.key == "net.ipv4.tcp_rmem" else "99999")
                               for r in resources if isinstance(r, Sysctl)})
    assert plans["net.ipv4.tcp_rmem"].changes == {"net.ipv4.tcp_rmem": ("4096 131072 33554432", "4096 87380 6291456")}
    assert plans["net.core.busy_poll"].changes == {"net.core.busy_poll": ("99999", "50")}


@pytest.mark.parametrize("want, have, how, out", [
    ("4096 131072 16777216", "4096 262144 8388608", "floor", "4096 262144 16777216"),  # per field
    ("10240 65535", "1024 60999", "range", "1024 65535"),
    ("10240 65535", "32768 60999", "range", "10240 65535"),
    ("16777216", "", "floor", "16777216"),              # nothing read: as given
    ("4096 131072 16777216", "4096 131072", "floor", "4096 131072 16777216"),  # a cut value: as given
    ("16777216", "abc", "floor", "16777216"),
])
def test_keep_larger_field_by_field(want, have, how, out):
    assert keep_larger("k", want, have, how)[0] == out
