"""Parsers of captured command output that only the tests read.

The tool gathers facts with the commands of :mod:`bringup.facts` (``lscpu -p``
or a sysfs walk, ``docker info --format '{{json .}}'``, ``nvidia-smi``); the
unit tests also read public captures of other forms of the same data: plain
``lscpu`` and ``lscpu -J``, ``numactl -H``, plain ``docker info`` and
``lspci -vvv``.  Their parsers live here, out of the shipped package.
"""
from __future__ import annotations

import json
import re
from typing import Any

from bringup.facts.helpers import cpulist, to_int
from bringup.facts.cpu import str_keyed
from bringup.facts.system import docker_shape

__all__ = [
    "strip_comments",
    "topology_from_numa",
    "topology_from_lscpu_summary",
    "parse_size_kib",
    "parse_lscpu_plain",
    "parse_lscpu_json",
    "parse_numactl_hardware",
    "parse_docker_info_text",
    "parse_lspci_rebar",
]


def strip_comments(text: str) -> str:
    """Drop ``#`` comment lines (the ``# source:`` headers of the fixtures) from a recorded output."""
    return "\n".join(l for l in text.splitlines() if not l.startswith("#"))


# --------------------------------------------------------------------------
# plain lscpu / lscpu -J
# --------------------------------------------------------------------------

_UNIT_KIB = {
    "": 1 / 1024, "b": 1 / 1024,
    "k": 1, "kb": 1, "kib": 1,
    "m": 1024, "mb": 1024, "mib": 1024,
    "g": 1024 ** 2, "gb": 1024 ** 2, "gib": 1024 ** 2,
    "t": 1024 ** 3, "tb": 1024 ** 3, "tib": 1024 ** 3,
}


def parse_size_kib(text: str) -> int | None:
    """``"120 MiB (2 instances)"`` → 122880; ``"8192K"`` → 8192; junk → None."""
    m = re.match(r"^\s*([\d.]+)\s*([KMGT]?i?B?)\b", text, re.IGNORECASE)
    if not m:
        return None
    factor = _UNIT_KIB.get(m.group(2).lower())
    if factor is None:
        return None
    return int(round(float(m.group(1)) * factor))


def _lscpu_summary(fields: dict[str, str]) -> dict[str, Any]:
    def num(key: str) -> int | None:
        return to_int(fields.get(key, ""))

    nodes: dict[int, list[int]] = {}
    for key, value in fields.items():
        m = re.fullmatch(r"NUMA node(\d+) CPU\(s\)", key)
        if m:
            nodes[int(m.group(1))] = cpulist(value)

    def cache(key: str) -> dict[str, Any] | None:
        text = fields.get(key)
        if not text:
            return None
        inst = re.search(r"\((\d+) instances?\)", text)
        return {
            "text": text,
            "kib": parse_size_kib(text),
            # New lscpu prints the total over all instances and their count;
            # old lscpu (e.g. "8192K") printed one instance's size, no count.
            "instances": int(inst.group(1)) if inst else None,
        }

    online = fields.get("On-line CPU(s) list")
    return {
        "cpu_count": num("CPU(s)"),
        "online": cpulist(online) if online else None,
        "sockets": num("Socket(s)"),
        "cores_per_socket": num("Core(s) per socket"),
        "threads_per_core": num("Thread(s) per core"),
        "numa_node_count": num("NUMA node(s)"),
        "numa_nodes": str_keyed(nodes),
        "model_name": fields.get("Model name"),
        "vendor_id": fields.get("Vendor ID"),
        "hypervisor_vendor": fields.get("Hypervisor vendor"),
        "l2": cache("L2 cache"),
        "l3": cache("L3 cache"),
        "fields": fields,
    }


def parse_lscpu_plain(output: str) -> dict[str, Any]:
    """Plain ``lscpu`` (``Field:   value`` lines, indented or not) → summary dict."""
    fields: dict[str, str] = {}
    for line in output.splitlines():
        if line.startswith("#"):
            continue
        m = re.match(r"^\s*([^:]+?):\s+(.*?)\s*$", line)
        if m and not re.match(r"^\d", m.group(1)):
            fields.setdefault(m.group(1), m.group(2))
    if not fields:
        return {}
    return _lscpu_summary(fields)


