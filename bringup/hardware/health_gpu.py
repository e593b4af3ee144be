"""The health lines of the GPUs themselves, from ``nvidia-smi -q`` (``nvidia.query``) and ``nvidia-smi nvlink -s``
(``nvidia.nvlink``): each GPU's ECC, memory repairs, clock event reasons, power cap, temperature and NVSwitch fabric
registration, and every GPU's NVLink links.  Cut from bringup/hardware/health.py (issue 43 item 2), which gathers every
health group of a host; the limits' sources are in its docstring.
"""
from __future__ import annotations

import re
from typing import Any

from ..checks import Check, line
from ..facts.nvidia_health import HOLDING_REASONS
from .gpu import UNREACHABLE_FIX, nvswitch_evidence, unanswered_gpus
from .nvlink import link_count, rate

__all__ = ["AREA", "gpu_health_checks", "nvlink_checks", "gpus_of", "subject_of", "has_gpu"]

AREA = "health"
#: Degrees left before the GPU slows down under which an idle GPU is a cooling problem.
TEMPERATURE_MARGIN_C = 10
#: Retired pages at which NVIDIA's guidance is to replace the board (retired pages, parts before Ampere).
RETIRED_PAGES_RMA = 60


def gpus_of(facts: dict) -> list[dict[str, Any]]:
    return [g for g in (facts.get("nvidia.query") or {}).get("gpus") or [] if isinstance(g, dict)]


def subject_of(g: dict[str, Any]) -> str:
    return f"GPU {g.get('bus_id') or g.get('pci_address')}"


def has_gpu(facts: dict) -> bool:
    return bool(gpus_of(facts)) or any(d.get("kind") == "gpu" for d in facts.get("pci.devices") or [])



# --------------------------------------------------------------------------------------------------
# One GPU: ECC, memory repairs, clock event reasons, temperature


def _unreadable(g: dict, h: dict, group: str, name: str) -> Check | None:
    """The check's WARN "not checked" where ``nvidia-smi -q`` printed one of its values as no reading (``NaN``,
    ``-1``, ``Maybe``, a key twice): named, never read as 0 or No (``health.unreadable``)."""
    bad = (h.get("unreadable") or {}).get(group)
    if not bad:
        return None
    return line(AREA, name, "WARN", "not checked: nvidia.query unreadable: " + ", ".join(bad[:3])
                + (f" and {len(bad) - 3} more" if len(bad) > 3 else ""),
                "read the host again (nvidia-smi -q on it); a value that stays unreadable: update the driver, and "
                "nvidia-smi -q -d ECC,PAGE_RETIREMENT,ROW_REMAPPER,TEMPERATURE,PERFORMANCE shows it",
                subject=subject_of(g))


