"""The testinfra peer of ``bringup audit`` (bench/compare.py part (d)): the same checks, one test per audit item.

    BENCH_AUDIT_JSON=spec.json pytest -q -p no:cacheprovider bench/peers/audit_testinfra.py \
        --hosts=paramiko://root@127.0.0.1:PORT --ssh-identity-file=KEY
    BENCH_AUDIT_JSON=spec.json pytest -q -p no:cacheprovider -p bringup.testinfra.plugin \
        bench/peers/audit_testinfra.py --hosts=bringup://HOST --bringup-inventory=hosts

The same tests run over testinfra's paramiko backend and over bringup's (bringup.testinfra: the inventory's
connection, one kept connection per host with TCP_NODELAY, each command a script on bringup's transport).

spec.json is written by compare.py: every item the audit of that host checks (its id, its role's declared
values: a file's sha256, mode and owner, a key's value, a unit's wanted state, ...) and the outcome bringup's
audit gave it.  This module imports neither bringup nor its roles: each test reads the same facts from the host
with testinfra's modules (``host.file``, ``host.sysctl``, ``host.service``, ``host.package``, ``host.docker``,
``host.run``) and decides by itself, as the audit's resource does, whether the item holds, fails or is skipped
(a key this kernel hides, a unit whose start conditions say no, IRQs in a container, no GPU on a cpu profile).
An item kind without a test here stops the collection, so a new audit check cannot go unmatched.
"""
from __future__ import annotations

import fnmatch
import json
import os
import re
import socket

import pytest

SPEC = json.loads(open(os.environ["BENCH_AUDIT_JSON"]).read())
ITEMS = SPEC["items"]
KINDS = ("sysctl", "file", "directory", "packages", "service", "irq", "cpufreq", "sysfs", "json", "expect",
         "command", "skip", "unused")
_unmatched = sorted({i["kind"] for i in ITEMS} - set(KINDS))
assert not _unmatched, f"audit item kinds without a testinfra test: {', '.join(_unmatched)}"


def items(kind: str) -> list:
    return [pytest.param(i, id=i["id"]) for i in ITEMS if i["kind"] == kind]


@pytest.fixture(scope="module", autouse=True)
def nodelay(host):
    """Its best configuration: TCP_NODELAY on the one paramiko connection the backend keeps (as bringup, the
    floor and OpenSSH set it); without it each command waits out a delayed ACK.  bringup's backend sets it;
    BENCH_TESTINFRA_NODELAY=0 leaves testinfra's backend as it ships."""
    if host.backend.NAME == "paramiko" and os.environ.get("BENCH_TESTINFRA_NODELAY", "1") != "0":
        host.backend.client.get_transport().sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


@pytest.fixture(scope="module")
def container(host) -> str | None:
    """What says this host is a container (bringup's fact ``system.container``: systemd's record first)."""
    rec = host.file("/run/systemd/container")
    if rec.exists and rec.content_string.strip():
        return f"/run/systemd/container says {rec.content_string.strip()}"
    virt = host.run("systemd-detect-virt --container")
    if virt.rc == 0 and virt.stdout.strip() not in ("", "none"):
        return f"systemd-detect-virt --container says {virt.stdout.strip()}"
    for marker in ("/.dockerenv", "/run/.containerenv"):
        if host.file(marker).exists:
            return f"{marker} exists"
    return None


@pytest.fixture(scope="module")
def nvidia_gpus(host) -> list[str]:
    """PCI display-class devices of vendor 0x10de (bringup's fact ``pci.devices``, kind gpu)."""
    out = host.check_output("for d in /sys/bus/pci/devices/*; do [ -r \"$d/vendor\" ] || continue; "
                            "[ \"$(cat \"$d/vendor\")\" = 0x10de ] && case $(cat \"$d/class\") in 0x03*) "
                            "echo \"${d##*/}\";; esac; done; true")
    return out.split()


def _writable(host, path: str) -> bool:
    return host.run("test -w %s", path).rc == 0


