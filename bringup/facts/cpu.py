"""CPU topology: ``cpu.topology``, and parsers of ``lscpu`` / ``numactl -H``.

The fact runs ``lscpu -p=CPU,CORE,SOCKET,NODE,CACHE`` (or, without lscpu, an
equivalent sysfs walk printing the same columns), then lists the NUMA nodes of
``/sys/devices/system/node`` so that CPU-less (memory-only) nodes are seen.

Mappings keyed by a number (``numa_nodes``, ``sockets``, ``l3_groups``) use
*string* keys (``"0"``) so that a value survives a JSON round trip unchanged.
"""
from __future__ import annotations

import json
import re
from typing import Any

from ._util import cpulist
from .base import Fact

__all__ = [
    "CpuTopology",
    "parse_lscpu_parse",
    "parse_lscpu_plain",
    "parse_lscpu_json",
    "parse_numactl_hardware",
    "parse_size_kib",
]


# --------------------------------------------------------------------------
# lscpu -p
# --------------------------------------------------------------------------

def _int_or_none(text: str) -> int | None:
    text = text.strip()
    if re.fullmatch(r"-?\d+", text):
        return int(text)
    return None


def _str_keyed(groups: dict[int, list[int]]) -> dict[str, list[int]]:
    return {str(k): sorted(groups[k]) for k in sorted(groups)}


def _columns_from_header(header: str) -> list[list[str]]:
    """``# CPU,Core,Socket,Node,L1d:L1i:L2:L3`` → ``[["cpu"], ..., ["l1d","l1i","l2","l3"]]``."""
    cols = header.lstrip("#").strip().split(",")
    return [[p.strip().lower() for p in c.split(":")] for c in cols]


def parse_lscpu_parse(output: str) -> dict[str, Any]:
    """Parse ``lscpu -p`` (any cache layout) plus optional ``node N cpulist`` lines.

    Cache ids are found from the ``# CPU,Core,...`` header: new lscpu joins them
    with ``:`` in one column (``L1d:L1i:L2:L3``), older lscpu prints separate
    columns after an empty one (``CPU,Core,Socket,Node,,L1d,L1i,L2,L3``).  With
    no header, the last cache field is taken as L3.  An empty Node column
    means a kernel without NUMA: every CPU gets node 0 and ``numa_known`` is
    False (unless sysfs ``node`` lines say otherwise).  A row with every field
    but the CPU number empty is an offline CPU: listed in ``offline``, in no
    node and not ``online``.
    """
    columns: list[list[str]] | None = None
    rows: list[list[str]] = []
    sys_nodes: dict[int, list[int]] = {}
    source = "lscpu"
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if re.match(r"(?i)^cpu,", body):
                if re.search(r"\ssource=sysfs\b", body):
                    source = "sysfs"
                columns = _columns_from_header(re.sub(r"\s+source=\S+", "", body))
            continue
        m = re.match(r"^node\s+(\d+)(?:\s+([\d,\-]*))?$", line)
        if m:
            sys_nodes[int(m.group(1))] = cpulist(m.group(2))
            continue
        if re.match(r"^\d+,", line):
            rows.append(line.split(","))
    if not rows:
        return {}

    cpus: list[dict[str, Any]] = []
    offline: list[int] = []
    node_column_known = True
    for fields in rows:
        if all(f.strip() == "" for f in fields[1:]):
            # lscpu -p prints an offline CPU (lscpu -p -a, some versions) with every field but
            # the number empty: not online, on no node.
            if _int_or_none(fields[0]) is not None:
                offline.append(int(fields[0]))
            continue
        rec: dict[str, str] = {}
        if columns:
            for names, value in zip(columns, fields):
                if len(names) > 1:
                    for sub, v in zip(names, value.split(":")):
                        rec[sub] = v
                elif names[0]:
                    rec[names[0]] = value
        else:
            for name, value in zip(["cpu", "core", "socket", "node"], fields):
                rec[name] = value
            caches = [f for f in fields[4:] if f != ""]
            if len(caches) == 1 and ":" in caches[0]:
                caches = caches[0].split(":")
            if caches:
                rec["l3"] = caches[-1]
        cpu = _int_or_none(rec.get("cpu", ""))
        if cpu is None:
            continue
        node = _int_or_none(rec.get("node", ""))
        if node is None:
            node_column_known = False
        cpus.append(
            {
                "cpu": cpu,
                "core": _int_or_none(rec.get("core", "")),
                "socket": _int_or_none(rec.get("socket", "")) or 0,
                "node": node,
                "l3": _int_or_none(rec.get("l3", "")),
            }
        )
    if not cpus:
        return {}
    cpus.sort(key=lambda c: c["cpu"])

    # sysfs node lists are authoritative when present (and show CPU-less nodes).
    numa_known = node_column_known
    if sys_nodes:
        owner = {c: n for n, cl in sys_nodes.items() for c in cl}
        if all(c["cpu"] in owner for c in cpus):
            for c in cpus:
                c["node"] = owner[c["cpu"]]
            numa_known = True
    for c in cpus:
        if c["node"] is None:
            c["node"] = 0
        if c["core"] is None:  # no core id: treat every CPU as its own core
            c["core"] = c["cpu"]

    sockets: dict[int, list[int]] = {}
    nodes: dict[int, list[int]] = {n: [] for n in sys_nodes} if numa_known else {}
    l3: dict[int, list[int]] = {}
    cores: dict[tuple[int, int], list[int]] = {}
    for c in cpus:
        sockets.setdefault(c["socket"], []).append(c["cpu"])
        nodes.setdefault(c["node"], []).append(c["cpu"])
        if c["l3"] is not None:
            l3.setdefault(c["l3"], []).append(c["cpu"])
        cores.setdefault((c["socket"], c["core"]), []).append(c["cpu"])
    siblings = sorted(sorted(g) for g in cores.values() if len(g) > 1)
    return {
        "source": source,
        "cpu_count": len(cpus),
        "online": [c["cpu"] for c in cpus],
        "offline": sorted(offline),
        "cpus": cpus,
        "socket_count": len(sockets),
        "sockets": _str_keyed(sockets),
        "core_count": len(cores),
        "threads_per_core": max(len(g) for g in cores.values()),
        "smt_siblings": siblings,
        "numa_known": numa_known,
        "numa_nodes": _str_keyed(nodes),
        "l3_groups": _str_keyed(l3),
    }


