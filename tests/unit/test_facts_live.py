"""Every fact's command, run for real on this machine, and the registry's contract.

Also runs the PCI and NIC commands against a fake sysfs built from the H200
fixture, so that the command (not only the parser) is checked to print the
fixture's format, including the virtio indirection of ``/sys/class/net/X/device``.
"""
from __future__ import annotations

import json
import os
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from bringup.facts import ALL_FACTS, FACTS_BY_NAME, Fact, parse_cpulist
from bringup.facts.base import UntrustedOutput
from bringup.facts.cpu import SYSFS_CPU_WALK, parse_lscpu_parse
from bringup.facts.gather import gather
from bringup.facts.net import NetInterfaces
from bringup.facts.pci import END, PciDevices

REPO = Path(__file__).resolve().parents[2]
from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"

SHELLS = [s for s in ("sh", "dash", "bash") if shutil.which(s)]


def run(command: str, shell: str = "sh") -> str:
    r = subprocess.run([shell, "-c", command], capture_output=True, text=True, timeout=60,
                       stdin=subprocess.DEVNULL)
    return r.stdout


def value_of(fact: type[Fact]) -> object:
    """What gathering gives: the default when the required program is missing or nothing printed."""
    if fact.requires_command and not shutil.which(fact.requires_command):
        return fact.default
    out = run(fact.command)
    return fact.process(out) if out.strip() else fact.default


def roundtrip(value: object) -> object:
    return json.loads(json.dumps(value))


# ---------------------------------------------------------------- registry contract

def test_registry():
    names = [f.name for f in ALL_FACTS]
    assert len(names) == len(set(names))
    assert names[:4] == ["os.release", "os.kernel", "os.boot_id", "cpu.topology"]
    for f in ALL_FACTS:
        assert re.fullmatch(r"[a-z]+\.[a-z_]+", f.name), f.name
        assert FACTS_BY_NAME[f.name] is f
        assert isinstance(f.command, str) and f.command.strip()
        assert isinstance(f.__dict__["process"], staticmethod), f.name
        assert roundtrip(f.default) == f.default
        # no shell comments: a snippet is spliced into one script between markers
        assert not re.search(r"(^|[ \t\n;])#", f.command), f.name


#: The gathering order before facts registered themselves (the hand-kept list of bringup/facts/__init__.py):
#: `invoke facts` writes them in this order and the checklist reads them so; issue 31 added the health facts
#: (net.infiniband, nvidia.nvlink, kernel.xid) and the driver's (driver.owner, driver.fabric_manager).
GATHERING_ORDER = [
    "os.release", "os.kernel", "os.boot_id", "cpu.topology", "pci.devices", "net.interfaces",
    "net.infiniband", "irq.interrupts", "irq.affinity", "nvidia.smi", "nvidia.query", "nvidia.topo",
    "nvidia.nvlink", "driver.owner", "driver.fabric_manager", "system.systemd", "system.docker",
    "system.docker_daemon", "system.sysctl",
    "system.sysctl_writable", "system.cmdline", "system.cpufreq", "system.cpuidle", "system.thp",
    "system.thp_defrag", "system.container", "triton.window", "kernel.xid",
]


def test_registry_keeps_the_gathering_order():
    assert [f.name for f in ALL_FACTS] == GATHERING_ORDER
    assert list(FACTS_BY_NAME) == GATHERING_ORDER
    assert [f.name for f in ALL_FACTS[2:4]] == ["os.boot_id", "cpu.topology"] and ALL_FACTS[-1].name == "kernel.xid"


def test_the_table_names_each_facts_module_in_gathering_order():
    """bringup.facts.MODULES is how a run imports only the fact modules its roles read: a fact missing from it, or
    named under another module, would be unknown to a role or never defined."""
    from bringup.facts import MODULES

    assert list(MODULES) == GATHERING_ORDER
    assert {f.name: f.__module__ for f in ALL_FACTS} == {n: f"bringup.facts.{m}" for n, m in MODULES.items()}