@pytest.mark.parametrize("item", items("sysctl"))
def test_sysctl(host, item):
    if not _writable(host, item["proc"]):
        if not host.file(item["proc"]).exists:
            pytest.skip(f"{item['key']}: this kernel has no such key")
        pytest.skip(f"{item['key']}: read-only here (a network namespace)")
    have = " ".join(str(host.sysctl(item["key"])).split())
    assert have == _kept(item["value"], have, item["keep"])


def _kept(want: str, have: str, keep: str | None) -> str:
    """What the host must hold for ``want``: a limit the host set larger is kept (``floor``: each field the
    larger; ``range``: the lower low, the higher high), as the sysctl role keeps it; else ``want`` itself."""
    w, h = want.split(), have.split()
    if not keep or len(w) != len(h) or not all(x.lstrip("-").isdigit() for x in w + h):
        return want
    wi, hi = [int(x) for x in w], [int(x) for x in h]
    out = [min(wi[0], hi[0]), max(wi[1], hi[1])] if keep == "range" else [max(a, b) for a, b in zip(wi, hi)]
    return " ".join(map(str, out))


def _mode_and_owner(f, item) -> None:
    """The mode, owner and group the role declares (each only where it declares one)."""
    if item["mode"]:
        assert f.mode == int(item["mode"], 8)
    if item["owner"]:
        assert f.user == item["owner"]
    if item["group"]:
        assert f.group == item["group"]


@pytest.mark.parametrize("item", items("file"))
def test_file(host, item):
    f = host.file(item["path"])
    assert not f.is_symlink
    assert f.is_file
    assert f.sha256sum == item["sha256"]
    _mode_and_owner(f, item)


@pytest.mark.parametrize("item", items("directory"))
def test_directory(host, item):
    d = host.file(item["path"])
    assert not d.is_symlink
    assert d.is_directory
    _mode_and_owner(d, item)


@pytest.mark.parametrize("item", items("packages"))
def test_packages(host, item):
    for name, pin in item["packages"].items():
        p = host.package(name)
        assert p.is_installed == item["present"], name
        if pin and item["present"]:
            assert fnmatch.fnmatchcase(p.version, pin), f"{name} {p.version}, want {pin}"


@pytest.mark.parametrize("item", items("service"))
def test_service(host, item):
    s = host.service(item["unit"])
    if item["enabled"] is not None:
        assert s.is_enabled == item["enabled"]
    if item["running"] is None or s.is_running == item["running"]:
        return
    props = s.systemd_properties
    if item["conditioned"] and item["running"] and props.get("ConditionResult") == "no" \
            and props.get("ConditionTimestampMonotonic", "0") not in ("", "0"):
        pytest.skip(f"{item['unit']}: its start conditions are not met on this host")
    pytest.fail(f"{item['unit']} running is {not item['running']}, want {item['running']}")


def _cpulist(text: str) -> list[int]:
    cpus: set[int] = set()
    for part in text.strip().split(","):
        lo, _, hi = part.partition("-")
        cpus.update(range(int(lo), int(hi or lo) + 1))
    return sorted(cpus)


@pytest.mark.parametrize("item", items("irq"))
def test_irq(host, item, container):
    f = host.file(item["path"])
    if not f.exists:
        pytest.skip(f"IRQ {item['name']}: no such IRQ on this host now")
    if container and not item["in_container"]:
        pytest.skip(f"IRQ {item['name']}: this host is a container ({container})")
    refused = host.file(item["refused_file"])
    if refused.exists and any(l.split()[:1] == [str(item["irq"])] for l in refused.content_string.splitlines()):
        pytest.skip(f"IRQ {item['name']}: the kernel refuses to move it")
    assert _cpulist(f.content_string) == item["cpus"]


@pytest.mark.parametrize("item", items("cpufreq"))
def test_cpufreq(host, item):
    listing = host.run("ls -d /sys/devices/system/cpu/cpu[0-9]*/cpufreq 2>/dev/null").stdout.split()
    if not listing:
        pytest.skip("no cpufreq on this host (a VM, or no frequency driver loaded)")
    if not any(_writable(host, f"{d}/scaling_governor") for d in listing):
        pytest.skip("cpufreq is read-only here (a container's /sys)")
    for d in listing:
        assert host.file(f"{d}/scaling_governor").content_string.strip() == item["governor"], d
        epp = host.file(f"{d}/energy_performance_preference")
        if item["epp"] and epp.exists:
            assert epp.content_string.strip() == item["epp"], d