# Without lscpu: the same columns from sysfs, header marked source=sysfs.
_SYSFS_CPU_WALK = (
    "echo '# CPU,Core,Socket,Node,L3 source=sysfs'\n"
    "for c in /sys/devices/system/cpu/cpu[0-9]*; do\n"
    "  [ -d \"$c/topology\" ] || continue\n"
    "  on=1; if [ -r \"$c/online\" ]; then read -r on < \"$c/online\"; fi\n"
    "  [ \"$on\" = 1 ] || continue\n"
    "  core=; sock=; node=; l3=\n"
    "  read -r core < \"$c/topology/core_id\"\n"
    "  read -r sock < \"$c/topology/physical_package_id\"\n"
    "  for n in \"$c\"/node[0-9]*; do if [ -e \"$n\" ]; then node=${n##*/node}; fi; done\n"
    "  for i in \"$c\"/cache/index[0-9]*; do\n"
    "    lv=; if [ -r \"$i/level\" ]; then read -r lv < \"$i/level\"; fi\n"
    "    if [ \"$lv\" = 3 ] && [ -r \"$i/id\" ]; then read -r l3 < \"$i/id\"; fi\n"
    "  done\n"
    "  echo \"${c##*/cpu},$core,$sock,$node,$l3\"\n"
    "done"
)

_SYSFS_NODES = (
    "for n in /sys/devices/system/node/node[0-9]*; do\n"
    "  if [ -d \"$n\" ]; then echo \"node ${n##*/node} $(cat \"$n/cpulist\")\"; fi\n"
    "done"
)


class CpuTopology(Fact):
    name = "cpu.topology"
    command = (
        "if command -v lscpu >/dev/null 2>&1; then\n"
        "  lscpu -p=CPU,CORE,SOCKET,NODE,CACHE\n"
        "else\n" + _SYSFS_CPU_WALK + "\nfi\n"
        "echo ---\n" + _SYSFS_NODES
    )
    default = {}

    @staticmethod
    def process(output: str) -> dict[str, Any]:
        return parse_lscpu_parse(output)


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
        return _int_or_none(fields.get(key, ""))

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
        "numa_nodes": _str_keyed(nodes),
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