def _ecc(g: dict, h: dict) -> Check:
    s = subject_of(g)
    damaged = _unreadable(g, h, "ecc", "ECC errors")
    if damaged:
        return damaged
    vol, agg = h.get("ecc_volatile"), h.get("ecc_aggregate")
    if vol is None and agg is None:
        mode = g.get("ecc_mode_current")
        named = g.get("settings_unreadable") if isinstance(g.get("settings_unreadable"), dict) else {}
        if named.get("ecc") or mode not in (None, True, False):
            # No counts, and no telling whether the part has ECC: never "no ECC on this part".
            seen = ", ".join(str(b) for b in named.get("ecc") or []) or f"ecc_mode_current {mode!r}"[:80]
            return line(AREA, "ECC errors", "WARN", f"not checked: nvidia.query unreadable: {seen}",
                        "read the host again (nvidia-smi -q -d ECC on it); a value that stays unreadable: update "
                        "the driver", subject=s)
        if mode is False:
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
    s = subject_of(g)
    damaged = _unreadable(g, h, "memory_repair", "memory repair")
    if damaged:
        return damaged
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
        if h.get("repairs_unreported"):
            # ECC counts errors but no repair is reported: not checked, said (it was left out, as if none).
            return line(AREA, "memory repair", "WARN", f"not checked: {h['repairs_unreported']}, though it counts "
                        "ECC errors", "nvidia-smi -q -d ROW_REMAPPER,PAGE_RETIREMENT on the host; where they stay "
                        "N/A, dcgmi diag -r 3 tests the memory", subject=s)
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
    s = subject_of(g)
    damaged = _unreadable(g, h, "clock_reasons", "clock event reasons")
    if damaged:
        return damaged
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
    """SW Power Cap flagged: the fix follows what the readings show, in this order.  A limit below the board's
    default (both read) is raised.  Otherwise a GPU drawing less than :data:`IDLE_POWER_SHARE` of its limit is idle
    and not held by the cap (drivers flag it at low P-states): PASS, whatever the default reads (N/A on some boards).
    A GPU at or above its default limit under load is power bound, and raising a limit it already has fixes
    nothing.  Any reading missing or unreadable (draw, limit, default): WARN, compare the limit with the default."""
    raw_draw = g.get("power_draw_w")
    # A draw of 0.00 W is a reading (an idle board, some VMs): the least it can be, never "no reading".
    draw = 0.0 if isinstance(raw_draw, (int, float)) and not isinstance(raw_draw, bool) and raw_draw == 0 \
        else _watts(raw_draw)
    limit = _watts(g.get("power_limit_w"))
    default, top = _watts(g.get("default_power_limit_w")), _watts(g.get("max_power_limit_w"))
    seen = "active now: SW power cap" + (f" ({draw:g} W drawn of a {limit:g} W limit" if draw is not None and limit
                                         else "")
    if draw is not None and limit:
        seen += (f", the board's default" if default and limit >= default else
                 f", below the board's default {default:g} W" if default else "") + ")"
    seen += tail
    if limit and default and limit < default:
        return line(AREA, "clock event reasons", "WARN", seen, f"the power limit was lowered: raise it to the "
                    f"board's default (nvidia-smi -pl {default:g}) or check what lowered it (a BMC or a script)",
                    subject=s)
    # Idle far below its limit: the cap holds nothing now, whatever the default reads (N/A on some boards); a limit
    # below a known default was said above.
    if draw is not None and limit and draw < limit * IDLE_POWER_SHARE:
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
    s = subject_of(g)
    damaged = _unreadable(g, h, "temperature", "temperature")
    if damaged:
        return damaged
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
        return line(AREA, "NVSwitch fabric", "PASS", seen, subject=subject_of(g))
    if state == "Completed" and status == "Success":
        return line(AREA, "NVSwitch fabric", "FAIL", seen + " (want Healthy)",
                    "the fabric came up degraded: nvidia-smi -q -d FABRIC names what (bandwidth, routes); check "
                    "nvidia-fabricmanager's log and the NVSwitch trays", subject=subject_of(g))
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
    return line(AREA, "NVSwitch fabric", "FAIL", seen + " (want Completed, Success)", fix, subject=subject_of(g))


#: What each ``GPU Recovery Action`` asks (NVIDIA's "Error Recovery and Response Flags").
RECOVERY_FIX = {
    "Reset": "stop the GPU's processes and reset it (nvidia-smi -r -i {bus}); it can be used again after",
    "Reboot": "reboot the node: the fault may have left the OS inconsistent",
    "Drain P2P": "stop the work using peer-to-peer with this GPU (drain it) before new work starts",
    "Drain and Reset": "drain the GPU's peer-to-peer work, then reset it (nvidia-smi -r -i {bus})",
}


