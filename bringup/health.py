"""Does the hardware work?  The rack checklist's passive health lines, from facts alone (pure).

Read in the facts' one round trip, never by running a load: each GPU's ECC counts, memory repairs (remapped
rows, retired pages, the repair flags of newer drivers), clock event reasons and temperature
(``nvidia.query``'s ``health``), its NVLink links (``nvidia.nvlink``) and NVSwitch fabric registration
(``nvidia.query``'s ``fabric_state``), the Xid events of the kernel log since boot (``kernel.xid``), and every
InfiniBand or RoCE port's state and rate (``net.infiniband``).  Each line says what was seen, the limit it was
held against, and the fix; a GPU's lines name it as their ``subject``, a port's lines the port.  What the
limits come from is in ``bringup/data/health.yaml``, with its sources.

    for c in health_checks(facts, vars): print(c.status, c.subject, c.name, c.seen)
"""
from __future__ import annotations

import re
from functools import lru_cache
from importlib import resources as ilr
from typing import Any

from .checks import Check, line, not_checked
from .facts.nvidia_health import HOLDING_REASONS
from .facts.pci import normalize_pci_address
from .nvlink import rate
from .vars import RoleVars, want

__all__ = ["FACTS", "HealthVars", "check_vars", "health_checks", "gpu_health_checks", "xid_checks", "nvlink_checks",
           "infiniband_checks", "xid_table"]

#: The facts the health lines read (the checklist gathers them with its own).
FACTS = ("nvidia.query", "nvidia.nvlink", "nvidia.topo", "kernel.xid", "net.infiniband", "pci.devices")

AREA = "health"
#: Degrees left before the GPU slows down under which an idle GPU is a cooling problem.
TEMPERATURE_MARGIN_C = 10
#: Retired pages at which NVIDIA's guidance is to replace the board (retired pages, parts before Ampere).
RETIRED_PAGES_RMA = 60


class HealthVars(RoleVars):
    """The inventory's say in the health lines (validated before anything connects)."""

    #: The rate every InfiniBand/RoCE port should run at; unset: the fastest rate a port of the host reports.
    infiniband_rate_gbps: float | None = want(None, "must be a rate in Gb/s such as 400", gt=0)
    #: Ports not cabled on purpose: an RDMA device (``mlx5_3``) or one port of it (``mlx5_3/1``).
    infiniband_ignore: list[str] = want([], "must be a list of RDMA devices or device/port (mlx5_3, mlx5_3/1)")


def check_vars(hosts) -> None:
    """Each host's health variables against :class:`HealthVars`: the first bad one is one line, before anything
    connects."""
    from .errors import InputError
    from .vars import check

    for h in hosts:
        try:
            check(HealthVars, h.vars)
        except InputError as e:
            raise InputError(f"host {h.name}: {e}") from None


@lru_cache(maxsize=1)
def _data() -> dict[str, Any]:
    import yaml

    return yaml.safe_load(ilr.files("bringup").joinpath("data/health.yaml").read_text())


def xid_table() -> dict[int, dict[str, str]]:
    """Xid number → ``{kind, means}`` (``bringup/data/health.yaml``)."""
    return {int(k): v for k, v in _data()["xid"].items()}


def _gpus(facts: dict) -> list[dict[str, Any]]:
    return [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if isinstance(g, dict)]


def _subject(g: dict[str, Any]) -> str:
    return f"GPU {g.get('bus_id') or g.get('pci_address')}"


def _has_gpu(facts: dict) -> bool:
    return bool(_gpus(facts)) or any(d.get("kind") == "gpu" for d in facts.get("pci.devices") or [])


# --------------------------------------------------------------------------------------------------
# One GPU: ECC, memory repairs, clock event reasons, temperature


