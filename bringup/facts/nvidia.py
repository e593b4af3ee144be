"""NVIDIA GPUs: ``nvidia.smi`` (query CSV), ``nvidia.query`` (``-q``, and ``-L`` for the MIG devices; with
each GPU's own ``health``: ECC, remapped rows, clock event reasons, temperature), ``nvidia.topo``
(``topo -m``), ``nvidia.nvlink`` (``nvlink -s``).

Conventions: ``N/A``, ``[N/A]``, ``[Not Supported]`` and other bracketed
notices become None; ``Enabled``/``Disabled`` become True/False; values with a
unit (``143771 MiB``, ``700.00 W``, ``16x``) become numbers and the unit moves
into the key (``memory_total_mib``).  Bus ids are also given in sysfs form
(``pci_address``: ``0000:00:06.0``) to join with ``pci.devices``.
"""
from __future__ import annotations

import csv
import re
from typing import Any

from .helpers import cpulist
from .base import Fact, UntrustedOutput
from .pci import normalize_pci_address

__all__ = [
    "NvidiaSmi",
    "NvidiaQuery",
    "NvidiaTopo",
    "parse_query_gpu_csv",
    "parse_nvidia_smi_q",
    "parse_nvidia_smi_q_tree",
    "parse_nvidia_smi_list",
    "parse_nvidia_query",
    "parse_topo_matrix",
    "NvidiaNvlink",
    "parse_nvlink_status",
    "gpu_health",
    "CLOCK_REASON_BITS",
    "HOLDING_REASONS",
]

_QUERY_FIELDS = (
    "index,name,uuid,pci.bus_id,driver_version,memory.total,persistence_mode,"
    "power.limit,clocks.max.sm,compute_cap"
)


def _none_if_na(value: str) -> str | None:
    v = value.strip()
    if v in ("", "N/A", "n/a") or (v.startswith("[") and v.endswith("]")):
        return None
    return v


def _number(text: str) -> int | float | None:
    # At most 20 digits each side: a 400-digit figure is no reading (float() would make it Infinity), not a number.
    m = re.match(r"^\s*(-?\d{1,20}(?:\.\d{1,20})?)(?![\d.])", text)
    if not m:
        return None
    s = m.group(1)
    return float(s) if "." in s else int(s)


def _mode(value: str | None) -> bool | str | None:
    if value is None:
        return None
    if value == "Enabled":
        return True
    if value == "Disabled":
        return False
    return value


# --------------------------------------------------------------------------
# --query-gpu CSV
# --------------------------------------------------------------------------

#: Unit-less columns that are integers (other unit-less values stay strings:
#: serials such as ``0000000000000`` or ``0x0000`` must not become numbers).
_INT_COLUMNS = {"index", "count", "accounting.buffer_size", "temperature.gpu", "temperature.memory",
                "temperature.gpu.tlimit", "encoder.stats.sessioncount", "encoder.stats.averagefps",
                "encoder.stats.averagelatency"}
_INT_PREFIXES = ("pcie.link.", "ecc.errors.", "remapped_rows.histogram.", "remapped_rows.correctable",
                 "remapped_rows.uncorrectable", "platform.slot_number", "platform.tray_index",
                 "platform.host_id", "platform.module_id")


def _csv_key(header: str) -> tuple[str, str | None]:
    """``memory.total [MiB]`` → (``memory_total_mib``, ``MiB``); ``pci.bus_id`` → (``pci_bus_id``, None)."""
    h = header.strip()
    at = h.rfind("[")  # linear: not ^(.*?)\s*\[...\]\s*$ over host text
    m = at >= 0 and h.endswith("]") and len(h) - at > 2 and "]" not in h[at + 1:-1]
    base, unit = (h[:at].rstrip(), h[at + 1:-1]) if m else (h, None)
    key = re.sub(r"[^0-9a-z]+", "_", base.lower()).strip("_")
    if unit:
        key += "_" + {"%": "pct"}.get(unit, re.sub(r"[^0-9a-z]+", "_", unit.lower()).strip("_"))
    return key, unit