def _recovery(g: dict, h: dict) -> Check | None:
    """What the driver asks be done before the GPU is used again (``GPU Recovery Action``; ``Reset Required`` and
    ``Drain and Reset Recommended`` before driver 570): a FAIL naming it; no line where it asks nothing (a PASS on
    every GPU of every host would say only what the other lines say)."""
    damaged = _unreadable(g, h, "recovery", "GPU recovery")
    if damaged:
        return damaged
    rec = h.get("recovery") or {}
    action = rec.get("action")
    if action and action != "None":
        return line(AREA, "GPU recovery", "FAIL", f"GPU Recovery Action {action}: the driver asks it before the "
                    "GPU is used again", RECOVERY_FIX[action].format(bus=g.get("bus_id")), subject=subject_of(g))
    if rec.get("reset_required") or rec.get("drain_and_reset"):
        said = ", ".join(k for k, v in (("Reset Required Yes", rec.get("reset_required")),
                                        ("Drain and Reset Recommended Yes", rec.get("drain_and_reset"))) if v)
        return line(AREA, "GPU recovery", "FAIL", f"{said}: the GPU needs a reset before it is used again",
                    ("drain its work, " if rec.get("drain_and_reset") else "stop its processes, ") + "then reset it "
                    f"(nvidia-smi -r -i {g.get('bus_id')}); still asked after that: reboot, then check dmesg for its "
                    "Xid", subject=subject_of(g))
    return None


#: What licenses a vGPU guest (NVIDIA's Virtual GPU Client Licensing User Guide): the token, gridd.conf, nvidia-gridd.
LICENSE_FIX = ("license the VM: the client configuration token in /etc/nvidia/ClientConfigToken/, FeatureType in "
               "/etc/nvidia/gridd.conf, then systemctl restart nvidia-gridd (journalctl -u nvidia-gridd says why it "
               "failed)")


#: A licence the driver holds: bare, or with its expiry as nvidia-smi prints it (``Licensed (Expiry: 2023-8-29 0:0:0
#: GMT)``, ``N/A`` for a perpetual one); anything else beside ``Licensed`` is no status the driver prints.
_LICENSED = re.compile(r"Licensed(?: \(Expiry: (?:N/A|[0-9]{4}-[0-9]{1,2}-[0-9]{1,2} [0-9]{1,2}:[0-9]{1,2}:[0-9]{1,2}"
                       r"(?: GMT)?)\))?")


def _vgpu_license(g: dict) -> Check | None:
    """A licence the guest driver (NVIDIA vGPU software) reports (``nvidia-smi -q``'s vGPU Software Licensed Product):
    ``Licensed (Expiry: ...)`` PASS; ``Unlicensed (Unrestricted)`` (the 20-minute grace period after boot) WARN;
    ``Unlicensed`` or ``Unlicensed (Restricted)`` in a vGPU guest (Virtualization Mode ``VGPU``) FAIL: compute runs at
    an idle level (CUDA fails, ``operation not supported``) until it holds one; the same on a pass-through GPU whose
    guest driver asks for a licence WARN (its features are restricted, its compute is not said to be).  None where
    the driver asks none (bare metal, a pass-through GPU with the data-center driver: no status printed)."""
    status, mode = g.get("vgpu_license"), str(g.get("virtualization_mode") or "")
    vgpu = mode.upper() == "VGPU"
    if status is None and not vgpu:
        return None
    s = subject_of(g)
    if not isinstance(status, str):
        return line(AREA, "vGPU license", "WARN", "not checked: a vGPU guest (Virtualization Mode VGPU) whose "
                    "nvidia-smi -q shows no License Status (unreadable)", "nvidia-smi -q on the host shows it under "
                    "vGPU Software Licensed Product; " + LICENSE_FIX, subject=s)
    seen = f"License Status {status[:80]}"
    if _LICENSED.fullmatch(status):
        return line(AREA, "vGPU license", "PASS", seen, subject=s)
    if status == "Unlicensed (Unrestricted)":
        return line(AREA, "vGPU license", "WARN", seen + ": in its grace period, compute drops to an idle level "
                    "when it ends", LICENSE_FIX, subject=s)
    if status in ("Unlicensed", "Unlicensed (Restricted)"):
        if not vgpu:
            return line(AREA, "vGPU license", "WARN", f"{seen} on a GPU in {mode[:40] or 'no'} virtualization mode: "
                        "its guest driver (NVIDIA vGPU software) restricts its features until it holds a licence",
                        LICENSE_FIX, subject=s)
        return line(AREA, "vGPU license", "FAIL", seen + ": compute restricted to an idle level (CUDA fails)",
                    LICENSE_FIX, subject=s)
    return line(AREA, "vGPU license", "WARN", f"not checked: {seen} is no status the driver prints (unreadable)",
                LICENSE_FIX, subject=s)