def _ecc(g: dict, h: dict) -> Check:
    s = _subject(g)
    vol, agg = h.get("ecc_volatile"), h.get("ecc_aggregate")
    if vol is None and agg is None:
        if g.get("ecc_mode_current") is False:
            return line(AREA, "ECC errors", "WARN", "not counted: ECC is off",
                        "nvidia-smi -e 1 and reboot, then re-run the checklist", subject=s)
        return line(AREA, "ECC errors", "PASS", "no ECC on this part", subject=s)
    vol, agg = vol or {}, agg or {}

    def split(c: dict) -> str:
        parts = [f"{k.split('_')[0].upper()} {c[k]}" for k in ("sram_uncorrectable", "dram_uncorrectable") if c.get(k)]
        return f"{c.get('uncorrectable', 0)} uncorrectable" + (f" ({', '.join(parts)})" if parts else "")

    seen = f"since boot {split(vol)}, {vol.get('correctable', 0)} corrected; lifetime {split(agg)}"
    if vol.get("uncorrectable"):
        return line(AREA, "ECC errors", "FAIL", seen + "; limit 0 uncorrectable",
                    "drain the GPU, reset it (nvidia-smi -r) and run dcgmi diag -r 3; errors again: replace the board",
                    subject=s)
    if h.get("sram_threshold_exceeded"):
        return line(AREA, "ECC errors", "FAIL", seen + "; SRAM error threshold exceeded",
                    "replace the board (NVIDIA: SRAM threshold exceeded means RMA)", subject=s)
    if agg.get("uncorrectable"):
        return line(AREA, "ECC errors", "WARN", seen + "; none since boot",
                    "a used board: check its remapped rows and run dcgmi diag -r 3 before service", subject=s)
    return line(AREA, "ECC errors", "PASS", seen, subject=s)


def _memory_repair(g: dict, h: dict) -> Check | None:
    """Remapped rows, retired pages and the repair flags: what the board did with its bad memory."""
    s = _subject(g)
    rows, pages = h.get("remapped_rows"), h.get("retired_pages")
    seen: list[str] = []
    replace: list[str] = []  # spare memory used up: the board goes back
    reset: list[str] = []    # a repair waits for a GPU reset or a reboot
    watch: list[str] = []
    if rows:
        seen.append(f"remapped rows: {rows.get('uncorrectable') or 0} uncorrectable, {rows.get('correctable') or 0} "
                    "correctable")
        if rows.get("failure"):
            replace.append("a row remapping failed")
        if rows.get("pending"):
            reset.append("a row remapping is pending a GPU reset")
    if pages and (pages.get("single_bit") is not None or pages.get("double_bit") is not None):
        total = (pages.get("single_bit") or 0) + (pages.get("double_bit") or 0)
        seen.append(f"retired pages: {pages.get('double_bit') or 0} double-bit, {pages.get('single_bit') or 0} "
                    "single-bit")
        if pages.get("pending"):
            reset.append("a page retirement is pending a reboot")
        if total >= RETIRED_PAGES_RMA:
            replace.append(f"{total} pages retired (NVIDIA: replace at {RETIRED_PAGES_RMA})")
        elif total:
            watch.append(f"{total} page(s) retired")
    if h.get("unrepairable_memory"):
        replace.append("unrepairable memory")
    reset += [words for key, words in (("channel_repair_pending", "a channel repair is pending a GPU reset"),
                                        ("tpc_repair_pending", "a TPC repair is pending a GPU reset")) if h.get(key)]
    if not seen and not (replace or reset):
        return None
    text = "; ".join(seen + replace + reset + watch)
    if replace:
        return line(AREA, "memory repair", "FAIL", text, "replace the board: its spare memory is used up", subject=s)
    if reset:
        return line(AREA, "memory repair", "FAIL", text,
                    "drain the GPU and reset it (nvidia-smi -r -i <index>) or reboot, then re-run the checklist",
                    subject=s)
    if watch:
        return line(AREA, "memory repair", "WARN", text, "watch it: more retirements mean a failing board", subject=s)
    return line(AREA, "memory repair", "PASS", text, subject=s)


_COUNTED = {"hw_thermal_slowdown": "HW thermal slowdown", "hw_power_brake": "HW power brake",
            "sw_thermal_slowdown": "SW thermal slowdown"}


