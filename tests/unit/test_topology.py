"""The topology planner on every fixture host, with hand-checked plans.

Facts are built from the recorded outputs through the fact parsers; hosts
known only from plain lscpu, numactl or ``nvidia-smi topo -m`` get their CPU
topology through :func:`topology_from_numa` / :func:`topology_from_lscpu_summary`.
"""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from bringup.errors import InputError
from bringup.facts.cpu import parse_lscpu_parse
from bringup.facts.irq import parse_interrupts
from bringup.facts.net import parse_net_interfaces
from bringup.facts.nvidia_csv import parse_query_gpu_csv
from bringup.facts.nvidia_topo import parse_topo_matrix
from bringup.facts.pci import parse_pci_devices
from bringup.hardware.topology import cpu_roles, plan_topology, validate_vars
from harness.captures import topology_from_lscpu_summary, topology_from_numa
from harness.captures import parse_lscpu_plain, parse_numactl_hardware, strip_comments

from .fixture_hosts import FIX  # noqa: E402  (tests/fixtures/hosts, in this repository)
H200 = FIX / "h200-vm"
PUB = FIX / "public"


def texts(plan) -> list[str]:
    """The warnings' lines (warnings are PlanWarning values: kind, subject, text)."""
    return [w.text for w in plan.warnings]


def sections(path: Path) -> list[str]:
    return path.read_text().split("\n---\n")


def pub(name: str) -> str:
    return strip_comments((PUB / name).read_text())


def h200_facts() -> dict:
    return {
        "cpu.topology": parse_lscpu_parse(sections(H200 / "lscpu.txt")[2]),
        "pci.devices": parse_pci_devices(sections(H200 / "pci.txt")[0]),
        "irq.interrupts": parse_interrupts((H200 / "interrupts.txt").read_text()),
        "nvidia.smi": parse_query_gpu_csv((H200 / "nvidia-smi-query.csv").read_text()),
        "nvidia.topo": parse_topo_matrix((H200 / "nvidia-smi-topo.txt").read_text()),
    }


def topo_host(name: str) -> dict:
    """A host known from ``nvidia-smi topo -m`` alone: nodes from the GPUs' CPU affinity."""
    t = parse_topo_matrix(pub(name))
    nodes: dict[str, set[int]] = {}
    for g in t["gpus"]:
        nodes.setdefault(str(g["numa_node"]), set()).update(g["cpus"])
    return {"cpu.topology": topology_from_numa({k: sorted(v) for k, v in nodes.items()}), "nvidia.topo": t}


# ---------------------------------------------------------------- h200-vm

def test_h200_vm_single_node_numa_minus_one():
    plan = plan_topology(h200_facts())
    (node,) = plan.nodes
    assert node.node == 0 and node.cpus == list(range(16))
    assert node.irq_cpus == [0, 1] and node.irq_siblings == []  # no SMT in this VM
    assert node.triton == {"GPU0": [2, 3, 4, 5]}
    assert node.rest == list(range(6, 16))
    (gpu,) = plan.gpus
    assert (gpu.pci_address, gpu.numa_node, gpu.node, gpu.l3_groups) == ("0000:00:06.0", 0, 0, ["0"])
    # virtio-net (0000:00:03.0) and the two virtio storage functions; IRQs from /proc/interrupts.
    devs = {d.pci_address: (d.kind, d.numa_node, d.node, d.irqs) for d in plan.devices}
    assert devs == {"0000:00:03.0": ("nic", -1, 0, [34, 35, 36]),
                    "0000:00:01.0": ("storage", -1, 0, [30, 31]),
                    "0000:00:02.0": ("storage", -1, 0, [32, 33])}
    # Round-robin over the IRQ CPUs, NIC first.
    assert {p.irq: p.cpus for p in plan.irqs} == {34: [0], 35: [1], 36: [0], 30: [1], 31: [0], 32: [1], 33: [0]}
    assert {p.irq: p.name for p in plan.irqs}[35] == "virtio2-input.0"
    assert "nic 0000:00:03.0: numa_node -1 (unknown); planned on the only NUMA node 0" in texts(plan)
    assert not any("interconnect" in w for w in texts(plan))  # one node: nothing misplaced
    d = plan.to_dict()
    assert json.loads(json.dumps(d)) == d
    assert d["triton_cpuset"] == "2-5" and d["irq_cpus"] == [0, 1]


def test_h200_auto_takes_every_free_cpu_and_nic_only():
    plan = plan_topology(h200_facts(), {"triton_cpus_per_gpu": "auto", "irq_cpus_per_node": 1,
                                        "irq_device_kinds": ["nic"]})
    assert plan.gpus[0].cpus == list(range(1, 16))
    assert plan.nodes[0].rest == []
    assert [d.kind for d in plan.devices] == ["nic"]
    assert all(p.cpus == [0] for p in plan.irqs)