def gpu_health_checks(facts: dict) -> list[Check]:
    """Each GPU's ECC, memory repair, clock event reasons, temperature, fabric, recovery and vGPU license lines."""
    out: list[Check] = []
    for g in gpus_of(facts):
        h = g.get("health") or {}
        out.append(_ecc(g, h))
        out += [c for c in (_memory_repair(g, h), _clocks(g, h), _temperature(g, h), _fabric(g), _recovery(g, h),
                            _vgpu_license(g)) if c is not None]
    # A GPU nvidia-smi cannot reach has no values to judge: said, never left out.
    unanswered = unanswered_gpus(facts)
    out += [line(AREA, "health (ECC, memory repair, clocks, temperature)", "WARN", seen, UNREACHABLE_FIX,
                 subject=subject) for subject, seen in unanswered]
    # A GPU nvidia-smi --query-gpu lists that -q (which gave the health values) does not: the two forms disagree (one
    # cut, or the GPU dropped between them); its health was never read, and its lines were left out unsaid.
    listed = {g.get("pci_address") for g in gpus_of(facts)}
    if listed:
        said = {subject for subject, _ in unanswered}
        # Named as its other lines name a GPU: nvidia-smi's own bus id (00000000:18:00.0) where the query gave it.
        other = {g.get("pci_address"): f"GPU {g.get('pci_bus_id') or g.get('pci_address')}"
                 for g in facts.get("nvidia.smi") or [] if isinstance(g, dict)}
        out += [line(AREA, "health (ECC, memory repair, clocks, temperature)", "WARN",
                     f"not checked: nvidia-smi -q lists no {other[a]}, though nvidia-smi --query-gpu does (the two "
                     "disagree: an output cut short, or the GPU dropped between them)",
                     "read the host again; a GPU that comes and goes: dmesg shows its Xid/NVRM errors",
                     subject=other[a])
                for a in sorted(x for x in other.keys() - listed if isinstance(x, str))
                if other[a] not in said and f"GPU {a}" not in said]
    return out


# --------------------------------------------------------------------------------------------------
# NVLink