def _clocks(g: dict, h: dict) -> Check | None:
    s = _subject(g)
    reasons, counters = h.get("clock_reasons") or {}, h.get("clock_counters_us") or {}
    if not reasons:
        return None
    active = [name for key, name in HOLDING_REASONS.items() if reasons.get(key)]
    since = [f"{name} {counters[key] / 1e6:g} s" for key, name in _COUNTED.items() if counters.get(key)]
    tail = ("; since the driver loaded: " + ", ".join(since)) if since else ""
    if active:
        return line(AREA, "clock event reasons", "FAIL", "active now: " + ", ".join(active) + tail,
                    "check the GPU's cooling and power (fans, airflow, PSU, power brake cable); "
                    "nvidia-smi -q -d PERFORMANCE", subject=s)
    if reasons.get("sw_power_cap"):
        return _power_cap(g, s, tail)
    if since:
        return line(AREA, "clock event reasons", "WARN", "none active now" + tail,
                    "the GPU slowed down for heat or power since the driver loaded: check cooling and power",
                    subject=s)
    return line(AREA, "clock event reasons", "PASS",
                "none holding the clocks" + (" (idle)" if reasons.get("idle") else ""), subject=s)


#: Below this share of its power limit a GPU is not held by it: an idle board (P8) that still shows SW Power Cap.
IDLE_POWER_SHARE = 0.5


def _watts(value) -> float | None:
    """A power reading as a finite, positive number of watts; None for anything else (N/A, text, NaN, absurd)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if 0 < value < 100_000 else None


def _power_cap(g: dict, s: str, tail: str) -> Check:
    """SW Power Cap flagged: the fix follows what the readings show.  A limit below the board's default is raised;
    an idle GPU far below a limit already at its default is not held by it (drivers flag the cap at low P-states);
    a GPU at a default limit under load is power bound, and raising a limit it already has fixes nothing."""
    draw, limit = _watts(g.get("power_draw_w")), _watts(g.get("power_limit_w"))
    default, top = _watts(g.get("default_power_limit_w")), _watts(g.get("max_power_limit_w"))
    seen = "active now: SW power cap" + (f" ({draw:g} W drawn of a {limit:g} W limit" if draw and limit else "")
    if draw and limit:
        seen += (f", the board's default" if default and limit >= default else
                 f", below the board's default {default:g} W" if default else "") + ")"
    seen += tail
    if limit and default and limit < default:
        return line(AREA, "clock event reasons", "WARN", seen, f"the power limit was lowered: raise it to the "
                    f"board's default (nvidia-smi -pl {default:g}) or check what lowered it (a BMC or a script)",
                    subject=s)
    if draw is not None and limit and draw < limit * IDLE_POWER_SHARE and default and limit >= default:
        return line(AREA, "clock event reasons", "PASS", seen + f"; idle{' in ' + g['performance_state'] if g.get('performance_state') else ''}, "
                    "far below its limit: the cap holds nothing now", subject=s)
    if draw is not None and limit and default and limit >= default:
        more = (f"; the board allows up to {top:g} W (nvidia-smi -pl), if the power supply and cooling do"
                if top and top > limit else "; the limit is already the board's maximum")
        return line(AREA, "clock event reasons", "WARN", seen, "the GPU runs at its power budget under this load"
                    + more, subject=s)
    return line(AREA, "clock event reasons", "WARN", seen,
                f"the power limit holds the clocks (power limit {g.get('power_limit_w')} W): compare it with the "
                "board's default (nvidia-smi -q -d POWER) and raise it there if it was lowered", subject=s)


def _temperature(g: dict, h: dict) -> Check | None:
    s = _subject(g)
    t = h.get("temperature") or {}
    margin, now = t.get("slowdown_margin_c"), t.get("gpu_c")
    if margin is None:
        return None
    seen = (f"{now} °C, " if now is not None else "") + f"{margin} °C below the slowdown limit"
    limit = f" (limit: at least {TEMPERATURE_MARGIN_C} °C)"
    if margin <= 0:
        return line(AREA, "temperature", "FAIL", seen + limit, "the GPU is at its slowdown temperature: fix the "
                    "cooling (fans, airflow, blanking panels, inlet temperature)", subject=s)
    if margin < TEMPERATURE_MARGIN_C:
        return line(AREA, "temperature", "WARN", seen + limit, "little headroom before the GPU slows down: check "
                    "the cooling and re-check under load (invoke accept)", subject=s)
    return line(AREA, "temperature", "PASS", seen, subject=s)


def _fabric(g: dict) -> Check | None:
    state, status, health = g.get("fabric_state"), g.get("fabric_status"), g.get("fabric_health")
    if state is None:
        return None  # a part without an NVSwitch fabric
    seen = f"fabric state {state}, status {status}" + (f", health {health}" if health else "")
    if state == "Completed" and status == "Success" and health in (None, "Healthy"):
        return line(AREA, "NVSwitch fabric", "PASS", seen, subject=_subject(g))
    if state == "Completed" and status == "Success":
        return line(AREA, "NVSwitch fabric", "FAIL", seen + " (want Healthy)",
                    "the fabric came up degraded: nvidia-smi -q -d FABRIC names what (bandwidth, routes); check "
                    "nvidia-fabricmanager's log and the NVSwitch trays", subject=_subject(g))
    # The fix follows the state seen: Completed with an error means Fabric Manager ran and answered.
    vm = str(g.get("virtualization_mode") or "").lower() == "pass-through"
    where = ("the hypervisor host's Fabric Manager (this VM does not run it): ask its operator to check "
             "nvidia-fabricmanager there" if vm else None)
    if state == "Completed":
        fix = (f"registration finished with an error ({status}): Fabric Manager ran; "
               + (where or "its log (/var/log/fabricmanager.log) and nvidia-smi -q -d FABRIC say why (a GPU or "
                  "NVSwitch missing from the fabric, or too few resources for its partition)")
               + "; reset the GPU or reboot once that is fixed")
    elif state == "In Progress":
        fix = ("registration started but did not finish: " + (where or "Fabric Manager is running or stopped midway: "
               "give it a minute, else journalctl -u nvidia-fabricmanager says why") + "; CUDA does not start until "
               "the fabric is up")
    else:
        fix = ((where or "Fabric Manager has not registered the GPU: start nvidia-fabricmanager at the driver's exact "
                "version (provision --roles nvidia_driver installs it on NVSwitch boards; systemctl status "
                "nvidia-fabricmanager)") + "; CUDA does not start until the fabric is up")
    return line(AREA, "NVSwitch fabric", "FAIL", seen + " (want Completed, Success)", fix, subject=_subject(g))


def gpu_health_checks(facts: dict) -> list[Check]:
    """Each GPU's ECC, memory repair, clock event reasons, temperature and fabric lines."""
    out: list[Check] = []
    for g in _gpus(facts):
        h = g.get("health") or {}
        out.append(_ecc(g, h))
        out += [c for c in (_memory_repair(g, h), _clocks(g, h), _temperature(g, h), _fabric(g)) if c is not None]
    return out