@pytest.mark.parametrize("item", items("sysfs"))
def test_sysfs(host, item):
    f = host.file(item["path"])
    if not f.exists:
        pytest.skip(f"{item['path']}: not on this kernel")
    text = f.content_string
    m = re.search(r"\[([^\]]+)\]", text)
    have = m.group(1) if m else text.strip()
    if have != item["value"] and not _writable(host, item["path"]):
        pytest.skip(f"{item['path']}: read-only here (a container's /sys); it is {have}")
    assert have == item["value"]


def _contains(have, want) -> bool:
    """``have`` holds every key of ``want``, objects compared key by key (a None value: the key is absent)."""
    if isinstance(want, dict):
        return isinstance(have, dict) and all((k not in have) if v is None else (k in have and _contains(have[k], v))
                                              for k, v in want.items())
    return have == want


@pytest.mark.parametrize("item", items("json"))
def test_json(host, item):
    """A JSON file the role merges keys into (docker's daemon.json): a JSON object holding them (no file holds
    none: nothing wanted is no file needed); a file whose keys hold a secret is given by their sha256 only, so
    only the file is checked."""
    f = host.file(item["path"])
    if "keys" not in item:
        assert f.is_file and not f.is_symlink
        return
    have = {}
    if f.exists:
        assert f.is_file and not f.is_symlink
        have = json.loads(f.content_string or "{}")
    assert _contains(have, item["keys"])


def expect_pm_qos(host, item):
    """cpu_tuning: the PM QoS request in force is at most cpu_dma_latency_us (no device: nothing held)."""
    dev = host.file("/dev/cpu_dma_latency")
    if dev.exists:
        assert int(host.check_output("od -An -td4 -N4 -- /dev/cpu_dma_latency").split()[0]) <= item["limit_us"]


def expect_compose(host, item):
    """docker: a compose works, the v2 plugin or v1."""
    assert host.run("docker compose version").rc == 0 or host.run("docker-compose version").rc == 0


def expect_no_file(host, item):
    """dcgm_exporter skipped on this host: its unit file is not there."""
    assert not host.file(item["name"][len("no "):]).exists


def expect_no_container(host, item):
    """dcgm_exporter skipped on this host: no container of that name."""
    name = item["name"][len("no container "):]
    assert not [c for c in host.docker.get_containers(name=name) if c.name == name]


EXPECTS = [("PM QoS request", expect_pm_qos), ("compose", expect_compose), ("no container ", expect_no_container),
           ("no /", expect_no_file)]
_unmatched = [i["id"] for i in ITEMS if i["kind"] == "expect" and not any(i["name"].startswith(p) for p, _ in EXPECTS)]
assert not _unmatched, f"audit expect items without a testinfra test: {', '.join(_unmatched)}"


@pytest.mark.parametrize("item", items("expect"))
def test_expect(host, item):
    next(check for prefix, check in EXPECTS if item["name"].startswith(prefix))(host, item)


@pytest.mark.parametrize("item", items("command"))
def test_command(host, item):
    """A guarded command would not run: its guard says the work is done (or its condition is not met)."""
    done = ((item["creates"] and host.file(item["creates"]).exists)
            or (item["removes"] and not host.file(item["removes"]).exists)
            or (item["unless"] and host.run(item["unless"]).rc == 0)
            or (item["onlyif"] and host.run(item["onlyif"]).rc != 0))
    assert done, f"{item['name']} would run"


@pytest.mark.parametrize("item", items("skip"))
def test_skip(host, item, nvidia_gpus):
    """A role that skips this host: the fact it skips on still holds (no NVIDIA GPU), then skipped."""
    if "no NVIDIA GPU" in item["reason"]:
        assert not nvidia_gpus
    pytest.skip(item["reason"])


@pytest.mark.parametrize("item", items("unused"))
def test_unused(host, item):
    """Nothing asked of this role here (an inventory choice): skipped without reading the host, as the audit."""
    pytest.skip(item["reason"])
