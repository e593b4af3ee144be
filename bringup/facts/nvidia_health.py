"""What ``nvidia-smi -q`` says of each GPU's own health: ECC, remapped rows, retired pages, clock event
reasons, temperature (the ``health`` of each GPU of ``nvidia.query``)."""
from __future__ import annotations

from typing import Any

from ..untrusted import Unreadable
from .nvidia_values import ABSENT, COUNT_MAX, _get, _seen, read_count, read_flag, read_number


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


class _Reader:
    """Reads one GPU section's counters and flags strictly, keeping what could not be read by the check it belongs
    to (``ecc``, ``memory_repair``, ``clock_reasons``, ``temperature``): ``Volatile DRAM Uncorrectable 'NaN'``."""

    def __init__(self) -> None:
        self.bad: dict[str, list[str]] = {}

    def _read(self, read, group: str, label: str, value: Any) -> Any:
        try:
            return read(value)
        except Unreadable as e:
            self.bad.setdefault(group, []).append(f"{label} {e}")
            return None

    def value(self, read, group: str, label: str, value: Any) -> Any:
        """``read(value)``, or None with the value named under ``group`` where it is :class:`Unreadable`."""
        return self._read(read, group, label, value)

    def count(self, group: str, label: str, value: Any) -> int | None:
        return self._read(read_count, group, label, value)

    def flag(self, group: str, label: str, value: Any) -> bool | None:
        return self._read(read_flag, group, label, value)

    def number(self, group: str, label: str, value: Any, unit: str, lo: float, hi: float) -> int | float | None:
        return self._read(lambda v: read_number(v, unit, lo=lo, hi=hi), group, label, value)


def _ecc_counts(section: Any, read: _Reader, where: str) -> dict[str, int | None] | None:
    """One ``Volatile`` or ``Aggregate`` block of ``ECC Errors`` → correctable and uncorrectable counts, SRAM and
    DRAM apart where the driver names them.

    Drivers from 525 print ``SRAM Correctable``, ``SRAM Uncorrectable [Parity|SEC-DED]``, ``DRAM Correctable``,
    ``DRAM Uncorrectable``; older ones ``Single Bit`` / ``Double Bit`` blocks with a ``Total``.  Every value N/A
    (ECC off, a part without it): None.  A counter that is no count (``NaN``, ``-1``, printed twice) is kept in
    ``read.bad`` under ``ecc``, never counted as 0.
    """
    if not isinstance(section, dict):
        return None
    out: dict[str, int | None] = {}
    # Counters printed N/A, with their memory (sram, dram, None for the older drivers' Single/Double Bit blocks): no
    # count, and no damage unless figures of the same memory stand beside them.
    absent: list[tuple[str | None, str]] = []

    def counted(label: str, value: Any, side: str | None = None) -> int | None:
        named = len(read.bad.get("ecc", []))
        n = read.count("ecc", label, value)
        if n is None and value is not None and len(read.bad.get("ecc", [])) == named:
            absent.append((side, f"{label} {str(value).strip()[:20]!r}"))
        return n

    for key, value in section.items():
        if isinstance(value, dict):  # Single Bit / Double Bit blocks of older drivers
            kind = {"Single Bit": "correctable", "Double Bit": "uncorrectable"}.get(key)
            n = counted(f"{where} {key} Total", value.get("Total")) if kind else None
            if kind and n is not None:
                out[kind] = (out.get(kind) or 0) + n
            continue
        kind = "uncorrectable" if "Uncorrectable" in key else "correctable" if "Correctable" in key else None
        if kind is None:
            continue
        side = "sram" if key.startswith("SRAM") else "dram" if key.startswith("DRAM") else None
        n = counted(f"{where} {key}", value, side)
        if n is None:
            continue
        out[kind] = (out.get(kind) or 0) + n
        if side:
            out[f"{side}_{kind}"] = (out.get(f"{side}_{kind}") or 0) + n
    # N/A beside figures (DRAM Uncorrectable N/A beside DRAM Correctable 0, DRAM N/A beside SRAM figures): that count
    # is unknown, never summed as 0 (the line passed "0 uncorrectable" whatever the DRAM had); named, as memory
    # repair's are.  The one exception is what real GDDR parts print: every SRAM counter N/A beside DRAM figures (the
    # real RTX A6000 vGPU and A10 captures): the part counts no SRAM errors, no damage.
    sram_only = all(side == "sram" for side, _ in absent) and not any(k.startswith("sram_") for k in out)
    damaged = [] if not out or (sram_only and any(k.startswith("dram_") for k in out)) else [s for _, s in absent]
    if damaged:
        read.bad.setdefault("ecc", []).extend(f"{said} beside the block's figures" for said in damaged)
    return out or None