def test_plan_that_cannot_fit_names_the_numbers():
    with pytest.raises(InputError) as e:
        plan_topology(h200_facts(), {"triton_cpus_per_gpu": 15})
    msg = str(e.value)
    assert "NUMA node 0 has 16 CPUs" in msg and "leave 14" in msg and "1 GPU(s) x 15" in msg and "need 15" in msg
    with pytest.raises(InputError, match=r"16 core\(s\).*irq_cpus_per_node 17 does not fit"):
        plan_topology(h200_facts(), {"irq_cpus_per_node": 17})
    with pytest.raises(InputError, match=r"16 IRQ CPU\(s\).*leave 0, but 1 GPU\(s\) x 4"):
        plan_topology(h200_facts(), {"irq_cpus_per_node": 16})
    # Without a GPU every core may take IRQs.
    plan = plan_topology({"cpu.topology": h200_facts()["cpu.topology"]}, {"irq_cpus_per_node": 16})
    assert plan.nodes[0].irq_cpus == list(range(16)) and plan.nodes[0].rest == []


@pytest.mark.parametrize("bad", [{"irq_cpus_per_node": 0}, {"irq_cpus_per_node": True},
                                 {"triton_cpus_per_gpu": "many"}, {"triton_cpus_per_gpu": 2.5},
                                 {"irq_device_kinds": ["gpu"]}])
def test_bad_variables_are_refused(bad):
    with pytest.raises(InputError):
        validate_vars(bad)


def test_no_topology_is_a_clear_error():
    with pytest.raises(InputError, match="cpu.topology is empty"):
        plan_topology({})


# ---------------------------------------------------------------- public hosts

def test_dell_r710_two_sockets_smt_no_gpu():
    plan = plan_topology({"cpu.topology": parse_lscpu_parse(pub("lscpu-p-2s-2numa-dell-r710.txt"))})
    n0, n1 = plan.nodes
    # Siblings are cpu and cpu+8; node 0 = even CPUs.
    assert (n0.irq_cpus, n0.irq_siblings) == ([0, 2], [8, 10])
    assert n0.rest == [4, 6, 8, 10, 12, 14] and n0.triton == {}
    assert (n1.irq_cpus, n1.irq_siblings) == ([1, 3], [9, 11])
    assert plan.gpus == [] and plan.irqs == []


def test_xeon8562y_2xl40s_gpus_on_one_socket_nics_on_the_other():
    summary = parse_lscpu_plain(pub("lscpu-2s-xeon8562y-l40s.txt"))
    topo = parse_topo_matrix(pub("topo-2xl40s-2nic-xeon8562y.txt"), summary["numa_nodes"])
    plan = plan_topology({"cpu.topology": topology_from_lscpu_summary(summary), "nvidia.topo": topo})
    assert [n.irq_cpus for n in plan.nodes] == [[0, 2], [1, 3]]
    # Even CPUs are node 0; its L3 is the socket's (2 L3 instances, 2 sockets, 2 nodes).
    assert [(g.name, g.node, g.cpus, g.l3_groups) for g in plan.gpus] == [
        ("GPU0", 0, [4, 6, 8, 10], ["0"]), ("GPU1", 0, [12, 14, 16, 18], ["0"])]
    assert [(d.name, d.node) for d in plan.devices] == [("mlx5_0", 1), ("mlx5_1", 1)]
    assert any(w.startswith("all GPUs are on NUMA node 0 and every NIC on node 1") for w in texts(plan))
    assert any(w.startswith("SMT siblings unknown (2 threads per core)") for w in texts(plan))


def test_4xl40s_two_gpus_without_a_local_nic():
    plan = plan_topology(topo_host("topo-4xl40s-2nic-2numa.txt"))
    assert [(g.name, g.node, g.cpus) for g in plan.gpus] == [
        ("GPU0", 0, [2, 3, 4, 5]), ("GPU1", 0, [6, 7, 8, 9]),
        ("GPU2", 1, [98, 99, 100, 101]), ("GPU3", 1, [102, 103, 104, 105])]
    assert [n.irq_cpus for n in plan.nodes] == [[0, 1], [96, 97]]
    assert {d.name: d.node for d in plan.devices} == {"mlx5_0": 1, "mlx5_1": 1}
    miss = [w for w in texts(plan) if "no NIC is" in w]
    assert len(miss) == 2 and miss[0].startswith("GPU0 is on NUMA node 0") and miss[1].startswith("GPU1 ")
    assert plan.to_dict()["triton_cpuset"] == "2-9,98-105"