def test_a_run_imports_only_the_modules_of_the_facts_it_reads():
    """In a fresh process: naming the sysctl role's facts imports the system module alone (and what it imports),
    whichever order modules are imported in the registry keeps the gathering order."""
    code = """if True:
        import sys
        from bringup.facts import named
        got = named(["system.sysctl", "system.sysctl_writable"])
        assert [f.name for f in got] == ["system.sysctl", "system.sysctl_writable"], got
        loaded = sorted(m for m in sys.modules if m.startswith("bringup.facts."))
        assert loaded == ["bringup.facts.base", "bringup.facts.helpers", "bringup.facts.system"], loaded
        assert not any(m.startswith("bringup.latency") for m in sys.modules)
        named(["kernel.xid", "nvidia.smi"])
        from bringup.facts import ALL_FACTS
        print(",".join(f.name for f in ALL_FACTS))
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip().split(",") == GATHERING_ORDER


def test_registry_views_are_read_only():
    with pytest.raises(TypeError):
        FACTS_BY_NAME["os.release"] = Fact  # type: ignore[index]
    with pytest.raises(TypeError):
        ALL_FACTS[0] = Fact  # type: ignore[index]


def test_a_facts_default_is_what_its_parser_makes_of_no_output():
    for f in ALL_FACTS:
        assert f.default == f.process("") and type(f.default) is type(f.process("")), f.name


def test_a_defined_fact_registers_itself_and_is_gathered():
    """A class is all it takes: it is in both views, last (definition order), and a raw bundle's output for it
    is parsed by it.  In a child process: the registry of this one stays as shipped."""
    code = """if True:
        from bringup.facts import ALL_FACTS, FACTS_BY_NAME, Fact
        from bringup.facts.gather import parse_raw
        before = len(ALL_FACTS)

        class GpuCount(Fact):
            name = "test.gpu_count"
            command = "ls /dev | grep -c '^nvidia[0-9]'"
            process = staticmethod(lambda output: int(output) if output.strip() else None)

        class _Shared(Fact):  # no name: a base of facts, not registered
            command = "true"

        assert len(ALL_FACTS) == before + 1 and ALL_FACTS[-1] is GpuCount, list(ALL_FACTS)
        assert FACTS_BY_NAME["test.gpu_count"] is GpuCount and "_Shared" not in repr(ALL_FACTS)
        assert GpuCount.default is None  # what its parser makes of no output
        values, errors = parse_raw(ALL_FACTS, {"test.gpu_count": {"rc": 0, "output": "8\\n"}})
        assert values == {"test.gpu_count": 8} and errors == {}, (values, errors)
        print("registered", len(ALL_FACTS))
    """
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=REPO, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"registered {len(GATHERING_ORDER) + 1}"
    assert "test.gpu_count" not in FACTS_BY_NAME


@pytest.mark.parametrize("body, says", [
    ('name = "os.release"\n    command = "true"\n    process = staticmethod(str)',
     "name 'os.release' is taken by bringup.facts.os_.OsRelease"),
    ('name = "OsRelease"\n    command = "true"\n    process = staticmethod(str)',
     "name 'OsRelease' is not <subsystem>.<what>"),
    ('name = "test.no_parser"\n    command = "true"', "set command (a sh snippet) and process"),
    ('name = "test.no_command"\n    process = staticmethod(str)', "set command (a sh snippet) and process"),
    ('name = "test.bad_empty"\n    command = "true"\n    process = staticmethod(int)',
     "process('') raised ValueError: invalid literal for int() with base 10: ''; set default"),
])
def test_a_bad_fact_is_refused_where_it_is_defined(body, says):
    before = list(FACTS_BY_NAME)
    with pytest.raises(TypeError) as e:
        exec(f"class Bad(Fact):\n    {body}\n", {"Fact": Fact})
    assert str(e.value).startswith("fact ") and ".Bad: " in str(e.value) and says in str(e.value)
    assert list(FACTS_BY_NAME) == before


def test_test_parsers_are_not_the_packages():
    import bringup.facts
    import bringup.facts.base

    assert not hasattr(bringup.facts, "strip_comments") and not hasattr(bringup.facts.base, "strip_comments")


@pytest.mark.parametrize("shell", SHELLS)
@pytest.mark.parametrize("fact", ALL_FACTS, ids=lambda f: f.name)
def test_command_syntax(fact, shell):
    r = subprocess.run([shell, "-n", "-c", fact.command], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


#: Facts that refuse a line not in their command's form (net.infiniband: "ibport DEV PORT FILE VALUE" lines only).
STRICT_LINES = {"net.infiniband", "pci.devices", "irq.affinity"}


@pytest.mark.parametrize("fact", ALL_FACTS, ids=lambda f: f.name)
def test_empty_output_is_safe(fact):
    v = fact.process("")
    assert roundtrip(v) == v
    try:
        v = fact.process("sh: 1: something: not found\n")
    except UntrustedOutput as e:
        # A fact whose command prints its own line form alone (stderr is discarded) names any other line.
        assert fact.name in STRICT_LINES and "not in the command's form" in str(e), (fact.name, e)
        return
    assert roundtrip(v) == v


# ---------------------------------------------------------------- run here, for real

@pytest.fixture(scope="module")
def live() -> dict[str, object]:
    return {f.name: value_of(f) for f in ALL_FACTS}


def test_live_values_are_json(live):
    for name, v in live.items():
        assert roundtrip(v) == v, name


def test_live_os(live):
    u = os.uname()
    assert live["os.kernel"]["release"] == u.release and live["os.kernel"]["machine"] == u.machine
    assert live["os.kernel"]["sysname"] == u.sysname
    assert live["os.release"]["id"] == platform.freedesktop_os_release()["ID"]
    assert live["os.boot_id"] == Path("/proc/sys/kernel/random/boot_id").read_text().strip()


def test_live_cpu_topology(live):
    topo = live["cpu.topology"]
    online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    assert topo["online"] == online
    assert topo["cpu_count"] == len(online)
    if not Path("/sys/devices/system/cpu/offline").read_text().strip():
        assert topo["cpu_count"] == os.cpu_count()
    assert sorted(c for cpus in topo["numa_nodes"].values() for c in cpus) == online
    assert sum(len(v) for v in topo["sockets"].values()) == len(online)
    assert topo["threads_per_core"] >= 1


def test_live_cpu_sysfs_fallback_agrees_with_lscpu():
    if not shutil.which("lscpu"):
        pytest.skip("lscpu missing: the fact itself used the sysfs walk")
    a = parse_lscpu_parse(run(FACTS_BY_NAME["cpu.topology"].command))
    b = parse_lscpu_parse(run(SYSFS_CPU_WALK))
    for key in ("cpu_count", "online", "socket_count", "sockets", "threads_per_core", "smt_siblings", "l3_groups"):
        assert a[key] == b[key], key


def test_live_pci_and_net(live):
    base = Path("/sys/bus/pci/devices")
    expected = sorted(os.listdir(base)) if base.is_dir() else []
    assert [d["address"] for d in live["pci.devices"]] == expected
    for d in live["pci.devices"]:
        assert d["local_cpus"] and isinstance(d["numa_node"], int)
    phys = sorted(n for n in os.listdir("/sys/class/net") if Path(f"/sys/class/net/{n}/device").exists())
    assert [n["name"] for n in live["net.interfaces"]] == phys
    for nic in live["net.interfaces"]:
        if nic["pci_address"]:
            pci = next(d for d in live["pci.devices"] if d["address"] == nic["pci_address"])
            assert set(pci["msi_irqs"]) <= set(nic["irqs"])
            assert nic["numa_node"] == pci["numa_node"]


def test_live_irqs(live):
    it = live["irq.interrupts"]
    online = parse_cpulist(Path("/sys/devices/system/cpu/online").read_text())
    assert it["cpus"] == online and it["header"] is True
    assert all(len(r["counts"]) == len(online) for r in it["irqs"].values())
    assert "LOC" in it["other"] or platform.machine() != "x86_64"
    aff = live["irq.affinity"]
    procirq = {p.name for p in Path("/proc/irq").iterdir() if p.name.isdigit()}
    assert set(aff) <= procirq
    for a in aff.values():
        assert set(a["affinity"]) <= set(range(os.cpu_count() or 1)) | set(a["affinity"])


def test_live_nvidia(live):
    if shutil.which("nvidia-smi") is None:
        assert live["nvidia.smi"] == [] and live["nvidia.query"] == {} and live["nvidia.topo"] == {}
    else:
        assert live["nvidia.smi"] and live["nvidia.query"]["gpus"]
        assert len(live["nvidia.smi"]) == len(live["nvidia.query"]["gpus"]) == len(live["nvidia.topo"]["gpus"])


def test_live_system(live):
    sd = live["system.systemd"]
    assert sd["pid1"] == Path("/proc/1/comm").read_text().strip()
    assert sd["booted"] == Path("/run/systemd/system").is_dir()
    if shutil.which("systemctl"):
        assert isinstance(sd["version"], int)
    if shutil.which("docker"):  # {} when the client printed nothing on stdout (no access)
        d = live["system.docker"]
        assert d == {} or set(d) >= {"server_version", "runtimes", "default_runtime", "errors"}
    else:
        assert live["system.docker"] == {}
    if shutil.which("sysctl"):
        assert live["system.sysctl"]["kernel.ostype"] == "Linux"
    assert live["system.cmdline"]["raw"] == " ".join(Path("/proc/cmdline").read_text().split())
    has_freq = Path("/sys/devices/system/cpu/cpu0/cpufreq/scaling_governor").exists()
    assert (live["system.cpufreq"] is None) == (not has_freq)
    idle = sorted(Path("/sys/devices/system/cpu/cpu0/cpuidle").glob("state[0-9]*"))
    if live["system.cpuidle"] is not None:
        assert [s["name"] for s in live["system.cpuidle"]["states"]] == [
            (p / "name").read_text().strip() for p in sorted(idle, key=lambda p: int(p.name[5:]))]
    else:
        assert not idle
    thp = Path("/sys/kernel/mm/transparent_hugepage/enabled")
    if thp.exists():
        assert live["system.thp"] in thp.read_text().replace("[", " ").replace("]", " ").split()
    if not Path("/etc/docker/daemon.json").exists():
        assert live["system.docker_daemon"] is None


class _LocalSh:
    """A transport that runs the gathered script here, as the real ones do remotely."""

    def run_script(self, script: str):
        r = subprocess.run(["sh", "-c", 'eval "$(cat)"'], input=script, capture_output=True, text=True, timeout=120)
        return type("R", (), {"rc": r.returncode, "stdout": r.stdout, "stderr": r.stderr})()


def test_gathered_in_one_script(live):
    values, errors = gather(_LocalSh(), ALL_FACTS)
    assert errors == {}
    assert list(values) == [f.name for f in ALL_FACTS]
    for name in ("os.release", "os.kernel", "os.boot_id", "cpu.topology", "pci.devices",
                 "system.cmdline", "system.thp", "nvidia.smi", "nvidia.query"):
        assert values[name] == live[name], name
    assert [n["name"] for n in values["net.interfaces"]] == [n["name"] for n in live["net.interfaces"]]


# ---------------------------------------------------------------- commands on a fake sysfs

def _write(path: Path, text: str) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


def _h200_msi() -> dict[str, list[int]]:
    """MSI-X vectors per PCI address, from the H200's /proc/interrupts."""
    out: dict[str, list[int]] = {}
    for line in (H200 / "interrupts.txt").read_text().splitlines():
        m = re.match(r"^\s*(\d+):.*PCI-MSIX-(\S+)\s", line)
        if m:
            out.setdefault(m.group(2), []).append(int(m.group(1)))
    return out


