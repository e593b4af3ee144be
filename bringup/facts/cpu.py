"""CPU topology: ``cpu.topology``, and its parser of ``lscpu -p``.

The fact runs ``lscpu -p=CPU,CORE,SOCKET,NODE,CACHE`` (or, without lscpu, an
equivalent sysfs walk printing the same columns), then lists the NUMA nodes of
``/sys/devices/system/node`` so that CPU-less (memory-only) nodes are seen.

Mappings keyed by a number (``numa_nodes``, ``sockets``, ``l3_groups``) use
*string* keys (``"0"``) so that a value survives a JSON round trip unchanged.
"""
from __future__ import annotations

import re
from typing import Any

from .helpers import cpulist, to_int
from .base import Fact, UntrustedOutput, format_cpulist

__all__ = [
    "CpuTopology",
    "parse_lscpu_parse",
]


# --------------------------------------------------------------------------
# lscpu -p
# --------------------------------------------------------------------------

def str_keyed(groups: dict[int, list[int]]) -> dict[str, list[int]]:
    """``{node: cpus}`` as JSON keeps it: string keys in order, each list sorted."""
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

    With the sysfs ``node N cpulist`` lines, the rows are checked against them: every
    CPU of a node must have its row, and every online row must be in a node.  A
    mismatch (``lscpu -p`` cut short, or rows lost) would drop CPUs and their SMT
    siblings from the plan without a word: :class:`UntrustedOutput`, naming the CPUs.
    """
    columns: list[list[str]] | None = None
    rows: list[list[str]] = []
    sys_nodes: dict[int, list[int]] = {}
    source = "lscpu"
    own = False  # the header of the fact's own command (lscpu -p=...,CACHE or the sysfs walk), not a bare lscpu -p
    marked = False  # the fact's "---" line, printed after the rows whatever follows
    for raw in output.splitlines():
        line = raw.strip()
        if not line:
            continue
        if line.startswith("#"):
            body = line.lstrip("#").strip()
            if re.match(r"(?i)^cpu,", body):
                if re.search(r"\ssource=sysfs\b", body):
                    source = "sysfs"
                columns = _columns_from_header(re.sub(r"(?<!\s)\s+source=\S+", "", body))
                own = source == "sysfs" or any(len(c) > 1 for c in columns)
            continue
        if line == "---":
            marked = True
            continue
        m = re.match(r"^node\s+([0-9]+)(?:\s+(?!\S*:$)(\S*))?$", line)  # numactl -H's "node 0 cpus: ..." is not one
        if m:
            try:
                sys_nodes[int(m.group(1))] = cpulist(m.group(2))
            except UntrustedOutput as e:
                raise UntrustedOutput(f"lscpu -p: node {m.group(1)}: {e}") from None
            continue
        if re.match(r"^[0-9]+,\S*$", line):  # lscpu's rows hold no blank (a CSV of another tool does)
            rows.append(line.split(","))
    if not rows:
        return {}
    _rows_whole(rows, columns)
    # The fact's own command prints "---" and the kernel's node lists after the rows: without them its rows are
    # checked by what they show alone (below), and the value says that they could not be held against the kernel.
    unverified = None if sys_nodes or marked else (
        f"lscpu -p: {len(rows)} CPU row(s) (the last CPU {rows[-1][0]}) and no kernel NUMA node lists after them "
        + ("(the fact's '---' line is missing: output cut short?)" if own else "(a capture of lscpu -p alone)")
        + ": CPUs cut from the end cannot be told")

    cpus: list[dict[str, Any]] = []
    offline: list[int] = []
    node_column_known = True
    for fields in rows:
        if all(f.strip() == "" for f in fields[1:]):
            # lscpu -p prints an offline CPU (lscpu -p -a, some versions) with every field but
            # the number empty: not online, on no node.
            if to_int(fields[0]) is not None:
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
        for key in ("cpu", "core", "socket", "node", "l3"):
            if rec.get(key, "").strip() and to_int(rec[key]) is None:
                raise UntrustedOutput(f"lscpu -p: CPU row {','.join(fields)[:60]!r}: its {key} {rec[key][:20]!r} is "
                                      "not a number (garbled output)")
        cpu = to_int(rec.get("cpu", ""))
        if cpu is None:
            continue
        node = to_int(rec.get("node", ""))
        if node is None:
            node_column_known = False
        cpus.append(
            {
                "cpu": cpu,
                "core": to_int(rec.get("core", "")),
                "socket": to_int(rec.get("socket", "")) or 0,
                "node": node,
                "l3": to_int(rec.get("l3", "")),
            }
        )
    if not cpus:
        return {}
    cpus.sort(key=lambda c: c["cpu"])

    # sysfs node lists are authoritative when present (and show CPU-less nodes).
    numa_known = node_column_known
    if sys_nodes:
        owner = {c: n for n, cl in sys_nodes.items() for c in cl}
        _cross_check({c["cpu"] for c in cpus}, set(offline), owner)
        for c in cpus:
            c["node"] = owner[c["cpu"]]
        numa_known = True
    else:
        _alone_whole({c["cpu"] for c in cpus}, set(offline), cpus)
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
        "sockets": str_keyed(sockets),
        "core_count": len(cores),
        "threads_per_core": max(len(g) for g in cores.values()),
        "smt_siblings": siblings,
        "numa_known": numa_known,
        "numa_nodes": str_keyed(nodes),
        "l3_groups": str_keyed(l3),
        **({"unverified": unverified} if unverified else {}),
    }


def _rows_whole(rows: list[list[str]], columns: list[list[str]] | None) -> None:
    """Every row as wide as the header (or, without one, as the widest row): a shorter one was cut mid-line."""
    width = len(columns) if columns else max(len(r) for r in rows)
    for r in rows:
        if len(r) < width:
            raise UntrustedOutput(f"lscpu -p: CPU row {','.join(r)[:60]!r} has {len(r)} of {width} fields "
                                  "(output cut short?)")


def _alone_whole(online: set[int], offline: set[int], cpus: list[dict[str, Any]]) -> None:
    """Rows with no kernel NUMA node lists to check them against (a capture of ``lscpu -p`` alone): what the rows
    themselves show of a cut.  The CPUs are numbered from 0 without a gap (an offline CPU has its empty row in
    ``lscpu -p -a``), and on an SMT host every core of a socket has as many threads as the others: rows cut from
    the middle or the end take CPUs and leave their siblings alone."""
    listed = online | offline
    gap = set(range(max(listed) + 1)) - listed
    if gap:
        raise UntrustedOutput(f"lscpu -p: no row for CPU(s) {format_cpulist(gap)} of 0-{max(listed)}, and no "
                              "kernel NUMA node lists to check the rows against (rows cut out?)")
    if offline:
        return
    cores: dict[tuple, int] = {}
    for c in cpus:
        if c["core"] is not None:
            key = (c["socket"], c["core"])
            cores[key] = cores.get(key, 0) + 1
    most = max(cores.values(), default=1)
    alone = sorted(k for k, n in cores.items() if n < most)
    if most > 1 and alone:
        raise UntrustedOutput(f"lscpu -p: {len(alone)} core(s) (socket {alone[0][0]} core {alone[0][1]} first) "
                              f"have fewer threads than the others' {most}, and no kernel NUMA node lists to check "
                              "the rows against (output cut short?)")


def _cross_check(rows: set[int], offline: set[int], owner: dict[int, int]) -> None:
    """The CPU rows against the kernel's node lists (``owner``: CPU -> node); raise on a mismatch."""
    missing = set(owner) - rows - offline
    extra = rows - set(owner)
    if not missing and not extra:
        return
    said = []
    if missing:
        said.append(f"CPU(s) {format_cpulist(missing)} of the NUMA nodes have no row")
    if extra:
        said.append(f"row(s) for CPU(s) {format_cpulist(extra)} are in no NUMA node")
    raise UntrustedOutput(f"lscpu -p lists {len(rows)} online CPU(s), the kernel's NUMA nodes "
                          f"{len(owner)}: {'; '.join(said)} (output cut short?)")


