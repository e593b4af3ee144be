"""What the topology planner reads from a host's facts: the CPU cores and L3 groups, the GPUs (joined from
nvidia-smi, pci.devices and nvidia-smi topo -m), the NICs and storage controllers with their IRQs.  Cut from
bringup/hardware/topology.py (issue 43 item 2): reading the facts apart from planning with them.
"""
from __future__ import annotations

import re
from typing import Any

from .topology_model import PlanWarning

#: The facts the planner reads: a role that plans with it includes them in its FACTS.
FACTS = ("cpu.topology", "pci.devices", "net.interfaces", "irq.interrupts", "nvidia.smi", "nvidia.topo")

#: nvidia-smi topo relations that stay on one NUMA node (closest first).
_SAME_NODE = ("PIX", "PXB", "PHB", "NODE")


def cores_of(topo: dict[str, Any]) -> dict[int, list[int]]:
    """CPU → the CPUs of its core (itself alone when siblings are unknown)."""
    core_of: dict[int, list[int]] = {}
    for group in topo.get("smt_siblings") or []:
        for c in group:
            core_of[c] = sorted(group)
    for c in topo.get("online") or [c for v in (topo.get("numa_nodes") or {}).values() for c in v]:
        core_of.setdefault(c, [c])
    return core_of


def l3_groups_of(topo: dict[str, Any]) -> dict[int, str]:
    return {c: gid for gid, cpus in (topo.get("l3_groups") or {}).items() for c in cpus}


def device_kind(dev: dict[str, Any]) -> str:
    """A PCI device's kind as the plan reads it: the fact's (gpu, nic, nvme, other), and ``storage`` for a
    mass-storage controller that is not NVMe (class 0x01: SAS/SATA HBAs, virtio-blk)."""
    kind = dev.get("kind") or "other"
    if kind == "other" and (dev.get("class") or "").lower().replace("0x", "").startswith("01"):
        return "storage"  # SAS/SATA HBAs, virtio-blk: IRQs of the node's I/O too
    return kind


def _irqs_by_address(facts: dict[str, Any]) -> dict[str, list[tuple[int, str]]]:
    out: dict[str, list[tuple[int, str]]] = {}
    for rec in ((facts.get("irq.interrupts") or {}).get("irqs") or {}).values():
        addr = rec.get("pci_address")
        if addr:
            out.setdefault(addr, []).append((int(rec["irq"]), rec.get("name") or ""))
    return out


def _irq_names(facts: dict[str, Any]) -> dict[int, str]:
    return {int(k): (v.get("name") or "") for k, v in ((facts.get("irq.interrupts") or {}).get("irqs") or {}).items()}


# --------------------------------------------------------------------------
# Planning

def gpus_of(facts: dict[str, Any]) -> list[dict[str, Any]]:
    """GPUs from nvidia.smi (joined with pci.devices, nvidia.topo), else pci.devices, else nvidia.topo."""
    pci = {d["address"]: d for d in facts.get("pci.devices") or []}
    topo = {g["index"]: g for g in (facts.get("nvidia.topo") or {}).get("gpus") or []}
    smi = facts.get("nvidia.smi") or []
    out: list[dict[str, Any]] = []
    if smi:
        for g in smi:
            idx = g.get("index") if isinstance(g.get("index"), int) else len(out)
            addr = g.get("pci_address")
            dev = pci.get(addr or "", {})
            out.append({"index": idx, "name": f"GPU{idx}", "model": g.get("name"), "pci_address": addr,
                        "numa_node": dev.get("numa_node", -1), "local_cpus": dev.get("local_cpus") or [],
                        "topo": topo.get(idx), "refused": dev.get("refused")})
    elif any(d.get("kind") == "gpu" for d in pci.values()):
        for i, d in enumerate(sorted((d for d in pci.values() if d.get("kind") == "gpu"), key=lambda d: d["address"])):
            out.append({"index": i, "name": f"GPU{i}", "model": None, "pci_address": d["address"],
                        "numa_node": d.get("numa_node", -1), "local_cpus": d.get("local_cpus") or [],
                        "topo": topo.get(i), "refused": d.get("refused")})
    else:
        for idx, t in sorted(topo.items()):
            out.append({"index": idx, "name": f"GPU{idx}", "model": None, "pci_address": None,
                        "numa_node": -1, "local_cpus": [], "topo": t})
    for g in out:
        t = g["topo"] or {}
        # nvidia-smi's NUMA Affinity when sysfs said nothing useful.
        if g["numa_node"] in (-1, None) and t.get("numa_node") is not None:
            g["numa_node"] = t["numa_node"]
            g["numa_from_topo"] = True
        if not g["local_cpus"] and t.get("cpus"):
            g["local_cpus"] = t["cpus"]
    return out