# --------------------------------------------------------------------------------------------------
# NVLink


def nvlink_checks(facts: dict) -> list[Check]:
    """Every GPU's NVLink links up, at the part's speed, as many as its peers have.

    The speed a part runs its links at is :func:`bringup.nvlink.rate`'s (by product, else architecture); a part
    not listed is held against the fastest link of the host.  GPUs without NVLink (no link lines) get no line; a
    single GPU with every link inactive has no NVLink peer (a VM given one GPU of a board): said, not failed.
    """
    links = facts.get("nvidia.nvlink") or []
    by_uuid = {g.get("uuid"): g for g in _gpus(facts)}
    with_links = [n for n in links if n.get("links") or n.get("all_inactive")]
    if not with_links:
        shown = _topology_nvlink(facts)
        if shown and isinstance(links, list) and not links:
            # nvlink -s printed nothing, yet nvidia-smi topo -m shows GPUs joined by NVLink: the output was lost.
            return [line(AREA, "NVLink", "WARN", f"not checked: nvidia.nvlink unreadable (nvidia-smi nvlink -s "
                         f"printed nothing, but nvidia-smi topo -m shows NVLink: {shown})",
                         "read the host again (nvidia-smi nvlink -s on it); the line of fact nvidia.nvlink says "
                         "what its command printed")]
        return []
    fastest = max((l["gbps"] for n in with_links for l in n["links"] if l.get("gbps")), default=None)
    most_up = max(sum(1 for l in n["links"] if l.get("active")) for n in with_links)
    board = any(g.get("fabric_state") is not None for g in by_uuid.values())
    out: list[Check] = []
    for n in with_links:
        g = by_uuid.get(n.get("uuid")) or {}
        subject = _subject(g) if g else f"GPU {n.get('index')}"
        up = [l for l in n["links"] if l.get("active")]
        down = [l["link"] for l in n["links"] if not l.get("active")]
        part = rate(g.get("product_name") or n.get("name"), g.get("product_architecture"))
        want = part.printed if part else fastest
        slow = [f"link {l['link']} {l['gbps']:g}" for l in up if want and l["gbps"] < want * 0.99]
        seen = f"{len(up)} of {len(n['links'])} links up" + (f" at {up[0]['gbps']:g} GB/s" if up and not slow else "")
        inactive = (f"every link inactive ({len(down)})" if down else
                    "every link inactive (NVML: all links are inActive)")
        if not up and len(with_links) == 1 and not board:
            out.append(line(AREA, "NVLink", "PASS", f"{len(down) or 'all'} links inactive: no NVLink peer on this "
                            "host (one GPU)", subject=subject))
        elif not up and most_up:
            # Its peers' links are up: this GPU alone dropped out of NVLink, whatever the board.
            out.append(line(AREA, "NVLink", "FAIL", f"{inactive}; its peers have {most_up} up",
                            "reset the GPU (nvidia-smi -r) or reboot; nvidia-smi nvlink -e and the kernel log's Xids "
                            "name the fault; again after that: reseat the GPU/baseboard or the bridge",
                            subject=subject))
        elif not up:
            out.append(line(AREA, "NVLink", "FAIL" if board else "WARN",
                            inactive + ("" if board else "; the GPUs talk over PCIe"),
                            "NVSwitch board: check nvidia-fabricmanager and the baseboard; else fit the NVLink bridges"
                            if board else "fit the NVLink bridges, or accept PCIe between the GPUs", subject=subject))
        elif len(up) < most_up:
            out.append(line(AREA, "NVLink", "FAIL", seen + f"; its peers have {most_up} up; down: "
                            + ", ".join(map(str, down)), "reseat the GPU/baseboard or the bridge; "
                            "nvidia-smi nvlink -e shows the link's errors", subject=subject))
        elif slow:
            out.append(line(AREA, "NVLink", "WARN", seen + "; slower than " + f"{want:g} GB/s: " + ", ".join(slow),
                            "a link trained below its speed: reseat, and check nvidia-smi nvlink -e", subject=subject))
        else:
            out.append(line(AREA, "NVLink", "PASS", seen + (f" (the part's {want:g})" if want else ""),
                            subject=subject))
    return out


