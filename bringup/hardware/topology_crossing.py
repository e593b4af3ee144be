"""What the topology planner cannot fix, worded by sockets: GPUs and NICs on different NUMA nodes, and every
NIC ``SYS`` to every GPU.  Cut from bringup/hardware/topology.py (issue 43 item 2): these warnings read a finished plan
and the topology's sockets; they place nothing.
"""
from __future__ import annotations

import re
from typing import Any

from .topology_model import DeviceIrqs, GpuPlacement, PlanWarning


def misplaced(facts: dict[str, Any], topo: dict[str, Any], cpu_nodes: dict[int, list[int]],
               gpus: list[GpuPlacement], dev_plans: list[DeviceIrqs],
               devices: list[dict[str, Any]]) -> list[PlanWarning]:
    """What the planner cannot fix, worded by sockets: GPUs and NICs on different nodes, and
    every NIC ``SYS`` to every GPU."""
    sockets = _node_sockets(topo, cpu_nodes)
    return _misplacements(gpus, dev_plans, len(cpu_nodes), sockets) + _all_nics_sys(facts, gpus, devices, sockets)



def _node_sockets(topo: dict[str, Any], cpu_nodes: dict[int, list[int]]) -> dict[int, int]:
    """NUMA node → socket, from the topology's ``sockets`` (lscpu's socket column); a node
    whose CPUs are not all on one socket, or unknown sockets, are left out."""
    cpu_sock = {c: int(k) for k, cpus in (topo.get("sockets") or {}).items() for c in cpus}
    out: dict[int, int] = {}
    for node, cpus in cpu_nodes.items():
        socks = {cpu_sock.get(c) for c in cpus}
        if len(socks) == 1 and None not in socks:
            out[node] = socks.pop()
    return out


def _hop(a: int, others: list[int], sockets: dict[int, int]) -> tuple[str, str]:
    """``(kind, words)`` for traffic from NUMA node ``a`` to the nodes ``others``; ``words``
    continue a sentence that names the nodes."""
    if a in sockets and all(o in sockets for o in others):
        if all(sockets[o] == sockets[a] for o in others):
            return "numa_distance", (f", NUMA nodes of the same socket {sockets[a]}: requests cross NUMA nodes "
                                     "inside the socket (a shorter hop than between sockets, still remote memory "
                                     "and I/O)")
        far = sorted({sockets[o] for o in others if sockets[o] != sockets[a]})
        return "interconnect", (f": requests cross the socket interconnect (socket {sockets[a]} to socket "
                                f"{', '.join(map(str, far))})")
    return "interconnect", ": requests cross NUMA nodes (sockets unknown: likely the socket interconnect)"


def _misplacements(gpus: list[GpuPlacement], devices: list[DeviceIrqs], n_nodes: int,
                   sockets: dict[int, int]) -> list[PlanWarning]:
    """What the planner cannot fix: GPUs and NICs on different nodes."""
    if n_nodes < 2:
        return []
    nics = [d for d in devices if d.kind == "nic" and d.node != -1]
    if not gpus or not nics:
        return []
    out = []
    gpu_nodes = sorted({g.node for g in gpus})
    nic_nodes = sorted({d.node for d in nics})
    if len(gpu_nodes) == 1 and gpu_nodes[0] not in nic_nodes:
        kind, words = _hop(gpu_nodes[0], nic_nodes, sockets)
        fix = "move the NICs (or the GPUs) to slots of one socket" if kind == "interconnect" else \
            "move the NICs (or the GPUs) to slots of one NUMA node"
        out.append(PlanWarning(kind, "GPUs", f"all GPUs are on NUMA node {gpu_nodes[0]} and every NIC on node "
                               f"{', '.join(map(str, nic_nodes))}{words}; {fix}"))
        return out
    for g in gpus:
        if g.node not in nic_nodes:
            where = ", ".join(f"{d.name} on node {d.node}" for d in nics)
            kind, words = _hop(g.node, nic_nodes, sockets)
            if kind == "interconnect" and g.node in sockets and any(sockets.get(n) == sockets[g.node]
                                                                     for n in nic_nodes):
                kind = "numa_distance"  # a NIC on its socket, another node: the nearest one is in-socket
                words = f": its nearest NIC is on another NUMA node of the same socket {sockets[g.node]}"
            out.append(PlanWarning(kind, g.name, f"{g.name} is on NUMA node {g.node} but no NIC is ({where})"
                                   f"{words.replace('requests cross', 'its traffic crosses', 1)}"))
    return out


