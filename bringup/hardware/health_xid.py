"""The Xid health lines: the kernel log's Xid events since boot (``kernel.xid``), one line per GPU that has any,
each Xid read with ``bringup/data/health.yaml``'s table (an Xid 45 caused by an NVLink Xid is that fault, a
Nonfatal NVLink Xid a WARN), a GPU that "has fallen off the bus" a FAIL, and a log that could not be read or no
longer holds the whole boot said so.  Cut from bringup/hardware/health.py (issue 43 item 2).
"""
from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

from ..checks import Check, line
from ..facts.pci import normalize_pci_address
from ..shipped import shipped_yaml
from .health_gpu import AREA, gpus_of, has_gpu, subject_of

__all__ = ["xid_checks", "xid_table"]


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    return shipped_yaml("health.yaml")


def xid_table() -> dict[int, dict[str, str]]:
    """Xid number → ``{kind, means}`` (``bringup/data/health.yaml``)."""
    return {int(k): v for k, v in _data()["xid"].items()}



# --------------------------------------------------------------------------------------------------
# Xid events


def _device(address: str | None) -> str:
    """A PCI device in any spelling (``00000000:3B:00.0`` of nvidia-smi, ``0000:3b:00.0`` of sysfs, ``0000:3b:00`` of
    an Xid line) as one key, the function left out (``0000:3b:00``): what the driver's Xid line names."""
    text = str(address or "").strip()
    full = normalize_pci_address(text if re.search(r"\.[0-7]$", text) else text + ".0")
    return full.rsplit(".", 1)[0] if full else text.lower()


def _smi_spelling(address: str) -> str:
    """``0000:3b:00.0`` → ``00000000:3B:00.0``: a GPU named as nvidia-smi names it, also one it no longer lists."""
    dom, bus, rest = address.split(":")
    return f"{int(dom, 16):08X}:{bus.upper()}:{rest.upper()}"


def _log_span(log: dict) -> str:
    """Which log was read and whether it still holds the whole boot: a ring buffer that wrapped starts later."""
    m = re.match(r"\[\s*([0-9]+(?:\.[0-9]+)?)\]", str(log.get("first") or ""))
    if log.get("source") != "dmesg" or m is None:
        return f"{log.get('source')}, this boot"
    start = float(m.group(1))
    return (f"{log['source']}, the whole boot" if start < 1 else
            f"{log['source']} from {start:g} s after boot: older lines rotated out of the ring buffer")