# Without lscpu: the same columns from sysfs, header marked source=sysfs.
SYSFS_CPU_WALK = (
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
    always_prints = True  # lscpu's rows (or the sysfs walk's) and the "---" line at least
    command = (
        "if command -v lscpu >/dev/null 2>&1; then\n"
        "  lscpu -p=CPU,CORE,SOCKET,NODE,CACHE\n"
        "else\n" + SYSFS_CPU_WALK + "\nfi\n"
        "echo ---\n" + _SYSFS_NODES
    )
    process = staticmethod(parse_lscpu_parse)
    cpu_lists = ("online", "offline", "numa_nodes.*", "sockets.*", "l3_groups.*", "smt_siblings.*")
    saved_problem = staticmethod(lambda value: saved_topology_problem(value))


#: The most CPUs (and cores, sockets, threads of a core) a saved topology may count: Linux's NR_CPUS at most.
SAVED_CPUS_MAX = 1 << 16


def saved_topology_problem(topo: Any) -> str:
    """What keeps a saved ``cpu.topology`` from being one :func:`parse_lscpu_parse` makes ('' when nothing): its
    counts whole numbers in range, each ``cpus`` row's ids whole numbers, and every CPU id it lists (rows, nodes,
    sockets, L3 groups, SMT siblings) one of its own CPUs (``online`` and ``offline``, or ``0..cpu_count-1``):
    ``numa_nodes {"0": [0..999999]}`` beside ``cpu_count: 2`` would be planned as a million CPUs."""
    from ..untrusted import Unreadable, number

    if not isinstance(topo, dict) or not topo:
        return ""
    try:
        counts = {}
        for key in ("cpu_count", "core_count", "socket_count", "threads_per_core"):
            if topo.get(key) is not None:
                counts[key] = number(topo[key], lo=0, hi=SAVED_CPUS_MAX, integer=True, what=key)
        rows = topo.get("cpus", [])
        if not isinstance(rows, list):
            return f"cpus is {type(rows).__name__}, not a list of CPU rows"
        for i, row in enumerate(rows):
            if not isinstance(row, dict):
                return f"cpus[{i}] is not a CPU row (cpu, core, socket, node, l3)"
            for key in ("cpu", "core", "socket", "node", "l3"):
                if row.get(key) is not None or key == "cpu":
                    number(row.get(key), lo=0, hi=SAVED_CPUS_MAX * 64, integer=True, what=f"cpus[{i}].{key}")
    except Unreadable as e:
        return str(e)
    lists = [(k, topo.get(k)) for k in ("online", "offline")]
    lists += [(f"{k}.{n}", v) for k in ("numa_nodes", "sockets", "l3_groups")
              if isinstance(topo.get(k), dict) for n, v in topo[k].items()]
    lists += [(f"smt_siblings.{i}", v) for i, v in enumerate(topo.get("smt_siblings") or [])
              if isinstance(topo.get("smt_siblings"), list)]
    lists += [(f"cpus[{i}].cpu", [r["cpu"]]) for i, r in enumerate(rows)]
    online, offline = topo.get("online"), topo.get("offline") or []
    if isinstance(online, list) and "cpu_count" in counts and len(online) != counts["cpu_count"]:
        return f"online lists {len(online)} CPU(s), cpu_count says {counts['cpu_count']}"
    if isinstance(online, list) and isinstance(offline, list):
        own, said = set(online) | set(offline), "its online and offline CPUs"
    elif "cpu_count" in counts:
        own, said = set(range(counts["cpu_count"])), f"0-{counts['cpu_count'] - 1} (cpu_count {counts['cpu_count']})"
    else:
        return ""
    for where, ids in lists:
        if not isinstance(ids, list):
            continue  # the kind of a CPU list is cpu_lists's to name
        stray = [c for c in ids if isinstance(c, int) and c not in own]
        if stray:
            return f"{where} holds CPU {stray[0]}, not one of {said}"
    return ""