def _topology_nvlink(facts: dict) -> str | None:
    """``GPU0-GPU1 NV18, ...`` where ``nvidia-smi topo -m`` (``nvidia.topo``) joins GPUs by NVLink; None: it shows
    none, or was not read."""
    topo = facts.get("nvidia.topo")
    matrix = topo.get("matrix") if isinstance(topo, dict) else None
    if not isinstance(matrix, dict):
        return None
    pairs = sorted({f"{a}-{b} {v}" for a, row in matrix.items() if isinstance(row, dict) and str(a).startswith("GPU")
                    for b, v in row.items() if str(b).startswith("GPU") and str(a) < str(b)
                    and re.fullmatch(r"NV\d+", str(v))})
    return (", ".join(pairs[:3]) + (f" and {len(pairs) - 3} more" if len(pairs) > 3 else "")) if pairs else None


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
    m = re.match(r"\[\s*(\d+(?:\.\d+)?)\]", str(log.get("first") or ""))
    if log.get("source") != "dmesg" or m is None:
        return f"{log.get('source')}, this boot"
    start = float(m.group(1))
    return (f"{log['source']}, the whole boot" if start < 1 else
            f"{log['source']} from {start:g} s after boot: older lines rotated out of the ring buffer")


def xid_checks(facts: dict) -> list[Check]:
    """The kernel log's Xid events since boot, one line per GPU that has any; one line for a clean log, or for a
    log that could not be read (never taken for a clean one)."""
    log = facts.get("kernel.xid")
    if not _has_gpu(facts) or not isinstance(log, dict):
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
    names.update({_device(g.get("bus_id") or g.get("pci_address")): _subject(g) for g in _gpus(facts)})
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


# --------------------------------------------------------------------------------------------------
# InfiniBand and RoCE