def nvlink_checks(facts: dict) -> list[Check]:
    """Every GPU's NVLink links up, at the part's speed, as many as its peers have.

    The speed a part runs its links at is :func:`bringup.hardware.nvlink.rate`'s (by product, else architecture); a part
    not listed is held against the fastest link of the host.  GPUs without NVLink (no link lines) get no line; on a
    mixed host, a GPU with no link line whose part no GPU with links is gets a PASS "no NVLink" naming it; one that
    the other facts list but nvlink -s does not, or a part whose peers have links that prints none, is "not
    checked", named; a single GPU with every link inactive has no NVLink peer (a VM given one GPU of a board): said,
    not failed.
    """
    links = facts.get("nvidia.nvlink") or []
    by_uuid = {g.get("uuid"): g for g in gpus_of(facts)}
    with_links = [n for n in links if n.get("links") or n.get("all_inactive")]
    board = nvswitch_evidence(facts)
    if not with_links and board:
        # An NVSwitch board's GPU of a part whose links nvidia-smi prints, listed with no link line (a lone GPU of the
        # board in a VM, its output cut after the GPU line): not checked, never left out as a part without NVLink.
        bare = [(n, by_uuid.get(n.get("uuid")) or {}) for n in links if isinstance(n, dict)]
        cut = [(n, g, count) for n, g in bare
               if (count := link_count(g.get("product_name") or n.get("name"), g.get("product_architecture")))]
        if cut:
            return [line(AREA, "NVLink", "WARN", f"not checked: nvidia-smi nvlink -s printed no link line for this "
                         f"{n.get('name') or g.get('product_name')}, which has {count}, on an NVSwitch board ({board}) "
                         "(output cut short?) (unreadable)", "read the host again (nvidia-smi nvlink -s on it)",
                         subject=subject_of(g) if g else f"GPU {n.get('index')}") for n, g, count in cut]
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
    # board: a fabric state on a GPU, or NVSwitches on the PCI bus (boards before Hopper, the DGX A100's A100-SXM among
    # them, print Fabric State N/A, so the bus is their only sign).
    out: list[Check] = []
    for n in with_links:
        g = by_uuid.get(n.get("uuid")) or {}
        subject = subject_of(g) if g else f"GPU {n.get('index')}"
        up = [l for l in n["links"] if l.get("active")]
        down = [l["link"] for l in n["links"] if not l.get("active")]
        part = rate(g.get("product_name") or n.get("name"), g.get("product_architecture"))
        want = part.printed if part else fastest
        slow = [f"link {l['link']} {l['gbps']:g}" for l in up if want and l["gbps"] < want * 0.99]
        seen = f"{len(up)} of {len(n['links'])} links up" + (f" at {up[0]['gbps']:g} GB/s" if up and not slow else "")
        inactive = (f"every link inactive ({len(down)})" if down else
                    "every link inactive (NVML: all links are inActive)")
        count = link_count(g.get("product_name") or n.get("name"), g.get("product_architecture"))
        if count and n["links"] and len(n["links"]) < count:
            # nvidia-smi prints every link of the part, an inactive one too: fewer lines is an output cut at a line's
            # end (a lone GPU has no peer to be held against: 10 of its 18 lines read as "10 of 10 links up").
            out.append(line(AREA, "NVLink", "WARN", f"not checked: nvidia-smi nvlink -s printed {len(n['links'])} "
                            f"link line(s) of the {count} a {n.get('name') or g.get('product_name')} has (output cut "
                            "short?) (unreadable)", "read the host again (nvidia-smi nvlink -s on it)",
                            subject=subject))
        elif not up and len(with_links) == 1 and not board:
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
                            inactive + (f" on an NVSwitch board ({board})" if board else "; the GPUs talk over PCIe"),
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
    # A GPU the other facts list that nvlink -s printed no link of, while its peers have links: not checked,
    # named (never left out as if it had no NVLink).
    listed = {n.get("uuid") for n in with_links}
    linked_ids = {id(n) for n in with_links}  # by identity: 'n not in with_links' compared every pair (quadratic)
    silent = {n.get("uuid"): n for n in links if isinstance(n, dict) and id(n) not in linked_ids}
    # A GPU listed with no link line whose part no GPU with links is (a mixed host's L4 beside bridged H100s): a
    # part without NVLink, as nvidia-smi prints one; said, not unreadable.
    linked = {n.get("name") for n in with_links}
    for g in gpus_of(facts):
        if g.get("uuid") in listed:
            continue
        quiet = silent.get(g.get("uuid"))
        if quiet is not None and quiet.get("name") and quiet.get("name") not in linked:
            out.append(line(AREA, "NVLink", "PASS", f"no NVLink: nvidia-smi nvlink -s lists this {quiet['name']} "
                            "with no link, as it prints a part without NVLink (the GPUs with links are "
                            + ", ".join(sorted(str(x) for x in linked)) + ")", subject=subject_of(g)))
            continue
        said = ("nvidia-smi nvlink -s printed no link line for it" if quiet is not None
                else "nvidia-smi nvlink -s did not list it")
        out.append(line(AREA, "NVLink", "WARN", f"not checked: {said}, though its peers have links (unreadable)",
                        "read the host again (nvidia-smi nvlink -s on it); nvidia-smi -q shows whether the GPU is "
                        "still on the bus", subject=subject_of(g)))
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
                    and re.fullmatch(r"NV[0-9]+", str(v))})
    return (", ".join(pairs[:3]) + (f" and {len(pairs) - 3} more" if len(pairs) > 3 else "")) if pairs else None