def io_devices(facts: dict[str, Any], kinds: list[str]) -> tuple[list[dict[str, Any]], list[PlanWarning]]:
    """NICs (Ethernet or InfiniBand, with a netdev or not) and storage controllers with their IRQs
    (sysfs MSI vectors + /proc/interrupts rows); a device or interface the facts refused is left
    out, with a warning naming it."""
    by_addr = _irqs_by_address(facts)
    names = _irq_names(facts)
    refused: list[PlanWarning] = []
    ifaces: dict[str, dict[str, Any]] = {}
    for i in facts.get("net.interfaces") or []:
        if i.get("refused"):
            what = f"interface {i.get('name')}"
            refused.append(PlanWarning("refused", what, f"{what}: its sysfs line was refused ({i['refused']}); "
                                       "planned from pci.devices alone" if i.get("pci_address") else
                                       f"{what}: its sysfs line was refused ({i['refused']}): its IRQs are not "
                                       "pinned"))
        elif i.get("pci_address"):
            ifaces[i["pci_address"]] = i
    out: list[dict[str, Any]] = []
    seen: set[str] = set()
    for d in facts.get("pci.devices") or []:
        kind = device_kind(d)
        if kind not in kinds:
            continue
        addr = d["address"]
        seen.add(addr)
        iface = ifaces.get(addr)
        if d.get("refused"):
            what = f"{kind} {addr}"
            refused.append(PlanWarning("refused", what, f"{what}: its sysfs line was refused ({d['refused']}): "
                                       "left out of the plan, its IRQs are not pinned"))
            continue
        irqs = set(d.get("irqs") or []) | {i for i, _ in by_addr.get(addr, [])} | set((iface or {}).get("irqs") or [])
        name = iface["name"] if iface else (d.get("netdevs") or [None])[0] or d.get("rdma") or addr
        out.append({"name": name, "kind": kind, "pci_address": addr, "rdma": d.get("rdma"),
                    "numa_node": d.get("numa_node", -1), "local_cpus": d.get("local_cpus") or [],
                    "irqs": sorted(irqs), "irq_names": {i: names.get(i, "") for i in irqs}})
    if "nic" in kinds:
        for addr, iface in ifaces.items():
            if addr in seen:
                continue
            irqs = set(iface.get("irqs") or []) | {i for i, _ in by_addr.get(addr, [])}
            out.append({"name": iface["name"], "kind": "nic", "pci_address": addr, "rdma": None,
                        "numa_node": iface.get("numa_node", -1), "local_cpus": iface.get("local_cpus") or [],
                        "irqs": sorted(irqs), "irq_names": {i: names.get(i, "") for i in irqs}})
    return out, refused


def topo_only_nics(facts: dict[str, Any], gpu_node: dict[int, int], cpu_nodes: list[int]) -> list[dict[str, Any]]:
    """NICs known only from ``nvidia-smi topo -m`` (RDMA names): node from their relation to the GPUs."""
    topo = facts.get("nvidia.topo") or {}
    out = []
    for nic in topo.get("nics") or []:
        row = (topo.get("matrix") or {}).get(nic["name"], {})
        near = sorted({gpu_node[int(k[3:])] for k, rel in row.items()
                       if re.fullmatch(r"GPU[0-9]+", k) and rel in _SAME_NODE and int(k[3:]) in gpu_node})
        node = near[0] if len(near) == 1 else -1
        if node == -1 and len(cpu_nodes) == 2 and row and all(
                rel == "SYS" for k, rel in row.items() if re.fullmatch(r"GPU[0-9]+", k)):
            gnodes = {gpu_node[int(k[3:])] for k in row if re.fullmatch(r"GPU[0-9]+", k) and int(k[3:]) in gpu_node}
            if len(gnodes) == 1:  # SYS to every GPU, all on one of two nodes: the other one
                node = next(n for n in cpu_nodes if n not in gnodes)
        out.append({"name": nic["device"], "kind": "nic", "pci_address": None, "rdma": nic["device"],
                    "numa_node": -1, "inferred": node, "local_cpus": [], "irqs": [], "irq_names": {}})
    return out