#: Degrees Celsius nvidia-smi can print for a GPU's or its memory's temperature: NVML reports them unsigned (no
#: reading is below 0 °C, and a chip below freezing is not running in a rack); no part's limit is past 150 °C.
#: Outside, no reading (``-5 C``, ``-99 C``, ``200 C``): not checked, never PASS.
TEMPERATURE_RANGE_C = (0, 150)
#: The GPU's own temperature (``GPU Current Temp``): a powered GPU in a rack is warmer than its inlet air (ASHRAE's
#: lowest allowed inlet is 5 °C), so 0 °C is a sensor that reads nothing or a bad read, never a cool GPU: not checked.
#: Its margins (``GPU T.Limit Temp``) come from the same sensor.  The memory's 0 °C is left as read (it judges nothing).
GPU_TEMPERATURE_RANGE_C = (1, 150)
#: Degrees a margin below a limit (``GPU T.Limit Temp``, ``GPU Slowdown T.Limit Temp``) can be: negative past the
#: limit; no part's limit is 150 °C above its temperature (``T.Limit 200 C`` is no reading).
MARGIN_RANGE_C = (-150, 150)


def _temperature(sec: dict[str, Any], read: _Reader) -> dict[str, Any]:
    """Current GPU temperature and how far it is from the slowdown limit.

    Drivers from 550 print margins: ``GPU T.Limit Temp`` (degrees below the maximum operating limit) and
    ``GPU Slowdown T.Limit Temp`` (where slowdown starts, relative to that limit); older ones print absolute
    ``GPU Slowdown Temp``.  ``slowdown_margin_c``: degrees left before the GPU slows down, either way.  Each value
    is a whole ``<number> C`` (``1e308 C``, ``0x21 C``, ``33 F``, ``NaN C`` are kept in ``read.bad``, never read
    as 1, 0 or 33 °C nor left out unsaid).
    """
    def temp(key: str, within: tuple[int, int] = TEMPERATURE_RANGE_C) -> int | float | None:
        return read.number("temperature", key, _get(sec, "Temperature", key), "C", *within)

    current = temp("GPU Current Temp", GPU_TEMPERATURE_RANGE_C)
    tlimit, slow_rel = temp("GPU T.Limit Temp", MARGIN_RANGE_C), temp("GPU Slowdown T.Limit Temp", MARGIN_RANGE_C)
    slowdown = temp("GPU Slowdown Temp")
    margin = None
    if tlimit is not None and slow_rel is not None:
        margin = tlimit - slow_rel
    elif slowdown is not None and current is not None:
        margin = slowdown - current
    return {"gpu_c": current, "slowdown_c": slowdown, "tlimit_margin_c": tlimit, "slowdown_margin_c": margin,
            "memory_c": temp("Memory Current Temp")}


#: What ``GPU Recovery Action`` (drivers 550+) asks, by the words nvidia-smi prints (NVML's
#: ``nvmlDeviceGpuRecoveryAction_t``; NVIDIA's "Error Recovery and Response Flags"): None, nothing.
RECOVERY_ACTIONS = ("None", "Reset", "Reboot", "Drain P2P", "Drain and Reset")
#: What newer drivers print in place of a value they no longer give (``Reset Required`` from 570 on).
DEPRECATED = "Requested functionality has been deprecated"


def _recovery(sec: dict[str, Any], read: _Reader) -> dict[str, Any]:
    """What the driver asks be done to the GPU before it is used again: ``GPU Reset Status``'s ``Reset Required`` and
    ``Drain and Reset Recommended`` (Yes/No; deprecated from 570) and ``GPU Recovery Action`` (one of
    :data:`RECOVERY_ACTIONS`).  Not printed, N/A or deprecated: None; any other word is kept in ``read.bad`` under
    ``recovery``, never taken for None."""
    status = sec.get("GPU Reset Status") if isinstance(sec.get("GPU Reset Status"), dict) else {}

    def flag(key: str) -> bool | None:
        v = status.get(key)
        return None if isinstance(v, str) and v.strip() == DEPRECATED else read.flag(
            "recovery", f"GPU Reset Status {key}", v)

    action = sec.get("GPU Recovery Action")
    said = action.strip() if isinstance(action, str) else None
    if action is not None and said not in RECOVERY_ACTIONS and said not in ABSENT and said != DEPRECATED:
        read.bad.setdefault("recovery", []).append(f"GPU Recovery Action {_seen(action)}")
    return {"reset_required": flag("Reset Required"), "drain_and_reset": flag("Drain and Reset Recommended"),
            "action": said if said in RECOVERY_ACTIONS else None}