def _all_nics_sys(facts: dict[str, Any], gpus: list[GpuPlacement], devices: list[dict[str, Any]],
                  sockets: dict[int, int]) -> list[PlanWarning]:
    """Every NIC ``SYS`` to every GPU in ``nvidia-smi topo -m`` while the GPUs span NUMA nodes:
    GPUDirect RDMA of every GPU crosses NUMA nodes (one node: the NIC-node rule says it).  Worded
    by what is known: GPUs on several sockets cross the socket interconnect; GPUs on NUMA nodes
    of one socket cross the socket interconnect only when a NIC is on another socket, else NUMA
    nodes inside that socket; NICs whose node is unknown are said to be unknown."""
    t = facts.get("nvidia.topo") or {}
    matrix = t.get("matrix") or {}
    nics = [n for n in t.get("nics") or [] if n["name"] in matrix]
    rows = [g for g in matrix if re.fullmatch(r"GPU[0-9]+", g)]
    if not nics or not rows or any(matrix[g].get(n["name"]) not in ("SYS", "SOC") for g in rows for n in nics):
        return []
    nodes = sorted({g.node for g in gpus if g.node != -1})
    if len(nodes) < 2:
        return []
    names = ", ".join(n["device"] for n in nics)
    head = f"every NIC ({names}) is SYS to every GPU in nvidia-smi topo -m"
    tail = "; put a NIC on each GPU NUMA node's PCIe root (or behind the GPUs' switches)"
    gpu_socks = {sockets.get(n) for n in nodes}
    if None in gpu_socks:  # sockets unknown
        return [PlanWarning("interconnect", "NICs", f"{head} and the GPUs span NUMA nodes "
                            f"{', '.join(map(str, nodes))} (sockets unknown): GPUDirect RDMA and network traffic of "
                            f"every GPU cross NUMA nodes, likely the socket interconnect{tail}")]
    if len(gpu_socks) > 1:
        return [PlanWarning("interconnect", "NICs", f"{head} and the GPUs span sockets "
                            f"{', '.join(map(str, sorted(gpu_socks)))}: GPUDirect RDMA and network traffic of every "
                            f"GPU cross the socket interconnect{tail.replace('NUMA node', 'socket')}")]
    (sock,) = gpu_socks
    # Where the NICs are: the planned device of each topo NIC (its RDMA name, else its name).
    node_of = {d.get("rdma") or d["name"]: d.get("node", -1) for d in devices}
    node_of.update({d["name"]: d.get("node", -1) for d in devices})
    nic_nodes = {n["device"]: node_of.get(n["device"], -1) for n in nics}
    span = f"the GPUs span NUMA nodes {', '.join(map(str, nodes))} of socket {sock}"
    far = sorted({sockets[n] for n in nic_nodes.values() if n in sockets and sockets[n] != sock})
    if far:
        where = ", ".join(f"{k} on socket {sockets[n]}" for k, n in nic_nodes.items() if n in sockets
                          and sockets[n] != sock)
        return [PlanWarning("interconnect", "NICs", f"{head} and {span}, the NICs on socket(s) "
                            f"{', '.join(map(str, far))} ({where}): GPUDirect RDMA and network traffic of every GPU "
                            f"cross the socket interconnect{tail}")]
    unknown = [k for k, n in nic_nodes.items() if n not in sockets]
    if unknown:
        return [PlanWarning("interconnect", "NICs", f"{head} and {span}; the socket of {', '.join(unknown)} is "
                            "unknown: GPUDirect RDMA and network traffic of every GPU cross NUMA nodes, and the socket "
                            f"interconnect too if a NIC is on another socket{tail}")]
    return [PlanWarning("numa_distance", "NICs", f"{head} and {span}, every NIC on socket {sock} too: GPUDirect "
                        f"RDMA and network traffic of every GPU cross NUMA nodes inside socket {sock} (a shorter hop "
                        f"than between sockets, still remote memory and I/O){tail}")]