def _rooted(command: str, root: Path) -> str:
    return command.replace("/sys", f"{root}/sys")


def test_pci_command_prints_fixture_format(tmp_path):
    root = tmp_path.resolve()
    fixture = (H200 / "pci.txt").read_text().split("\n---\n")[0].splitlines()
    msi = _h200_msi()
    for line in fixture:
        addr, *kv = line.split()
        f = dict(t.split("=", 1) for t in kv)
        d = root / "sys/bus/pci/devices" / addr
        _write(d / "class", f["class"])
        _write(d / "vendor", f["vendor"])
        _write(d / "device", f["device"])
        _write(d / "numa_node", f["numa"])
        _write(d / "local_cpulist", f["cpus"])
        _write(d / "irq", "0")
        driver = {"0x10de": "nvidia", "0x1af4": "virtio-pci"}.get(f["vendor"])
        _write(d / "uevent", (f"DRIVER={driver}\n" if driver else "") + f"PCI_SLOT_NAME={addr}")
        for irq in msi.get(addr, []):
            _write(d / "msi_irqs" / str(irq), "msix")
    for shell in SHELLS:
        out = run(_rooted(PciDevices.command, root), shell).splitlines()
        assert out[-1] == END, (shell, out[-1:])  # the listing's last line says it is whole
        out = out[:-1]
        assert len(out) == len(fixture)
        for got, want in zip(out, fixture):
            assert got.startswith(want + " driver="), (shell, got)
        assert out[6] == (fixture[6] + " driver=nvidia irq=0 irqs=42,43,44,45,46,47,48,49 rdma= net= lsc= lsm= lwc= lwm=")
    devs = PciDevices.process("\n".join(out + [END]))
    gpu = devs[6]
    assert (gpu["address"], gpu["kind"], gpu["numa_node"], gpu["driver"]) == ("0000:00:06.0", "gpu", -1, "nvidia")
    assert gpu["irqs"] == list(range(42, 50))
    assert devs[0]["driver"] is None and devs[0]["irqs"] == []  # host bridge