def parse_query_gpu_csv(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi --query-gpu=... --format=csv`` → one dict per GPU, header-driven.

    Lines before the header (shell prompts, ``lspci`` output in a capture) are
    skipped: the header is the first line whose fields look like query field
    names.  Error text (no driver, unknown field) gives ``[]``.
    """
    lines = [l for l in output.splitlines() if l.strip() and not l.startswith("#")]
    start = None
    for i, line in enumerate(lines):
        cells = [c.strip() for c in line.split(",")]
        if len(cells) >= 1 and all(re.fullmatch(r"[A-Za-z_][\w.]*(\s*\[[^\]]+\])?", c) for c in cells):
            if any(c.split(" ")[0] in ("index", "name", "uuid", "pci.bus_id", "driver_version",
                                       "timestamp", "memory.total") for c in cells):
                start = i
                break
    if start is None:
        return []
    reader = csv.reader(lines[start:], skipinitialspace=True)
    header = next(reader)
    keys = [_csv_key(h) for h in header]
    gpus: list[dict[str, Any]] = []
    for row in reader:
        if len(row) != len(header):
            continue
        gpu: dict[str, Any] = {}
        for (key, unit), field, raw in zip(keys, header, row):
            field_name = field.split("[", 1)[0].strip().lower()  # linear: not \s*\[.*$ searched over host text
            value = _none_if_na(raw)
            if value is None:
                gpu[key] = None
            elif unit:
                gpu[key] = _number(value)
            elif field_name in _INT_COLUMNS or field_name.startswith(_INT_PREFIXES):
                n = _number(value)
                gpu[key] = n if isinstance(n, int) and re.fullmatch(r"-?\d+", value) else value
            else:
                gpu[key] = _mode(value)
        if gpu.get("pci_bus_id"):
            gpu["pci_address"] = normalize_pci_address(str(gpu["pci_bus_id"]))
        gpus.append(gpu)
    return gpus


class _NvidiaSmiFact(Fact):
    """A shared base (no ``name``: not a fact itself): the facts read from ``nvidia-smi``, their default
    on a host without it."""

    requires_command = "nvidia-smi"


class NvidiaSmi(_NvidiaSmiFact):
    name = "nvidia.smi"
    always_prints = True  # its CSV, or its own error on stdout
    command = "nvidia-smi --query-gpu=" + _QUERY_FIELDS + " --format=csv"
    process = staticmethod(parse_query_gpu_csv)


# --------------------------------------------------------------------------
# nvidia-smi -q
# --------------------------------------------------------------------------

#: The deepest nesting of sections read (nvidia-smi -q nests five or six: GPU, Clocks Event Reasons, ...).
TREE_DEPTH_MAX = 32
#: A key's end: blanks, then its colon (``Driver Version      : 580.159.04``); the key is what comes before.
_COLON = re.compile(r"\s:")


def _key_value(line: str) -> tuple[str, str] | None:
    """``(key, value)`` of a ``key : value`` line, both stripped; None for a section title.  In one pass over the
    line: the key runs to the first blank that a colon follows (keys hold colons only without a blank before
    them, as a bus id does), as ``^\\s*(.+?)\\s+:\\s?(.*)$`` read it, whose backtracking made a line of many blanks
    cost cubic time."""
    text = line.strip()
    m = _COLON.search(text, 1)
    if m is None:
        return None
    return text[:m.start()].rstrip(), text[m.end():].strip()


def parse_nvidia_smi_q_tree(output: str) -> dict[str, Any]:
    """Indentation tree of ``nvidia-smi -q``: sections are dicts, leaves strings.

    A key repeated within one section (e.g. per-process entries) becomes a list.
    Tabs are expanded; blank lines and the ``====`` banner are ignored.
    """
    root: dict[str, Any] = {}
    stack: list[tuple[int, dict[str, Any]]] = [(-1, root)]

    def put(d: dict[str, Any], key: str, value: Any) -> None:
        if key in d:
            if isinstance(d[key], list) and d.get(f"\0{key}"):
                d[key].append(value)
            else:
                d[key] = [d[key], value]
                d[f"\0{key}"] = True
        else:
            d[key] = value

    for raw in output.expandtabs(4).splitlines():
        if not raw.strip() or raw.lstrip().startswith("=") or raw.startswith("#"):
            continue
        indent = len(raw) - len(raw.lstrip(" "))
        while stack and stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        pair = _key_value(raw)
        if pair:
            put(parent, *pair)
        else:
            if len(stack) > TREE_DEPTH_MAX:
                raise UntrustedOutput(f"nvidia-smi -q: sections nested deeper than {TREE_DEPTH_MAX} levels (line "
                                      f"{raw.strip()[:60]!r}): not nvidia-smi's report")
            section: dict[str, Any] = {}
            put(parent, raw.strip(), section)
            stack.append((indent, section))

    def clean(d: Any) -> Any:
        if isinstance(d, dict):
            return {k: clean(v) for k, v in d.items() if not k.startswith("\0")}
        if isinstance(d, list):
            return [clean(v) for v in d]
        return d

    return clean(root)


def _get(tree: dict[str, Any], *path: str) -> Any:
    cur: Any = tree
    for p in path:
        if not isinstance(cur, dict) or p not in cur:
            return None
        cur = cur[p]
    return cur


def _sval(tree: dict[str, Any], *path: str) -> str | None:
    v = _get(tree, *path)
    return _none_if_na(v) if isinstance(v, str) else None


def _nval(tree: dict[str, Any], *path: str) -> int | float | None:
    v = _sval(tree, *path)
    return _number(v) if v is not None else None


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


# --------------------------------------------------------------------------
# nvidia-smi -q: what the hardware says of its own health
# --------------------------------------------------------------------------

#: The clock event reasons (``Clocks Event Reasons``; ``Clocks Throttle Reasons`` before driver 535) by the
#: name nvidia-smi prints, as the keys the health fact gives them.
CLOCK_REASONS = {
    "Idle": "idle", "GPU Idle": "idle",
    "Applications Clocks Setting": "applications_clocks",
    "SW Power Cap": "sw_power_cap",
    "HW Slowdown": "hw_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown",
    "HW Power Brake Slowdown": "hw_power_brake",
    "Sync Boost": "sync_boost",
    "SW Thermal Slowdown": "sw_thermal_slowdown",
    "Display Clock Setting": "display_clock",
}
#: Each reason's bit in NVML's mask (nvml.h, ``nvmlClocksEventReason*``), which ``--query-gpu=
#: clocks_event_reasons.active`` prints: the same reasons read from a load's samples.
CLOCK_REASON_BITS = {"idle": 0x1, "applications_clocks": 0x2, "sw_power_cap": 0x4, "hw_slowdown": 0x8,
                     "sync_boost": 0x10, "sw_thermal_slowdown": 0x20, "hw_thermal_slowdown": 0x40,
                     "hw_power_brake": 0x80, "display_clock": 0x100}
#: The reasons that mean the hardware holds the clocks down (heat, power delivery): a fault, not a setting.
HOLDING_REASONS = {"hw_slowdown": "HW slowdown", "hw_thermal_slowdown": "HW thermal slowdown",
                   "hw_power_brake": "HW power brake", "sw_thermal_slowdown": "SW thermal slowdown"}

#: The counters of time spent in a reason since the driver loaded (``Clocks Event Reasons Counters``).
CLOCK_COUNTERS = {
    "SW Power Capping": "sw_power_cap", "Sync Boost": "sync_boost", "SW Thermal Slowdown": "sw_thermal_slowdown",
    "HW Thermal Slowdown": "hw_thermal_slowdown", "HW Power Braking": "hw_power_brake",
}


def _count(value: Any) -> int | None:
    """A counter leaf (``0``); N/A and anything not a whole number: None."""
    v = _none_if_na(value) if isinstance(value, str) else None
    return int(v) if v is not None and re.fullmatch(r"\d+", v) else None


def _ecc_counts(section: Any) -> dict[str, int | None] | None:
    """One ``Volatile`` or ``Aggregate`` block of ``ECC Errors`` → correctable and uncorrectable counts, SRAM and
    DRAM apart where the driver names them.

    Drivers from 525 print ``SRAM Correctable``, ``SRAM Uncorrectable [Parity|SEC-DED]``, ``DRAM Correctable``,
    ``DRAM Uncorrectable``; older ones ``Single Bit`` / ``Double Bit`` blocks with a ``Total``.  Every value N/A
    (ECC off, a part without it): None.
    """
    if not isinstance(section, dict):
        return None
    out: dict[str, int | None] = {}
    for key, value in section.items():
        if isinstance(value, dict):  # Single Bit / Double Bit blocks of older drivers
            kind = {"Single Bit": "correctable", "Double Bit": "uncorrectable"}.get(key)
            if kind and _count(value.get("Total")) is not None:
                out[kind] = (out.get(kind) or 0) + _count(value.get("Total"))
            continue
        n = _count(value)
        if n is None:
            continue
        kind = "uncorrectable" if "Uncorrectable" in key else "correctable" if "Correctable" in key else None
        if kind is None:
            continue
        where = "sram" if key.startswith("SRAM") else "dram" if key.startswith("DRAM") else None
        out[kind] = (out.get(kind) or 0) + n
        if where:
            out[f"{where}_{kind}"] = (out.get(f"{where}_{kind}") or 0) + n
    return out or None


def _yes(value: Any) -> bool | None:
    v = _none_if_na(value) if isinstance(value, str) else None
    return None if v is None else v in ("Yes", "Active", "Enabled")


def _temperature(sec: dict[str, Any]) -> dict[str, Any]:
    """Current GPU temperature and how far it is from the slowdown limit.

    Drivers from 550 print margins: ``GPU T.Limit Temp`` (degrees below the maximum operating limit) and
    ``GPU Slowdown T.Limit Temp`` (where slowdown starts, relative to that limit); older ones print absolute
    ``GPU Slowdown Temp``.  ``slowdown_margin_c``: degrees left before the GPU slows down, either way.
    """
    t = "Temperature"
    current = _nval(sec, t, "GPU Current Temp")
    tlimit, slow_rel = _nval(sec, t, "GPU T.Limit Temp"), _nval(sec, t, "GPU Slowdown T.Limit Temp")
    slowdown = _nval(sec, t, "GPU Slowdown Temp")
    margin = None
    if tlimit is not None and slow_rel is not None:
        margin = tlimit - slow_rel
    elif slowdown is not None and current is not None:
        margin = slowdown - current
    return {"gpu_c": current, "slowdown_c": slowdown, "tlimit_margin_c": tlimit, "slowdown_margin_c": margin,
            "memory_c": _nval(sec, t, "Memory Current Temp")}


def gpu_health(sec: dict[str, Any]) -> dict[str, Any]:
    """One GPU section of ``nvidia-smi -q`` → what it says of the GPU's health.

    ``ecc_volatile`` / ``ecc_aggregate`` (:func:`_ecc_counts`), ``remapped_rows`` (correctable, uncorrectable,
    pending, failure), ``retired_pages`` (single_bit, double_bit, pending; parts before Ampere), the repair
    flags of newer drivers (``channel_repair_pending``, ``tpc_repair_pending``, ``unrepairable_memory``,
    ``sram_threshold_exceeded``), ``clock_reasons`` (each reason printed: True when Active),
    ``clock_counters_us`` and ``temperature``.  A value the part does not have is None.
    """
    ecc = sec.get("ECC Errors") if isinstance(sec.get("ECC Errors"), dict) else {}
    rows = sec.get("Remapped Rows") if isinstance(sec.get("Remapped Rows"), dict) else {}
    pages = sec.get("Retired Pages") if isinstance(sec.get("Retired Pages"), dict) else {}
    reasons_sec = sec.get("Clocks Event Reasons") or sec.get("Clocks Throttle Reasons")
    counters_sec = sec.get("Clocks Event Reasons Counters") or sec.get("Clocks Throttle Reasons Counters")
    reasons = {CLOCK_REASONS[k]: _yes(v) for k, v in (reasons_sec or {}).items()
               if k in CLOCK_REASONS and isinstance(v, str)} if isinstance(reasons_sec, dict) else {}
    counters = {CLOCK_COUNTERS[k]: _number(v) for k, v in (counters_sec or {}).items()
                if k in CLOCK_COUNTERS and isinstance(v, str) and _none_if_na(v) is not None} \
        if isinstance(counters_sec, dict) else {}

    def page_count(key: str) -> int | None:
        v = pages.get(key)
        return _count(v.get("Count")) if isinstance(v, dict) else _count(v)

    return {
        "ecc_volatile": _ecc_counts(ecc.get("Volatile")),
        "ecc_aggregate": _ecc_counts(ecc.get("Aggregate")),
        "sram_threshold_exceeded": _yes(_get(ecc, "Aggregate", "SRAM Threshold Exceeded")),
        "channel_repair_pending": _yes(ecc.get("Channel Repair Pending")),
        "tpc_repair_pending": _yes(ecc.get("TPC Repair Pending")),
        "unrepairable_memory": _yes(ecc.get("Unrepairable Memory")),
        "remapped_rows": {
            "correctable": _count(rows.get("Correctable Error")),
            "uncorrectable": _count(rows.get("Uncorrectable Error")),
            "pending": _yes(rows.get("Pending")),
            "failure": _yes(rows.get("Remapping Failure Occurred")),
        } if rows else None,
        "retired_pages": {
            "single_bit": page_count("Single Bit ECC"),
            "double_bit": page_count("Double Bit ECC"),
            "pending": _yes(pages.get("Pending Page Blacklist", pages.get("Pending Page Retirement"))),
        } if pages else None,
        "clock_reasons": reasons,
        "clock_counters_us": counters,
        "temperature": _temperature(sec),
    }


def mig_devices_of(section: Any) -> list[dict[str, Any]] | None:
    """A GPU's ``MIG Devices`` section of ``nvidia-smi -q`` → one ``{index, gpu_instance_id, compute_instance_id,
    profile, uuid}`` per ``MIG Device`` under it (``profile`` and ``uuid`` None: ``-q`` prints neither, ``-L``
    does); ``None`` (``MIG Devices : None``) is ``[]``.  A device without its index (cut, an unknown form) makes
    the count unknown (None), never an undercount."""
    if isinstance(section, str):
        return [] if _none_if_na(section) is None or section.strip() == "None" else None
    if not isinstance(section, dict):
        return None
    listed = section.get("MIG Device")
    if listed is None:
        return None if section else []
    out = []
    for dev in listed if isinstance(listed, list) else [listed]:
        index = _count(dev.get("Index")) if isinstance(dev, dict) else None
        if index is None:
            return None
        out.append({"index": index, "gpu_instance_id": _count(dev.get("GPU Instance ID")),
                    "compute_instance_id": _count(dev.get("Compute Instance ID")), "profile": None, "uuid": None})
    return out


_NVML_FAILED = re.compile(r"^Failed to initialize NVML: ([^\n]*\S)", re.M)  # linear: no (.+?)\s*$
_NVML_LIBRARY = re.compile(r"^NVML library version: (\d+\.\d+(?:\.\d+)?)\s*$", re.M)


def nvml_failure(output: str) -> dict[str, Any] | None:
    """``{nvml_error, nvml_library_version}`` where nvidia-smi could not start NVML (``Failed to initialize NVML:
    Driver/library version mismatch`` and, from R535 on, ``NVML library version: 580.178``: the installed
    library, another version than the loaded module's until a reboot); None for any other output."""
    failed = _NVML_FAILED.search(output)
    if not failed:
        return None
    library = _NVML_LIBRARY.search(output)
    return {"nvml_error": failed.group(1), "nvml_library_version": library.group(1) if library else None}


def parse_nvidia_smi_q(output: str) -> dict[str, Any]:
    """``nvidia-smi -q`` → ``{driver_version, cuda_version, attached_gpus, gpus: [...]}``.

    Per GPU: ``bus_id, pci_address, product_name, uuid, vbios_version,
    persistence_mode, mig_mode_current, ecc_mode_current, virtualization_mode,
    addressing_mode, bar1_total_mib, fb_total_mib, fb_reserved_mib,
    pcie_gen_current, pcie_gen_max, pcie_gen_device_max, pcie_gen_host_max,
    pcie_width_current, pcie_width_max, performance_state, power_limit_w,
    max_power_limit_w, max_clocks_sm_mhz, max_clocks_memory_mhz``.

    An output cut short (a GPU section of a full report without its closing "Processes", fewer
    GPU sections than "Attached GPUs") raises :class:`UntrustedOutput`.  Where NVML could not start (a
    driver/library version mismatch): :func:`nvml_failure`'s ``{nvml_error, nvml_library_version}``.
    """
    tree = parse_nvidia_smi_q_tree(output)
    gpus: list[dict[str, Any]] = []
    for key, sec in tree.items():
        m = re.match(r"^GPU\s+([0-9A-Fa-f]+:[0-9A-Fa-f]{2}:[0-9A-Fa-f]{2}\.[0-7])$", key)
        if not m or not isinstance(sec, dict):
            continue
        link = ("PCI", "GPU Link Info")
        power = "GPU Power Readings" if "GPU Power Readings" in sec else "Power Readings"
        gpus.append(
            {
                "bus_id": m.group(1),
                "pci_address": normalize_pci_address(m.group(1)),
                "product_name": _sval(sec, "Product Name"),
                "product_architecture": _sval(sec, "Product Architecture"),
                "uuid": _sval(sec, "GPU UUID"),
                "vbios_version": _sval(sec, "VBIOS Version"),
                "persistence_mode": _mode(_sval(sec, "Persistence Mode")),
                "mig_mode_current": _mode(_sval(sec, "MIG Mode", "Current")),
                "ecc_mode_current": _mode(_sval(sec, "ECC Mode", "Current")),
                "virtualization_mode": _sval(sec, "GPU Virtualization Mode", "Virtualization Mode"),
                "addressing_mode": _sval(sec, "Addressing Mode"),
                "compute_mode": _sval(sec, "Compute Mode"),
                "bar1_total_mib": _nval(sec, "BAR1 Memory Usage", "Total"),
                "fb_total_mib": _nval(sec, "FB Memory Usage", "Total"),
                "fb_reserved_mib": _nval(sec, "FB Memory Usage", "Reserved"),
                "pcie_gen_current": _nval(sec, *link, "PCIe Generation", "Current"),
                "pcie_gen_max": _nval(sec, *link, "PCIe Generation", "Max"),
                "pcie_gen_device_max": _nval(sec, *link, "PCIe Generation", "Device Max"),
                "pcie_gen_host_max": _nval(sec, *link, "PCIe Generation", "Host Max"),
                "pcie_width_current": _nval(sec, *link, "Link Width", "Current"),
                "pcie_width_max": _nval(sec, *link, "Link Width", "Max"),
                "performance_state": _sval(sec, "Performance State"),
                "power_limit_w": _first(_nval(sec, power, "Current Power Limit"),
                                        _nval(sec, power, "Power Limit")),
                "max_power_limit_w": _nval(sec, power, "Max Power Limit"),
                "default_power_limit_w": _nval(sec, power, "Default Power Limit"),
                # Drivers 560+ print the instantaneous and the average draw, older ones one "Power Draw".
                "power_draw_w": _first(_nval(sec, power, "Power Draw"), _nval(sec, power, "Instantaneous Power Draw"),
                                       _nval(sec, power, "Average Power Draw")),
                "max_clocks_sm_mhz": _nval(sec, "Max Clocks", "SM"),
                "max_clocks_memory_mhz": _nval(sec, "Max Clocks", "Memory"),
                # NVSwitch boards (HGX/DGX): the GPU's fabric registration; None where the part has no fabric.
                "fabric_state": _sval(sec, "Fabric", "State"),
                "fabric_status": _sval(sec, "Fabric", "Status"),
                "fabric_health": _sval(sec, "Fabric", "Health", "Summary"),
                "health": gpu_health(sec),
            }
        )
        if "MIG Devices" in sec:
            gpus[-1]["mig_devices"] = mig_devices_of(sec["MIG Devices"])
    if not gpus and "Driver Version" not in tree:
        return nvml_failure(output) or {}
    attached = _sval(tree, "Attached GPUs")
    # A cut output must not pass for a GPU without BAR1, ECC or link values.  "Processes" is
    # printed in every GPU section of a full report (all drivers seen); a ``-d`` subset report
    # (no "Product Name") has no such section and is not checked.
    for sec_key, sec in tree.items():
        if re.match(r"^GPU\s+[0-9A-Fa-f]+:", sec_key) and isinstance(sec, dict) and "Product Name" in sec \
                and "Processes" not in sec:
            raise UntrustedOutput(f"nvidia-smi -q: the section of {sec_key} ends before 'Processes' "
                                  "(output cut short?)")
    if attached and attached.isdigit() and len(gpus) < int(attached):
        raise UntrustedOutput(f"nvidia-smi -q: Attached GPUs {attached} but {len(gpus)} GPU section(s) "
                              "(output cut short?)")
    return {
        "driver_version": _sval(tree, "Driver Version"),
        "cuda_version": _sval(tree, "CUDA Version"),
        "attached_gpus": int(attached) if attached and attached.isdigit() else None,
        "gpus": gpus,
    }


# --------------------------------------------------------------------------
# nvidia-smi -L: the MIG devices, read with -q by nvidia.query
# --------------------------------------------------------------------------

#: The line ``nvidia.query``'s command prints between ``nvidia-smi -q`` and ``nvidia-smi -L``.
LIST_MARK = "--- nvidia-smi -L"
_LIST_GPU_HEAD = re.compile(r"GPU\s+(\d+):(?=\s)")
_UUID_TAIL = re.compile(r"\(UUID:\s*([^)\s]+)\)")


def _gpu_line(line: str) -> tuple[int, str, str] | None:
    """``GPU <n>: <name> (UUID: <uuid>)`` (``nvidia-smi -L``, ``nvlink -s``) as ``(n, name, uuid)``, or None.

    Read in linear time (the line is host output: ``\\s+(.*?)\\s+\\(`` backtracked cubically, 6,000 spaces took
    minutes): the head by a prefix match, the UUID from the last ``(UUID:`` of the line, the name between."""
    head = _LIST_GPU_HEAD.match(line)
    if not head:
        return None
    rest = line[head.end():].rstrip()
    at = rest.rfind("(UUID:")
    tail = _UUID_TAIL.fullmatch(rest, at) if at >= 0 else None
    between = rest[:at]
    if not tail or not between[-1:].isspace() or len(between) < 2 and not between.strip():
        return None
    return int(head.group(1)), between.strip(), tail.group(1)


_LIST_MIG = re.compile(r"^\s+MIG\s+(\S+)\s+Device\s+(\d+):\s+\(UUID:\s*([^)\s]+)\)\s*$")


def parse_nvidia_smi_list(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi -L`` → one ``{index, name, uuid, mig_devices}`` per GPU line; ``mig_devices`` lists the
    ``{index, profile, uuid}`` of the ``MIG <profile> Device <n>`` lines under it (``[]``: none).

    A line under a GPU that is neither (cut short, an unknown form) makes that GPU's ``mig_devices`` None:
    its MIG instance count is not known, never undercounted.  Lines before the first GPU (an error text)
    are skipped.
    """
    gpus: list[dict[str, Any]] = []
    for line in output.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        g = _gpu_line(line)
        if g:
            gpus.append({"index": g[0], "name": g[1], "uuid": g[2], "mig_devices": []})
        elif gpus:
            m, devices = _LIST_MIG.match(line), gpus[-1]["mig_devices"]
            if m and devices is not None:
                devices.append({"index": int(m.group(2)), "profile": m.group(1), "uuid": m.group(3)})
            else:
                gpus[-1]["mig_devices"] = None
    return gpus


def parse_nvidia_query(output: str) -> dict[str, Any]:
    """``nvidia.query``'s output: ``nvidia-smi -q`` (:func:`parse_nvidia_smi_q`), then, after the line
    :data:`LIST_MARK`, ``nvidia-smi -L``, whose MIG devices each GPU of the report gets as ``mig_devices``
    (joined by GPU UUID; they name each device's profile and UUID).  Without the mark (an output saved before, a
    capture of ``-q`` alone), or where ``-L`` does not list a GPU whole, the GPU keeps the devices of its own
    ``MIG Devices`` section of ``-q`` (:func:`mig_devices_of`); a GPU whose ``-q`` prints no such section has no
    ``mig_devices``: the count is not known."""
    lines = output.splitlines(keepends=True)
    mark = next((i for i, line in enumerate(lines) if line.rstrip("\r\n") == LIST_MARK), None)
    if mark is None:
        return parse_nvidia_smi_q(output)  # each GPU's "MIG Devices" of -q, where it prints them
    parsed = parse_nvidia_smi_q("".join(lines[:mark]))
    listed = {g["uuid"]: g["mig_devices"] for g in parse_nvidia_smi_list("".join(lines[mark + 1:]))}
    for gpu in parsed.get("gpus") or []:
        if listed.get(gpu.get("uuid")) is not None:
            gpu["mig_devices"] = listed[gpu["uuid"]]
    return parsed


class NvidiaQuery(_NvidiaSmiFact):
    name = "nvidia.query"
    always_prints = True
    # -L beside -q, in the same round trip: the MIG devices under each GPU, one line each.
    command = "nvidia-smi -q\necho\necho '" + LIST_MARK + "'\nnvidia-smi -L"
    process = staticmethod(parse_nvidia_query)


# --------------------------------------------------------------------------
# nvidia-smi topo -m
# --------------------------------------------------------------------------

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
#: A link cell of the matrix (``SOC``: old drivers' name for SYS).
_LINK = re.compile(r"X|SYS|SOC|NODE|PHB|PXB|PIX|NV\d+")


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
    for l in lines:
        m = re.match(r"^node\s+(\d+)\s*([\d,\-]*)\s*$", l.strip())
        if m:
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
        row_cells[cells[0]] = cells[1:]

    # By header: the link cells come first (X, SYS, NODE, PIX, ..., NV#), then attribute
    # columns, each named by the header, known or not.  The widest run of link cells in a GPU
    # row is the number of device columns; a row with fewer was cut.
    def links(rest: list[str]) -> int:
        n = 0
        while n < len(rest) and _LINK.fullmatch(rest[n]):
            n += 1
        return n

    gpu_rows = [n for n in row_cells if re.fullmatch(r"GPU\d+", n)]
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
        m = re.match(r"^\s*(NIC\d+):\s*(\S+)\s*$", l)
        if m:
            nic_legend[m.group(1)] = m.group(2)

    gpus: list[dict[str, Any]] = []
    nics: list[dict[str, Any]] = []
    for name in matrix:
        gm = re.fullmatch(r"GPU(\d+)", name)
        if not gm:
            nics.append({"name": name, "device": nic_legend.get(name, name)})
            continue
        vals = dict(zip(attrs, rows[name]))
        cpu_text = vals.get("CPU Affinity")
        numa_text = vals.get("NUMA Affinity")
        shown = cpulist(cpu_text) if cpu_text and _none_if_na(cpu_text) and re.fullmatch(r"[\d,\-]+", cpu_text) else []
        numa_aff = cpulist(numa_text) if numa_text and re.fullmatch(r"[\d,\-]+", numa_text) else []
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


class NvidiaTopo(_NvidiaSmiFact):
    name = "nvidia.topo"
    always_prints = True
    command = (
        "nvidia-smi topo -m\n"
        "echo ---\n"
        "for n in /sys/devices/system/node/node[0-9]*; do\n"
        "  if [ -d \"$n\" ]; then echo \"node ${n##*/node} $(cat \"$n/cpulist\")\"; fi\n"
        "done"
    )
    process = staticmethod(parse_topo_matrix)
    cpu_lists = ("gpus.*.cpus", "gpus.*.cpus_shown", "gpus.*.numa_affinity")


# --------------------------------------------------------------------------
# nvidia-smi nvlink -s
# --------------------------------------------------------------------------

_NVLINK_LINK = re.compile(r"^\s*Link\s+(\d+):(.*)$")  # the text stripped after: linear (not \s*(.*?)\s*$)
_NVLINK_SPEED = re.compile(r"^(\d+(?:\.\d+)?)\s*GB/s$")
_NVLINK_ALL_INACTIVE = re.compile(r"all links are in-?active", re.I)


def parse_nvlink_status(output: str) -> list[dict[str, Any]]:
    """``nvidia-smi nvlink -s`` → one ``{index, name, uuid, links: [{link, gbps, active}]}`` per GPU line.

    A link prints its speed (``Link 0: 26.562 GB/s``, per direction) or ``<inactive>`` (``gbps`` None,
    ``active`` False).  A GPU without NVLink prints no link line (``links`` ``[]``); a GPU whose every link is
    down may print NVML's notice "... all links are inActive" instead (``all_inactive`` True, ``links`` ``[]``);
    other lines that are no link line (NVML's notices) are skipped.  A link line in any other form (cut short, ``Link 3: 25``) raises
    :class:`UntrustedOutput`: a link must not pass for up, or vanish.
    """
    gpus: list[dict[str, Any]] = []
    for line in output.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        g = _gpu_line(line.strip())
        if g:
            gpus.append({"index": g[0], "name": g[1], "uuid": g[2], "links": []})
            continue
        m = _NVLINK_LINK.match(line)
        if gpus and m is None and _NVLINK_ALL_INACTIVE.search(line):
            # NVML's notice in place of the link lines: "Unable to retrieve NVLink information as all links are
            # inActive" (a GPU whose every link is down, not a GPU without NVLink).
            gpus[-1]["all_inactive"] = True
            continue
        if not gpus or m is None:
            continue  # NVML's notices, and lines of no link
        value = m.group(2).strip()
        speed = _NVLINK_SPEED.match(value)
        if speed is None and value.strip("<>").lower() != "inactive":
            raise UntrustedOutput(f"nvidia-smi nvlink -s: GPU {gpus[-1]['index']} link {m.group(1)}: "
                                  f"{value[:40]!r} is neither a speed nor <inactive> (output cut short?)")
        gpus[-1]["links"].append({"link": int(m.group(1)), "gbps": float(speed.group(1)) if speed else None,
                                  "active": speed is not None})
    return gpus


class NvidiaNvlink(_NvidiaSmiFact):
    name = "nvidia.nvlink"
    command = "nvidia-smi nvlink -s"
    process = staticmethod(parse_nvlink_status)