def gpu_health(sec: dict[str, Any]) -> dict[str, Any]:
    """One GPU section of ``nvidia-smi -q`` → what it says of the GPU's health.

    ``ecc_volatile`` / ``ecc_aggregate`` (:func:`_ecc_counts`), ``remapped_rows`` (correctable, uncorrectable,
    pending, failure), ``retired_pages`` (single_bit, double_bit, pending; parts before Ampere), the repair
    flags of newer drivers (``channel_repair_pending``, ``tpc_repair_pending``, ``unrepairable_memory``,
    ``sram_threshold_exceeded``), ``clock_reasons`` (each reason printed: True when Active),
    ``clock_counters_us``, ``temperature`` and ``recovery`` (:func:`_recovery`).  A value the part does not have is
    None.  ``unreadable``: by check (``ecc``, ``memory_repair``, ``clock_reasons``, ``temperature``, ``recovery``),
    the values printed that are no reading
    (``Volatile DRAM Uncorrectable 'NaN'``), whose checks are then not checked; empty where all read.
    """
    ecc = sec.get("ECC Errors") if isinstance(sec.get("ECC Errors"), dict) else {}
    rows = sec.get("Remapped Rows") if isinstance(sec.get("Remapped Rows"), dict) else {}
    pages = sec.get("Retired Pages") if isinstance(sec.get("Retired Pages"), dict) else {}
    reasons_sec = sec.get("Clocks Event Reasons") or sec.get("Clocks Throttle Reasons")
    counters_sec = sec.get("Clocks Event Reasons Counters") or sec.get("Clocks Throttle Reasons Counters")
    read = _Reader()
    reasons = {CLOCK_REASONS[k]: read.flag("clock_reasons", k, v) for k, v in (reasons_sec or {}).items()
               if k in CLOCK_REASONS} if isinstance(reasons_sec, dict) else {}
    counters_read = {CLOCK_COUNTERS[k]: read.number("clock_reasons", k, v, "us", 0, COUNT_MAX)
                     for k, v in counters_sec.items() if k in CLOCK_COUNTERS} if isinstance(counters_sec, dict) else {}
    counters = {k: v for k, v in counters_read.items() if v is not None}

    def page_count(key: str) -> int | None:
        v = pages.get(key)
        if isinstance(v, dict):
            return read.count("memory_repair", f"Retired Pages {key} Count", v.get("Count"))
        return read.count("memory_repair", f"Retired Pages {key}", v)

    def rows_count(key: str) -> int | None:
        return read.count("memory_repair", f"Remapped Rows {key}", rows.get(key))

    flag = read.flag
    health = {
        "ecc_volatile": _ecc_counts(ecc.get("Volatile"), read, "Volatile"),
        "ecc_aggregate": _ecc_counts(ecc.get("Aggregate"), read, "Aggregate"),
        "sram_threshold_exceeded": flag("ecc", "Aggregate SRAM Threshold Exceeded",
                                        _get(ecc, "Aggregate", "SRAM Threshold Exceeded")),
        "channel_repair_pending": flag("memory_repair", "Channel Repair Pending", ecc.get("Channel Repair Pending")),
        "tpc_repair_pending": flag("memory_repair", "TPC Repair Pending", ecc.get("TPC Repair Pending")),
        "unrepairable_memory": flag("memory_repair", "Unrepairable Memory", ecc.get("Unrepairable Memory")),
        "remapped_rows": {
            "correctable": rows_count("Correctable Error"),
            "uncorrectable": rows_count("Uncorrectable Error"),
            "pending": flag("memory_repair", "Remapped Rows Pending", rows.get("Pending")),
            "failure": flag("memory_repair", "Remapping Failure Occurred", rows.get("Remapping Failure Occurred")),
        } if rows else None,
        "retired_pages": {
            "single_bit": page_count("Single Bit ECC"),
            "double_bit": page_count("Double Bit ECC"),
            "pending": flag("memory_repair", "Pending Page Blacklist",
                            pages.get("Pending Page Blacklist", pages.get("Pending Page Retirement"))),
        } if pages else None,
        "clock_reasons": reasons,
        "clock_counters_us": counters,
        "temperature": _temperature(sec, read),
        "recovery": _recovery(sec, read),
    }
    _absent_beside_figures(health, "remapped_rows", rows, {
        "correctable": "Correctable Error", "uncorrectable": "Uncorrectable Error", "pending": "Pending",
        "failure": "Remapping Failure Occurred"}, "Remapped Rows", read)
    _absent_beside_figures(health, "retired_pages", pages, {
        "single_bit": "Single Bit ECC", "double_bit": "Double Bit ECC"}, "Retired Pages", read)
    for block, other in (("Volatile", "Aggregate"), ("Aggregate", "Volatile")):
        # One block every counter N/A beside the other's figures: its counts are unknown, never "0 uncorrectable".
        if (health[f"ecc_{block.lower()}"] is None and health[f"ecc_{other.lower()}"]
                and isinstance(ecc.get(block), dict) and ecc[block] and not read.bad.get("ecc")):
            read.bad.setdefault("ecc", []).append(f"every {block} counter 'N/A' beside the {other} figures")
    _no_repair_read(health, sec, read)
    health["unreadable"] = read.bad
    return health