def test_net_command_walks_virtio_to_pci(tmp_path):
    root = tmp_path.resolve()
    pci = root / "sys/devices/pci0000:00/0000:00:03.0"
    _write(pci / "class", "0x020000")
    _write(pci / "uevent", "DRIVER=virtio-pci\nPCI_SLOT_NAME=0000:00:03.0")
    _write(pci / "numa_node", "-1")
    _write(pci / "local_cpulist", "0-15")
    for irq in _h200_msi()["0000:00:03.0"]:
        _write(pci / "msi_irqs" / str(irq), "msix")
    virtio = pci / "virtio2"
    _write(virtio / "uevent", "DRIVER=virtio_net")
    (root / "sys/bus/virtio").mkdir(parents=True)
    (virtio / "subsystem").symlink_to(root / "sys/bus/virtio")
    eth0 = virtio / "net/eth0"
    for name, val in {"speed": "-1", "mtu": "1500", "operstate": "up", "address": "02:fc:00:00:00:01",
                      "type": "1"}.items():
        _write(eth0 / name, val)
    (eth0 / "queues/rx-0").mkdir(parents=True)
    (eth0 / "queues/tx-0").mkdir(parents=True)
    (eth0 / "device").symlink_to("../../../virtio2")
    lo = root / "sys/devices/virtual/net/lo"
    _write(lo / "mtu", "65536")
    net = root / "sys/class/net"
    net.mkdir(parents=True)
    (net / "eth0").symlink_to(eth0)
    (net / "lo").symlink_to(lo)
    command = _rooted(NetInterfaces.command, root).replace("/proc/interrupts", str(H200 / "interrupts.txt"))
    for shell in SHELLS:
        (nic,) = NetInterfaces.process(run(command, shell))  # lo has no device: not physical
        assert nic["name"] == "eth0"
        assert nic["pci_address"] == "0000:00:03.0"
        assert (nic["bus"], nic["driver"], nic["pci_driver"]) == ("virtio", "virtio_net", "virtio-pci")
        assert nic["numa_node"] == -1 and nic["local_cpus"] == list(range(16))
        assert nic["speed_mbps"] is None and nic["mtu"] == 1500 and nic["operstate"] == "up"
        assert (nic["rx_queues"], nic["tx_queues"]) == (1, 1)
        assert nic["msi_irqs"] == [34, 35, 36]
        assert nic["irqs"] == [34, 35, 36]
        assert nic["irq_names"] == {"34": "virtio2-config", "35": "virtio2-input.0", "36": "virtio2-output.0"}


def test_pci_command_reads_the_pcie_link_files(tmp_path):
    # The files a bare-metal device has (the H200 VM's virtual bus has none), as the kernel formats them.
    d = tmp_path.resolve() / "sys/bus/pci/devices/0000:17:00.0"
    for name, text in {"class": "0x020000", "vendor": "0x15b3", "device": "0x101d", "numa_node": "0",
                       "local_cpulist": "0-31", "irq": "0", "uevent": "DRIVER=mlx5_core",
                       "current_link_speed": "8.0 GT/s PCIe", "max_link_speed": "16.0 GT/s PCIe",
                       "current_link_width": "16", "max_link_width": "16"}.items():
        _write(d / name, text)
    for shell in SHELLS:
        out = run(_rooted(PciDevices.command, tmp_path.resolve()), shell)
        nic = PciDevices.process(out)[0]
        assert (nic["kind"], nic["link_speed_gts"], nic["link_speed_max_gts"], nic["link_width"],
                nic["link_width_max"]) == ("nic", 8.0, 16.0, 16, 16), shell