def infiniband_checks(facts: dict, vars: dict) -> list[Check]:
    """Each RDMA port ACTIVE, LinkUp, at the expected rate (``infiniband_rate_gbps``, else the fastest rate a port
    of the same link layer and adapter model reports on the host); ports listed in ``infiniband_ignore`` are left out, said once."""
    ports = [p for p in facts.get("net.infiniband") or [] if isinstance(p, dict)]
    ignore = set(vars.get("infiniband_ignore") or [])
    kept = [p for p in ports if p["device"] not in ignore and f"{p['device']}/{p['port']}" not in ignore]
    out: list[Check] = []
    if len(kept) < len(ports):
        out.append(line(AREA, "RDMA ports ignored", "PASS",
                        ", ".join(f"{p['device']}/{p['port']}" for p in ports if p not in kept)
                        + " (infiniband_ignore)"))
    pinned = vars.get("infiniband_rate_gbps")
    for p in kept:
        subject = f"{p['device']} port {p['port']}"
        kind = "RoCE port" if p.get("link_layer") == "Ethernet" else "InfiniBand port"
        if p.get("refused"):
            out.append(line(AREA, kind, "FAIL", p["refused"],
                            f"read /sys/class/infiniband/{p['device']}/ports/{p['port']}/ on the host", subject=subject))
            continue
        # Held against its own kind: a host's compute fabric (ConnectX-7 at 400) and front-end ports (ConnectX-6 Dx
        # at 100) run at different rates by design.
        same = [q["rate_gbps"] for q in kept if not q.get("refused") and q.get("state") == "ACTIVE"
                and (q.get("link_layer"), q.get("hca_type")) == (p.get("link_layer"), p.get("hca_type"))]
        want = float(pinned) if pinned else max(same, default=None)
        src = "infiniband_rate_gbps" if pinned else (
            f"the fastest {p['hca_type']} port of this host" if p.get("hca_type") else "the fastest port of this host")
        seen = f"{p['state']}, {p['phys_state']}, {p['rate']}"
        if p["state"] != "ACTIVE" or p["phys_state"] != "LinkUp":
            fix = ("cable it and check the switch port" if p["phys_state"] in ("Disabled", "Polling", "Sleep")
                   else "start a subnet manager (opensm, or the switch's)" if p["state"] in ("INIT", "ARMED")
                   else "check the cable, the switch port and the subnet manager")
            out.append(line(AREA, kind, "FAIL", seen + " (want ACTIVE, LinkUp)",
                            fix + f"; a port left unused on purpose: add {p['device']}/{p['port']} to infiniband_ignore",
                            subject=subject))
        elif want and p["rate_gbps"] < want:
            out.append(line(AREA, kind, "FAIL", seen + f"; expected {want:g} Gb/s ({src})",
                            "a link below its rate: reseat or replace the cable/transceiver, check the switch port's "
                            "speed and width", subject=subject, value=p["rate_gbps"], limit=want, unit="Gb/s"))
        else:
            out.append(line(AREA, kind, "PASS", seen, subject=subject, value=p["rate_gbps"], limit=want,
                            unit="Gb/s"))
    return out


#: Each group of health lines, the facts it reads, and the one line it gives when one of them could not be read.
_NEEDS = (("GPU health (ECC, memory repair, clocks, temperature, fabric)", ("nvidia.query",)),
          ("NVLink", ("nvidia.nvlink", "nvidia.query")),
          ("Xid events", ("kernel.xid",)),
          ("RDMA ports", ("net.infiniband",)))


def health_checks(facts: dict, vars: dict, fact_errors: dict | None = None) -> list[Check]:
    """Every passive health line for one host (:data:`FACTS`): GPUs, NVLink, Xid events, RDMA ports.  A group whose
    fact could not be read (``fact_errors``) is one "not checked" line, never a PASS or a verdict on the hardware
    from what the fact lacks."""
    groups = (lambda: gpu_health_checks(facts), lambda: nvlink_checks(facts), lambda: xid_checks(facts),
              lambda: infiniband_checks(facts, vars))
    out: list[Check] = []
    for (name, needs), lines in zip(_NEEDS, groups):
        unread = not_checked(AREA, name, needs, fact_errors)
        out += [unread] if unread is not None else lines()
    return out