def xid_checks(facts: dict) -> list[Check]:
    """The kernel log's Xid events since boot, one line per GPU that has any; one line for a clean log, or for a
    log that could not be read (never taken for a clean one)."""
    log = facts.get("kernel.xid")
    if not has_gpu(facts) or not isinstance(log, dict):
        return []
    if not log.get("readable"):
        return [line(AREA, "Xid events", "WARN", "kernel log not read: " + str(log.get("error") or "?"),
                     "let the run read it: become root (ansible_become), or sysctl kernel.dmesg_restrict=0")]
    events = log.get("events") or []
    off_bus = [e for e in log.get("off_bus") or [] if isinstance(e, dict)]
    where = _log_span(log)
    if not events and not off_bus and log.get("whole_boot") is False:
        return [line(AREA, "Xid events", "WARN", f"none in the log read ({where}), which no longer holds the whole "
                     "boot: earlier Xids are not known", "read this boot's journal (journalctl -k -b | grep Xid), "
                     "or make it persistent (Storage=persistent in journald.conf) for the next check")]
    if not events and not off_bus:
        return [line(AREA, "Xid events", "PASS", f"none since boot ({where})")]
    table = xid_table()
    by_gpu: dict[str, list[dict]] = {}
    for e in events:
        by_gpu.setdefault(_device(e.get("pci")), []).append(e)
    gone: dict[str, list[dict]] = {}
    for e in off_bus:
        gone.setdefault(_device(e.get("pci")) if e.get("pci") else "?", []).append(e)
    # The GPU by the driver's list, else by the PCI bus (a GPU that fell off the bus is gone from nvidia-smi).
    names = {_device(d["address"]): f"GPU {_smi_spelling(d['address'])}" for d in facts.get("pci.devices") or []
             if d.get("kind") == "gpu" and normalize_pci_address(str(d.get("address") or ""))}
    names.update({_device(g.get("bus_id") or g.get("pci_address")): subject_of(g) for g in gpus_of(facts)})
    shown = f" (the newest {len(events)} of {log.get('count')})" if (log.get("count") or 0) > len(events) else ""
    out: list[Check] = []
    for bus in list(by_gpu) + [b for b in gone if b not in by_gpu]:
        evs = by_gpu.get(bus, [])
        counts: dict[tuple, int] = {}
        for e in evs:
            key = (e["xid"], e.get("caused_by"), e.get("severity") if _is_nvlink(e["xid"]) else None)
            counts[key] = counts.get(key, 0) + 1
        parts, hard, nonfatal = [], False, False
        for (xid, cause, severity), n in sorted(counts.items(), key=lambda kv: tuple(str(x) for x in kv[0])):
            known = table.get(xid)
            kind = known["kind"] if known else "unknown"
            if cause is not None:
                # Xid 45 "caused by previous Xid 149": the driver stopped the GPU's programs because of that fault;
                # it is that fault's kind (an NVLink one), not a program's.
                was = table.get(cause)
                kind = was["kind"] if was else "unknown"
                hard = hard or kind not in ("application", "unknown")
                parts.append(f"Xid {xid} ×{n} caused by previous Xid {cause}: "
                             + (f"programs' channels stopped after {was['means']}" if was else
                                "programs' channels stopped after an earlier fault")
                             + f" [{kind}]")
                continue
            if severity == "Nonfatal":
                nonfatal = True
                means = known["means"] if known else "NVLink error"
                parts.append(f"Xid {xid} ×{n}: {means}, marked Nonfatal by the driver [{kind}, nonfatal]")
                continue
            hard = hard or kind not in ("application", "unknown")
            last = next(e["text"] for e in reversed(evs) if e["xid"] == xid)
            means = known["means"] if known else f"not in bringup's table; last: {last[:80]}"
            parts.append(f"Xid {xid} ×{n}" + (f" {severity}" if severity else "") + f": {means} [{kind}]")
        if bus in gone:
            hard = True
            parts.append("the kernel says it has fallen off the bus (no Xid): " + gone[bus][0]["line"][-160:])
        seen = "; ".join(parts) + shown + f" ({where})"
        if log.get("damaged"):
            seen += f"; {log['damaged']} line(s) not valid UTF-8, kept"
        subject = names.get(bus) or (f"GPU {_smi_spelling(bus + '.0')}" if normalize_pci_address(bus + ".0") else
                                     "a GPU the kernel line does not name" if bus == "?" else f"GPU {bus}")
        if hard and bus in gone and not evs:
            out.append(line(AREA, "Xid events", "FAIL", seen, "the GPU dropped off PCIe: drain the host, check its "
                            "seating, power cables and riser (the BMC's PCIe/AER log), reboot; again after that: "
                            "replace the board", subject=subject))
        elif hard:
            out.append(line(AREA, "Xid events", "FAIL", seen, "hardware, memory or fabric fault: drain the GPU, reset "
                            "it or reboot, run dcgmi diag -r 3; again after that: replace the board", subject=subject))
        elif nonfatal:
            out.append(line(AREA, "Xid events", "WARN", seen, "NVLink errors the driver recovered from (Nonfatal): "
                            "no drain or reset needed; watch nvidia-smi nvlink -e for this GPU, and reseat or service "
                            "the link if they keep rising", subject=subject))
        else:
            out.append(line(AREA, "Xid events", "WARN", seen, "a program's fault, or one bringup does not know: look "
                            "it up in NVIDIA's Xid catalog; it does not need the hardware replaced", subject=subject))
    return out


def _is_nvlink(xid: int) -> bool:
    """The NVLink Xids of Hopper and later (144-150), whose line says Fatal or Nonfatal."""
    return 144 <= xid <= 150
