"""``nvidia-smi topo -m``: the link matrix, each GPU's CPU and NUMA affinity (the ``nvidia.topo`` fact)."""
from __future__ import annotations

import re
from typing import Any

from .base import UntrustedOutput, ascii_whole
from .helpers import cpulist
from .nvidia_values import _none_if_na, _number

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
def _short(cell: str) -> str:
    return cell if len(cell) <= 20 else cell[:20] + "..."


#: A link cell of the matrix (``SOC``: old drivers' name for SYS).
_LINK = re.compile(r"X|SYS|SOC|NODE|PHB|PXB|PIX|NV[0-9]+")


def _cells(line: str, tabbed: bool) -> list[str]:
    if tabbed:
        return [c.strip() for c in line.split("\t")]
    return [c.strip() for c in re.split(r"\s{2,}", line.strip())]


def parse_topo_matrix(output: str, numa_cpus: dict[str, list[int]] | None = None) -> dict[str, Any]:
    """``nvidia-smi topo -m`` → ``{columns, matrix, gpus, nics, has_gpu_numa_id}``.

    Tab-separated (as printed) or space-aligned (copied) text.  ``matrix`` is
    ``{"GPU0": {"GPU1": "NODE", ...}}``.  Each GPU: ``{name, index,
    cpu_affinity (text as printed), cpus, numa_affinity (list), numa_node,
    gpu_numa_id, cpu_affinity_truncated}``.

    nvidia-smi may truncate a long CPU Affinity (interleaved lists such as
    ``0,2,4,...``): there is no marker in the text, so the list is checked
    against the NUMA nodes' CPU lists, from ``numa_cpus`` or from ``node N
    cpulist`` lines after the table (the fact's command appends them).  When
    the shown list is a strict subset of its NUMA node(s), it is truncated:
    ``cpus`` is then None and ``cpus_shown`` keeps what was printed.
    ``cpu_affinity_truncated`` is None when there was nothing to check against.

    Columns are read by the header: the leading link cells (``X``, ``SYS``, ``NODE``, ``NV#``,
    ...) are the device columns, every header name after them an attribute, known or not, so an
    extra column shifts nothing.  Output that cannot be trusted raises
    :class:`UntrustedOutput`: a device column without its row, a row with fewer link cells
    than the widest (both: cut short), a GPU row with more or fewer values than attributes.
    """
    text = _ANSI.sub("", output)
    lines = [l.rstrip("\r\n") for l in text.splitlines()]
    nodes: dict[str, list[int]] = dict(numa_cpus or {})
    listed: set[str] = set()
    for l in lines:
        m = re.match(r"^node\s+([0-9]+)\s*([0-9,\-]*)\s*$", l.strip())
        if m:
            if m.group(1) in listed:  # the command prints each node once: which list is true is not known
                raise UntrustedOutput(f"nvidia-smi topo -m: NUMA node {m.group(1)[:12]}'s CPU list is printed twice")
            listed.add(m.group(1))
            nodes.setdefault(m.group(1), cpulist(m.group(2)))

    header_idx = None
    for i, l in enumerate(lines):
        if l.startswith("#"):
            continue
        if re.search(r"(^|\s)GPU0(\s|$)", l) and ("CPU Affinity" in l or "NUMA Affinity" in l):
            header_idx = i
            break
    if header_idx is None:
        return {}
    tabbed = "\t" in lines[header_idx]
    head = [c for c in _cells(lines[header_idx], tabbed) if c]
    row_cells: dict[str, list[str]] = {}
    for l in lines[header_idx + 1:]:
        if not l.strip():
            break
        cells = _cells(l, "\t" in l if tabbed else False)
        if not cells or cells[0] in ("Legend:",):
            break
        if cells[0] in row_cells:  # one device's row twice (two tables run together): which one is true is not known
            raise UntrustedOutput(f"nvidia-smi topo -m: row {cells[0][:20]} is printed twice")
        row_cells[cells[0]] = cells[1:]

    # By header: the link cells come first (X, SYS, NODE, PIX, ..., NV#), then attribute
    # columns, each named by the header, known or not.  The widest run of link cells in a GPU
    # row is the number of device columns; a row with fewer was cut.
    def links(rest: list[str]) -> int:
        n = 0
        while n < len(rest) and _LINK.fullmatch(rest[n]):
            n += 1
        return n

    gpu_rows = [n for n in row_cells if re.fullmatch(r"GPU[0-9]+", n)]
    for name, rest in row_cells.items():
        # A GPU index or an NVLink count of thousands of digits is none nvidia-smi prints: said in the fact's words,
        # never Python's "Exceeds the limit (4300 digits)" advice (a GPU index: NVML counts devices in 32 bits).
        if name in gpu_rows and not ascii_whole(name[3:], 10):
            raise UntrustedOutput(f"nvidia-smi topo -m: row {_short(name)}: no GPU index")
        bad = next((c for c in rest[:links(rest)] if c.startswith("NV") and not ascii_whole(c[2:], 3)), None)
        if bad is not None:
            raise UntrustedOutput(f"nvidia-smi topo -m: row {_short(name)}: link cell {_short(bad)} is no NVLink count")
    if not gpu_rows:
        raise UntrustedOutput("nvidia-smi topo -m: a header but no GPU row (output cut short?)")
    width = max(links(row_cells[n]) for n in gpu_rows)
    devices, attrs = head[:width], head[width:]
    for name, rest in row_cells.items():
        if links(rest) < width:
            raise UntrustedOutput(f"nvidia-smi topo -m: row {name} has {links(rest)} of {width} link cells "
                                  "(output cut short?)")
    missing = [d for d in devices if d not in row_cells]
    if missing:
        raise UntrustedOutput(f"nvidia-smi topo -m: column(s) {', '.join(missing)} have no row "
                              "(output cut short?)")

    matrix: dict[str, dict[str, str]] = {}
    rows: dict[str, list[str]] = {}
    for name, rest in row_cells.items():
        matrix[name] = {dev: rest[j] for j, dev in enumerate(devices)}
        values = rest[width:]
        if len(values) != len(attrs):
            # nvidia-smi pads with empty tab fields (one before "GPU NUMA ID"); NIC rows have none.
            values = [c for c in values if c != ""]
        if name in gpu_rows and len(values) != len(attrs):
            raise UntrustedOutput(f"nvidia-smi topo -m: row {name} has {len(values)} value(s) for the "
                                  f"{len(attrs)} column(s) {', '.join(attrs)}")
        rows[name] = values

    nic_legend: dict[str, str] = {}
    for l in lines:
        m = re.match(r"^\s*(NIC[0-9]+):\s*(\S+)\s*$", l)
        if m:
            nic_legend[m.group(1)] = m.group(2)

    gpus: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    for name in matrix:
        gm = re.fullmatch(r"GPU([0-9]+)", name)
        if not gm:
            nics.append({"name": name, "device": nic_legend.get(name, name)})
            continue
        vals = dict(zip(attrs, rows[name]))
        cpu_text = vals.get("CPU Affinity")
        numa_text = vals.get("NUMA Affinity")
        shown = cpulist(cpu_text) if cpu_text and _none_if_na(cpu_text) and re.fullmatch(r"[0-9,\-]+", cpu_text) else []
        numa_aff = cpulist(numa_text) if numa_text and re.fullmatch(r"[0-9,\-]+", numa_text) else []
        gpu_numa = vals.get("GPU NUMA ID")
        truncated: bool | None = None
        if numa_aff and all(str(n) in nodes for n in numa_aff):
            node_cpus = {c for n in numa_aff for c in nodes[str(n)]}
            truncated = bool(shown) and set(shown) < node_cpus
        entry: dict[str, Any] = {
            "name": name,
            "index": int(gm.group(1)),
            "cpu_affinity": cpu_text,
            "cpus": None if truncated else shown,
            "numa_affinity": numa_aff,
            "numa_node": numa_aff[0] if len(numa_aff) == 1 else None,
            "gpu_numa_id": _number(gpu_numa) if gpu_numa and _none_if_na(gpu_numa) else None,
            "cpu_affinity_truncated": truncated,
        }
        if truncated:
            entry["cpus_shown"] = shown
        gpus.append(entry)
    return {
        "columns": devices,
        "matrix": matrix,
        "gpus": gpus,
        "nics": nics,
        "has_gpu_numa_id": "GPU NUMA ID" in attrs,
    }