def parse_lscpu_json(output: str) -> dict[str, Any]:
    """``lscpu -J`` (flat or nested ``children``) → the same summary as plain."""
    try:
        data = json.loads(output)
    except ValueError:
        return {}
    fields: dict[str, str] = {}

    def walk(items: list[dict[str, Any]]) -> None:
        for item in items:
            key = str(item.get("field", "")).strip().rstrip(":")
            if key and item.get("data") is not None:
                fields.setdefault(key, str(item["data"]))
            walk(item.get("children") or [])

    walk(data.get("lscpu") or [])
    if not fields:
        return {}
    return _lscpu_summary(fields)


# --------------------------------------------------------------------------
# numactl -H
# --------------------------------------------------------------------------

def parse_numactl_hardware(output: str) -> dict[str, Any]:
    """``numactl -H`` → ``{node_ids, nodes: {"0": {cpus, size_mb, free_mb}}, distances}``.

    Node ids may be sparse (``0,8,252-255``); CPU-less nodes have ``cpus: []``.
    ``distances`` is ``{"0": {"0": 10, "8": 40, ...}}``.
    """
    nodes: dict[int, dict[str, Any]] = {}
    available: int | None = None
    dist_cols: list[int] | None = None
    distances: dict[int, dict[str, int]] = {}
    for raw in output.splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        m = re.match(r"^available:\s*(\d+)\s+nodes?", line)
        if m:
            available = int(m.group(1))
            continue
        m = re.match(r"^node\s+(\d+)\s+(cpus|size|free):\s*(.*)$", line)
        if m:
            node = nodes.setdefault(int(m.group(1)), {"cpus": [], "size_mb": None, "free_mb": None})
            what, rest = m.group(2), m.group(3)
            if what == "cpus":
                node["cpus"] = sorted(int(x) for x in rest.split() if x.isdigit())
            else:
                sm = re.match(r"(\d+)\s*MB", rest)
                node[f"{what}_mb"] = int(sm.group(1)) if sm else None
            continue
        if re.match(r"^node\s+distances:", line):
            dist_cols = []
            continue
        if dist_cols is not None:
            m = re.match(r"^node((?:\s+\d+)+)$", line)
            if m:
                dist_cols = [int(x) for x in m.group(1).split()]
                continue
            m = re.match(r"^(\d+):((?:\s+\d+)+)$", line)
            if m and dist_cols:
                vals = [int(x) for x in m.group(2).split()]
                distances[int(m.group(1))] = {str(c): v for c, v in zip(dist_cols, vals)}
    if not nodes:
        return {}
    return {
        "available": available,
        "node_ids": sorted(nodes),
        "nodes": {str(n): nodes[n] for n in sorted(nodes)},
        "cpu_nodes": {str(n): nodes[n]["cpus"] for n in sorted(nodes)},
        "distances": {str(n): distances[n] for n in sorted(distances)},
    }


# --------------------------------------------------------------------------
# docker info (plain text)
# --------------------------------------------------------------------------

def parse_docker_info_text(output: str) -> dict[str, Any]:
    """Plain ``docker info`` text (the ``Server:`` part) → the same shape as the JSON parser;
    ``runtime_paths`` values are None (the text does not print them)."""
    fields: dict[str, str] = {}
    in_server = False
    for line in output.splitlines():
        if line.startswith("#"):
            continue
        if re.match(r"^Server:\s*$", line):
            in_server = True
            continue
        if re.match(r"^\S", line):
            in_server = line.startswith("Server")
        if not in_server:
            continue
        m = re.match(r"^ (\S[^:]*):\s*(.*)$", line)  # one-space indent: top-level server keys
        if m:
            fields.setdefault(m.group(1), m.group(2).strip())
    if not fields:
        return {}
    runtimes = {r: None for r in fields.get("Runtimes", "").split()}
    return docker_shape(fields.get("Server Version"), runtimes, fields.get("Default Runtime"),
                        fields.get("Cgroup Driver"), fields.get("Cgroup Version"), [])