def test_2xa100_one_nic_per_socket_is_well_placed():
    plan = plan_topology(topo_host("topo-2xa100pcie-2nic-2numa.txt"))
    assert [(g.name, g.node, g.cpus) for g in plan.gpus] == [("GPU0", 0, [2, 3, 4, 5]), ("GPU1", 1, [66, 67, 68, 69])]
    assert {d.name: d.node for d in plan.devices} == {"mlx5_0": 0, "mlx5_1": 1}
    assert not any("interconnect" in w for w in texts(plan))
    assert any(w.startswith("L3 groups unknown") for w in texts(plan))


def test_c5n_numactl_two_nodes_no_gpu():
    numa = parse_numactl_hardware(pub("numactl-H-2node-c5n18xlarge.txt"))
    plan = plan_topology({"cpu.topology": topology_from_numa(numa["cpu_nodes"])})
    assert [(n.node, n.irq_cpus, len(n.rest)) for n in plan.nodes] == [(0, [0, 1], 34), (1, [18, 19], 34)]


def test_sparse_nodes_memory_only_nodes_are_not_planned():
    numa = parse_numactl_hardware(pub("numactl-H-sparse-nodes-0-8-252-255.txt"))
    plan = plan_topology({"cpu.topology": topology_from_numa(numa["cpu_nodes"])})
    assert [(n.node, n.irq_cpus) for n in plan.nodes] == [(0, [0, 1]), (8, [64, 65])]


def test_mlx5_irqs_joined_by_pci_address_from_proc_interrupts():
    # /proc/interrupts of a 12-CPU Ryzen host with a dual-port ConnectX; the PCI functions
    # as the pci.devices fact prints them (numa unknown on this desktop board).
    irqs = parse_interrupts(pub("proc-interrupts-mlx5-12cpu.txt"))
    pci = parse_pci_devices("0000:01:00.0 class=0x020000 vendor=0x15b3 device=0x1017 numa=-1 cpus=0-11\n"
                            "0000:01:00.1 class=0x020000 vendor=0x15b3 device=0x1017 numa=-1 cpus=0-11\n")
    plan = plan_topology({"cpu.topology": topology_from_numa({"0": list(range(12))}),
                          "pci.devices": pci, "irq.interrupts": irqs})
    devs = {d.pci_address: d.irqs for d in plan.devices}
    assert devs == {"0000:01:00.0": [98, 99] + list(range(109, 120)), "0000:01:00.1": [101, 102]}
    pins = {p.irq: p.cpus[0] for p in plan.irqs}
    assert sorted(set(pins.values())) == [0, 1] and len(pins) == 15
    assert [pins[i] for i in (98, 99, 109, 110)] == [0, 1, 0, 1]


def test_ice_irqs_of_a_netdev_through_net_interfaces():
    # The net.interfaces fact names lan1's queues ("ice-lan1-TxRx-N") through its own awk lines.
    rows = [l for l in pub("proc-interrupts-ice-e810-16cpu.txt").splitlines() if l.strip()]
    irq_lines = []
    for l in rows:
        num, rest = l.split(":", 1)
        irq_lines.append(f"irq {num.strip()} " + " ".join(rest.split()[16:]))
    ifaces = parse_net_interfaces("iface lan1 pci=0000:65:00.1 numa=0 cpus=0-15 driver=ice pcidriver=ice\n"
                                  + "\n".join(irq_lines) + "\n")
    plan = plan_topology({"cpu.topology": topology_from_numa({"0": list(range(16))}), "net.interfaces": ifaces,
                          "irq.interrupts": parse_interrupts(pub("proc-interrupts-ice-e810-16cpu.txt"))})
    (dev,) = plan.devices
    assert (dev.name, dev.kind, dev.node) == ("lan1", "nic", 0)
    assert dev.irqs == [77, 78, 79, 80]  # misc (by address) + the three TxRx queues (by name)


def test_cpu_roles_for_the_checklist_picture():
    roles, warnings = cpu_roles({"cpu.topology": parse_lscpu_parse(pub("lscpu-p-2s-2numa-dell-r710.txt"))},
                                {"irq_cpus_per_node": 1, "gpu_profile": "cpu"})
    assert roles[0] == "irq" and roles[8] == "reserved" and roles[1] == "irq" and roles[2] == "other"
    assert len(roles) == 16
    roles, _ = cpu_roles(h200_facts())
    assert [c for c, r in roles.items() if r == "triton:GPU0"] == [2, 3, 4, 5]