def _no_repair_read(health: dict[str, Any], sec: dict[str, Any], read: _Reader) -> None:
    """A GPU that counts ECC errors repairs its bad memory by remapped rows (Ampere on) or retired pages (before):
    where nvidia-smi -q prints both blocks and neither reads a value (``Remapped Rows : N/A``, every ``Retired
    Pages`` value N/A), though the ECC counters read figures, the repairs are unknown: ``repairs_unreported`` says
    so (the memory repair line is "not checked"), never left out as if the part had none.  The driver's own print,
    not damage.  Not where NVML answers no remapped rows by design (MIG instances, a vGPU guest: the real H100 and
    H200 MIG captures print them all N/A), and not where ECC is off or the part has none (no counters)."""
    if health.get("remapped_rows") or health.get("retired_pages") or read.bad.get("memory_repair"):
        return
    if not (health.get("ecc_volatile") or health.get("ecc_aggregate")):
        return
    if "Remapped Rows" not in sec or "Retired Pages" not in sec:
        return  # an excerpt or an older driver that prints neither block: nothing printed, nothing to name
    if str(_get(sec, "MIG Mode", "Current") or "").strip() == "Enabled" or \
            str(_get(sec, "GPU Virtualization Mode", "Virtualization Mode") or "").strip().upper() == "VGPU":
        # NVML answers no remapped rows while MIG instances exist (nvmlDeviceGetRemappedRows: "not supported"), nor
        # to a vGPU guest: what the driver always prints there, which no read again changes; no line, as before.
        return
    health["repairs_unreported"] = "nvidia-smi -q prints every Remapped Rows and Retired Pages value N/A"


def _absent_beside_figures(health: dict[str, Any], part: str, section: dict[str, Any], keys: dict[str, str],
                           where: str, read: _Reader) -> None:
    """A memory repair block (``Remapped Rows``, ``Retired Pages``) whose every value printed is N/A is not reported
    (``health[part]`` None: the part has no such repair); one with N/A beside figures (``Uncorrectable Error : N/A``
    beside ``Pending : No``) is unreadable, named under ``memory_repair``: its N/A read as 0 uncorrectable rows,
    or as no repair pending, and the line passed."""
    values = health.get(part)
    if not values:
        return
    printed = [k for k, label in keys.items() if section.get(label) is not None]
    said = read.bad.get("memory_repair", [])
    # A value already named unreadable (NaN, Maybe) is not named again.
    named = {k for k in printed if any(keys[k] in b for b in said)}
    absent = [k for k in printed if values.get(k) is None and k not in named]
    if printed and len(absent) == len(printed):
        health[part] = None
    else:
        for k in absent:
            read.bad.setdefault("memory_repair", []).append(
                f"{where} {keys[k]} {str(section.get(keys[k]))[:20]!r} beside the block's figures")