# --------------------------------------------------------------------------
# lspci -vvv
# --------------------------------------------------------------------------

_SIZE = {"MB": 1, "GB": 1024, "TB": 1024 * 1024}


def parse_lspci_rebar(output: str) -> dict[str, dict[str, Any]]:
    """``lspci -vvv`` → ``{"01:00.0": {"bar1_current_mib", "bar1_max_mib", "lnk_cap", "lnk_sta"}}``."""
    out: dict[str, dict[str, Any]] = {}
    dev: dict[str, Any] | None = None
    for line in output.splitlines():
        m = re.match(r"^([0-9a-fA-F:]+:[0-9a-fA-F]{2}\.[0-7])\s", line)
        if m:
            dev = out.setdefault(m.group(1).lower(), {})
            continue
        if dev is None:
            continue
        m = re.search(r"BAR 1: current size: (\d+)(MB|GB|TB), supported: (.*)$", line)
        if m:
            sizes = [int(n) * _SIZE[u] for n, u in re.findall(r"(\d+)(MB|GB|TB)", m.group(3))]
            dev["bar1_current_mib"] = int(m.group(1)) * _SIZE[m.group(2)]
            dev["bar1_max_mib"] = max(sizes) if sizes else None
        m = re.search(r"LnkCap:.*Speed ([\d.]+)GT/s, Width x(\d+)", line)
        if m:
            dev["lnk_cap"] = (float(m.group(1)), int(m.group(2)))
        m = re.search(r"LnkSta:\s+Speed ([\d.]+)GT/s[^,]*, Width x(\d+)", line)
        if m:
            dev["lnk_sta"] = (float(m.group(1)), int(m.group(2)))
    return out


# --------------------------------------------------------------------------
# cpu.topology from what a published capture gives (NUMA lists, plain lscpu): fixture hosts only


def topology_from_numa(cpu_nodes: dict[str, list[int]], *, threads_per_core: int | None = None,
                       l3_per_node: bool = False, socket_per_node: bool = False) -> dict[str, Any]:
    """A ``cpu.topology``-shaped dict from NUMA node CPU lists alone.

    For hosts known only from ``numactl -H``, plain ``lscpu`` or the CPU
    affinity of ``nvidia-smi topo -m``: SMT siblings are unknown (each CPU
    its own core: ``smt_known`` False), and L3 groups are the nodes when
    ``l3_per_node`` (one L3 per socket and node), else unknown.  Sockets are the
    nodes when ``socket_per_node``, else unknown (no ``sockets`` key).
    """
    nodes = {str(k): sorted(v) for k, v in sorted(cpu_nodes.items(), key=lambda kv: int(kv[0]))}
    cpus = sorted({c for v in nodes.values() for c in v})
    out: dict[str, Any] = {
        "source": "numa",
        "cpu_count": len(cpus),
        "online": cpus,
        "numa_known": True,
        "numa_nodes": nodes,
        "l3_groups": {k: v for k, v in nodes.items() if v} if l3_per_node else {},
        "smt_siblings": [],
        "smt_known": False,
        "threads_per_core": threads_per_core,
    }
    if socket_per_node:
        out["sockets"] = {k: v for k, v in nodes.items() if v}
    return out


def topology_from_lscpu_summary(summary: dict[str, Any]) -> dict[str, Any]:
    """A ``cpu.topology``-shaped dict from plain ``lscpu`` (``parse_lscpu_plain``).

    L3 groups are taken as the NUMA nodes when lscpu counts as many L3
    instances as sockets as nodes (one L3 per socket, one node per socket);
    sockets are the nodes when lscpu counts as many sockets as nodes.
    """
    nodes = summary.get("numa_nodes") or {}
    l3 = (summary.get("l3") or {}).get("instances")
    one_per = bool(nodes) and l3 is not None and l3 == summary.get("sockets") == len(nodes)
    return topology_from_numa(nodes, threads_per_core=summary.get("threads_per_core"), l3_per_node=one_per,
                              socket_per_node=bool(nodes) and summary.get("sockets") == len(nodes))
